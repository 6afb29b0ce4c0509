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


# What `xclaw --help` lists each command as, so that it imports none of their modules (it
# imported all of them for this): the command's `short_help` (shown whole), or the first sentence
# of its help (click shortens it to the width). tests/test_startup_imports.py holds the listing
# to what the commands' own definitions give.
SUMMARIES: dict[str, dict[str, str]] = {
    "acp": {
        "help": "Serve the Agent Client Protocol (version 1) on stdin/stdout: an editor starts "
        "this command and talks JSON-RPC to it."
    },
    "budget": {"short_help": "Caps on model spend: show, set, grant."},
    "chat": {"help": "Chat with the agent through a running `xclaw serve`."},
    "container": {"short_help": "A session's container and what runs in it."},
    "demo": {"help": "Show crash, resume, rollback and fork on a real server, in under a minute."},
    "diff": {"short_help": "What changed between two steps, or between two sessions."},
    "export": {"short_help": "Sessions and their steps as JSON Lines (see xclaw import)."},
    "fork": {"short_help": "Branch a new session off a step."},
    "fsck": {"short_help": "Check every invariant of a database (and repair)."},
    "gc": {
        "short_help": "Delete sessions not updated for a while, with their snapshots and blobs."
    },
    "hook": {"short_help": "Webhooks: a signed POST sends a message to a session."},
    "import": {"short_help": "Load sessions written by `xclaw export`."},
    "mcp": {
        "help": "Serve xclaw's sessions as an MCP server on stdin/stdout (an MCP host starts "
        "this command)."
    },
    "replay": {"short_help": "Re-run a recorded session; report where tools differ."},
    "rollback": {"short_help": "Rewind a session to just before a step."},
    "run": {"help": "Run a task headless, in this process, printing the conversation."},
    "schedule": {"short_help": "Messages sent to a session by a clock."},
    "schema": {"help": "Print a schema of the wire (docs/protocol.md)."},
    "serve": {
        "help": "Start the gateway: clients connect to ws://HOST:PORT/ws with the access token."
    },
    "sessions": {"short_help": "List sessions, most recently updated first."},
    "share": {"short_help": "Share a session with a user, or stop sharing it."},
    "snapshots": {"short_help": "The workspace snapshots of a session."},
    "steps": {"short_help": "The latest steps of a session (like /steps)."},
    "tools": {
        "help": "List every tool (built-in, Python, MCP) with its source, approval and resume policy."
    },
    "trace": {"short_help": "The step tree of a session, with times and tokens."},
    "users": {"short_help": "The people of a shared server and their tokens."},
    "workers": {"short_help": "Workers on this database and the sessions they drive."},
}


class _Commands(XclawGroup):
    """The `xclaw` group, its commands registered when first looked up (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            from xclaw.cli.startup import importing

            with importing():
                importlib.import_module(f"xclaw.cli.{COMMANDS[cmd_name]}").register(self)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands, each as SUMMARIES says (or as registered, when it is)."""
        listing = click.Group(
            commands=[
                self.commands.get(name)
                or click.Command(
                    name,
                    help=SUMMARIES[name].get("help"),
                    short_help=SUMMARIES[name].get("short_help"),
                )
                for name in self.list_commands(ctx)
            ]
        )
        listing.format_commands(ctx, formatter)


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

    from xclaw.cli import startup
    from xclaw.security.credentials import command_line_secrets, hide_in_cmdline

    startup.begin()

    # `ps` shows every command line to every local user: no password or token stays there.
    hide_in_cmdline(command_line_secrets(sys.argv[1:]))
    cli()
