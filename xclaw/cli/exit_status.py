"""[cli] How every `xclaw` subcommand ends on an error: one `error: …` line on stderr and the exit
status the error's kind carries (xclaw.errors: EXIT_USAGE 2 for what the command was given —
arguments, configuration, a database it may not use, an unknown session, a bad input file —
EXIT_FAILED 1 for a failure once it ran). The commands call `fail`; `XclawGroup` applies the
same rule to any xclaw error a command did not catch itself, so none ends in a traceback."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from xclaw.errors import EXIT_FAILED, EXIT_USAGE, XclawError

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "XclawGroup", "fail", "fail_on"]


def fail(message: str, code: int) -> NoReturn:
    """Print `error: message` (inert on a terminal) on stderr and exit with `code`."""
    from xclaw.terminal.text import SafeConsole

    SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False).print(
        f"error: {message}", style="red"
    )
    sys.exit(code)


def fail_on(e: XclawError, message: str | None = None) -> NoReturn:
    """End the command on `e`, with the exit status its kind carries."""
    fail(e.message if message is None else message, e.exit_code)


class XclawGroup(click.Group):
    """The `xclaw` group: an xclaw error that reaches it ends the command by the rule."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except XclawError as e:
            fail_on(e)
