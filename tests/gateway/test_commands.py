"""Which texts are slash commands (the rest goes to the agent)."""

from __future__ import annotations

import pytest

from xclaw.wire.protocol import Command, parse_command


@pytest.mark.parametrize(
    "text, expected",
    [
        ("/steps", Command("steps", (), "")),
        ("/steps 5", Command("steps", ("5",), "5")),
        ("  /Fork s0003 plan B  ", Command("fork", ("s0003", "plan", "B"), "s0003 plan B")),
        ("/rollback\ts0002", Command("rollback", ("s0002",), "s0002")),
        ("/nonsense", Command("nonsense", (), "")),
    ],
)
def test_commands(text: str, expected: Command) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    "text", ["hello", "/usr/bin is where ls lives", "/", "//steps", "/123", "a /steps"]
)
def test_not_commands(text: str) -> None:
    assert parse_command(text) is None
