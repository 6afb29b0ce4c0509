"""[cli] The `xclaw` command: one click group; each subcommand lives in its own module."""

from __future__ import annotations

import click

from xclaw import __version__
from xclaw.cli.exit_status import XclawGroup

# Each command's module, so a start imports only the module of the command it runs (and
# `xclaw --help` all of them): importing every command module cost each `xclaw` process
# 2-6 % of its start's CPU (serve 0.967 -> 0.942 CPU-s, chat 0.766 -> 0.717; the suite starts
# hundreds). tests/test_startup_imports.py holds it to what the modules register.
COMMANDS: dict[str, str] = {
    "sessions": "commands_store",
    "steps": "commands_store",
    "trace": "commands_store",
    "rollback": "commands_store",
    "fork": "commands_store",
    "export": "commands_store",
    "gc": "commands_retention",
    "import": "commands_retention",
    "snapshots": "commands_workspace",
    "diff": "commands_workspace",
    "container": "commands_container",
    "run": "commands_run",
    "serve": "commands_serve",
    "workers": "commands_workers",
    "chat": "commands_chat",
    "demo": "commands_demo",
    "fsck": "commands_ops",
    "replay": "commands_ops",
    "tools": "commands_tools",
    "schema": "commands_schema",
    "users": "commands_users",
    "share": "commands_users",
    "budget": "commands_budget",
    "schedule": "commands_schedules",
    "hook": "commands_schedules",
    "acp": "commands_acp",
    "mcp": "commands_mcp",
}


class _Commands(XclawGroup):
    """The `xclaw` group, its commands registered when first looked up (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            importlib.import_module(f"xclaw.cli.{COMMANDS[cmd_name]}").register(self)
        return self.commands.get(cmd_name)


@click.group(
    cls=_Commands,
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
    cli()
