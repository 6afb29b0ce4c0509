"""[cli] `xclaw serve`: the gateway (WebSocket + HTTP API + web page) in front of the runtime."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from xclaw.config.settings import load_settings
from xclaw.errors import EXIT_USAGE, XclawError


def register(cli: click.Group) -> None:
    @cli.command("serve")
    @click.option(
        "--host", default=None, help="Interface to bind (default 127.0.0.1: this machine only)."
    )
    @click.option(
        "--port",
        type=int,
        default=None,
        help="Port (default $WEB_PORT or 3000; 0 picks a free one).",
    )
    @click.option(
        "--db",
        default=None,
        help="SQLite path or postgresql:// URL (default: $XCLAW_DB or $XCLAW_HOME/xclaw.db); "
        "created if there is none, another program's file is refused.",
    )
    @click.option(
        "--workspace", default=None, help="Workspace root (default: $XCLAW_HOME/workspaces)."
    )
    @click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"]),
        default="info",
        show_default=True,
        help="Structured key=value logs on stderr.",
    )
    def serve_cmd(
        host: str | None, port: int | None, db: str | None, workspace: str | None, log_level: str
    ) -> None:
        """Start the gateway: clients connect to ws://HOST:PORT/ws with the access token.

        The token is XCLAW_TOKEN, or generated on first start and kept in $XCLAW_HOME/token
        (mode 0600); the start-up banner prints a ready-made URL that carries it. The server
        starts without an LLM configured and says how to add one. SIGTERM or Ctrl+C stops it
        gracefully: steps in flight end as interrupted and resume on the next start.

        The port is bound first: one taken (or a --host this machine lacks) is one error line
        and exit status 2, before the database is opened or the worker registered.
        """
        from xclaw.cli.startup import importing

        with importing():
            from xclaw.gateway.server import serve

        try:
            settings = load_settings(
                host=host,
                port=port,
                database=db,
                workspace_root=Path(workspace).expanduser() if workspace else None,
            )
            code = serve(settings, log_level=log_level)
        except XclawError as e:
            click.secho(f"error: {e.message}", fg="red", err=True)
            sys.exit(e.exit_code)
        except OSError as e:  # e.g. an address that cannot be bound
            click.secho(f"error: {e}", fg="red", err=True)
            sys.exit(EXIT_USAGE)
        sys.exit(code)
