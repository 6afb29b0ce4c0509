"""[cli] The `xclaw` command: one click group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from xclaw import __version__
from xclaw.cli.exit_status import XclawGroup


@click.group(
    cls=XclawGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="xclaw")
def cli() -> None:
    """xclaw: an agent runtime whose state survives anything.

    Every step of every session is committed to a database before its side effect happens,
    so a killed server resumes without losing or repeating work; /steps, /rollback and /fork
    rewind or branch a session.
    """


def _register() -> None:
    # Imported here, not at module top, so `xclaw --help` stays fast and import-side-effect free.
    from xclaw.cli import (
        commands_acp,
        commands_budget,
        commands_chat,
        commands_container,
        commands_demo,
        commands_mcp,
        commands_ops,
        commands_retention,
        commands_run,
        commands_schedules,
        commands_schema,
        commands_serve,
        commands_store,
        commands_tools,
        commands_users,
        commands_workers,
        commands_workspace,
    )

    commands_store.register(cli)
    commands_retention.register(cli)
    commands_workspace.register(cli)
    commands_container.register(cli)
    commands_run.register(cli)
    commands_serve.register(cli)
    commands_workers.register(cli)
    commands_chat.register(cli)
    commands_demo.register(cli)
    commands_ops.register(cli)
    commands_tools.register(cli)
    commands_schema.register(cli)
    commands_users.register(cli)
    commands_budget.register(cli)
    commands_schedules.register(cli)
    commands_acp.register(cli)
    commands_mcp.register(cli)


def main() -> None:
    import sys

    from xclaw.security.credentials import command_line_secrets, hide_in_cmdline

    # `ps` shows every command line to every local user: no password or token stays there.
    hide_in_cmdline(command_line_secrets(sys.argv[1:]))
    _register()
    cli()
