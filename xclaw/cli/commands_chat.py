"""[cli] `xclaw chat`: talk to a running gateway from the terminal (or from a pipe)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from xclaw.config.settings import Settings, load_settings
from xclaw.errors import XclawError
from xclaw.wire.token import read_token

if TYPE_CHECKING:
    from xclaw.cli.chat import ChatOptions
    from xclaw.terminal.render import Renderer


def register(cli: click.Group) -> None:
    @cli.command("chat")
    @click.option(
        "--url",
        default=None,
        metavar="URL",
        help="Gateway URL: the server's start-up link (http://127.0.0.1:3000/?token=…) or "
        "ws://HOST:PORT/ws. Default http://127.0.0.1:$WEB_PORT (3000).",
    )
    @click.option(
        "--session",
        "-r",
        "session",
        default=None,
        metavar="ID",
        help="Attach to this session (and remember it in .cli_session).",
    )
    @click.option("--new", "new", is_flag=True, help="Start a new session (ignore .cli_session).")
    @click.option(
        "--token",
        default=None,
        help="Access token. The first of these is used: --token, the ?token= of --url, "
        "XCLAW_TOKEN (environment, then .env), $XCLAW_HOME/token (written by xclaw serve "
        "on this machine).",
    )
    def chat_cmd(url: str | None, session: str | None, new: bool, token: str | None) -> None:
        """Chat with the agent through a running `xclaw serve`.

        The session id is kept in .cli_session in the working directory, so running
        `xclaw chat` again continues the same conversation (with its history); delete the
        file or pass --new for a fresh one. Type /help for the slash commands; /switch ID
        follows a fork, /new starts over. Ctrl+C cancels the run, a second Ctrl+C quits.
        When the server goes away the client reconnects by itself.

        With stdin not a terminal, lines are read from it and sent one at a time, each
        after the previous reply: `printf 'hello\\n/steps\\n' | xclaw chat`.
        """
        from xclaw.cli.startup import importing

        with importing():
            from xclaw.cli.chat import SESSION_FILE, ChatOptions, read_session_file, ws_url
            from xclaw.terminal.render import Renderer, make_console

        if new and session:
            raise click.UsageError("--new and --session exclude each other")
        try:
            settings = load_settings()
        except XclawError as e:
            click.secho(f"error: {e.message}", fg="red", err=True)
            sys.exit(e.exit_code)
        try:
            target, url_token = ws_url(url or f"http://127.0.0.1:{settings.port}")
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--url") from None
        session_file = Path.cwd() / SESSION_FILE
        session_id = None if new else (session or read_session_file(session_file))
        found, source = _token(token, url_token, settings)
        opts = ChatOptions(
            url=target,
            token=found,
            token_source=source,
            session_id=session_id,
            explicit=bool(session) and not new,
            session_file=session_file,
            history_file=settings.home / "chat_history",
        )
        renderer = Renderer(make_console())
        code = asyncio.run(_main(opts, renderer))
        sys.exit(code)


def _token(option: str | None, in_url: str | None, settings: Settings) -> tuple[str | None, str]:
    """The access token and where it came from, by the precedence `--help` states."""
    sources = (
        (option, "--token"),
        (in_url, "the ?token= of --url"),
        (settings.token, "XCLAW_TOKEN"),  # the environment over .env (load_settings)
        (read_token(settings.home), f"{settings.home}/token"),
    )
    return next(((t, where) for t, where in sources if t), (None, ""))


async def _main(opts: ChatOptions, renderer: Renderer) -> int:
    from xclaw.cli.chat import ChatClient, PipeInput, TerminalInput

    if sys.stdin.isatty():
        return await ChatClient(opts, renderer, TerminalInput(opts.history_file)).run()
    return await ChatClient(opts, renderer, PipeInput(renderer)).run()
