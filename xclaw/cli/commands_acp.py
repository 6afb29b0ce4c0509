"""[cli] `xclaw acp`: xclaw as an Agent Client Protocol agent on stdin/stdout, for editors (Zed,
JetBrains, Neovim's CodeCompanion, Emacs agent-shell; docs/editors.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from xclaw.api.base import Agent


def register(cli: click.Group) -> None:
    @cli.command(name="acp")
    @click.option(
        "--db",
        default=None,
        help="Database (SQLite path or postgresql:// URL); "
        "default as every command finds it (XCLAW_DB, xclaw.yaml, $XCLAW_HOME/xclaw.db).",
    )
    @click.option(
        "--model",
        default=None,
        help="Provider spec (as XCLAW_MODEL), e.g. anthropic:claude-sonnet-4-5 or script:PATH.",
    )
    @click.option(
        "--approval",
        type=click.Choice(["ask", "auto-edits", "yolo"]),
        default=None,
        help="Approval mode (default: xclaw.yaml's approval.mode, ask).",
    )
    @click.option(
        "--connect",
        "url",
        default=None,
        metavar="URL",
        help="Relay to a running gateway instead (its start-up link, or "
        "http://HOST:PORT): runs go on there while the editor is closed.",
    )
    @click.option(
        "--token",
        default=None,
        help="With --connect: the access token; the first "
        "of --token, the ?token= of the URL, XCLAW_TOKEN, $XCLAW_HOME/token is used.",
    )
    def acp_cmd(
        db: str | None, model: str | None, approval: str | None, url: str | None, token: str | None
    ) -> None:
        """Serve the Agent Client Protocol (version 1) on stdin/stdout: an editor starts
        this command and talks JSON-RPC to it. Nothing else is written to stdout.

        Each editor session is an xclaw session working in the editor's project directory
        (session/new's cwd): rollback and fork rewind its files; the session survives the
        editor and this process (session/load replays it and continues an interrupted run
        without repeating what completed). /steps, /rollback sNNNN and /fork sNNNN [title]
        work as in `xclaw chat`. Approvals are asked through the editor.

        Same database, xclaw.yaml and settings as every other command. With --connect URL,
        the sessions are the gateway's (they work in its workspaces), and a run keeps going
        while the editor is closed. Setup per editor: docs/editors.md.
        """
        from xclaw.cli.startup import importing

        with importing():
            from xclaw.acp.serve import run
            from xclaw.config.settings import load_settings

        # A bad configuration is said now, on stderr, before the editor is answered.
        load_settings(database=db, approval=approval)
        if url is None:
            run(_local(db, model, approval), remote=False)
        else:
            if db or model or approval:
                raise click.UsageError(
                    "--connect takes no --db, --model or --approval: the gateway's are used"
                )
            run(_remote(url, token), remote=True)


def _local(db: str | None, model: str | None, approval: str | None) -> Any:
    async def opener(servers: dict[str, dict[str, Any]]) -> Agent:
        import xclaw
        from xclaw.config.settings import load_settings

        configured = load_settings().mcp_servers
        extra = {n: c for n, c in servers.items() if n not in configured}
        return await xclaw.open(
            db=db, model=model, approval=approval, mcp_servers=extra or None, cwd=Path.cwd()
        )

    return opener


def _remote(url: str, token: str | None) -> Any:
    async def opener(servers: dict[str, dict[str, Any]]) -> Agent:
        from urllib.parse import parse_qs, urlsplit

        import xclaw
        from xclaw.config.settings import load_settings
        from xclaw.wire.token import read_token

        settings = load_settings()
        in_url = parse_qs(urlsplit(url if "://" in url else "http://" + url).query).get("token")
        found = token or (in_url[0] if in_url else None) or settings.token
        found = found or read_token(settings.home)
        return await xclaw.connect(url, token=found)

    return opener
