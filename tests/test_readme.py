"""The README's "Try it by hand" as a newcomer types it into a fresh shell: every command runs
without activating the environment, and parses (its subcommand and options exist)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from xclaw.cli.main import _register, cli

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _commands() -> list[str]:
    """Every command line of the section: code-block lines, and inline `...` spans that are
    a command line rather than a name (`xclaw chat` the client): they set a variable first or
    spell out the program's path. Comments and a trailing & dropped."""
    section = _section("Try it by hand")
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        lines += [line.split("#", 1)[0].strip() for line in block.splitlines()]
    prose = re.sub(r"```.*?```", "", section, flags=re.S)
    lines += [
        span
        for span in re.findall(r"`([^`]+)`", prose)
        if re.search(r"\bxclaw \w", span) and re.match(r"[A-Z_]+=|\S*/xclaw ", span)
    ]
    return [line.rstrip("& ").strip() for line in lines if line.strip()]


def test_the_section_has_the_commands_it_talks_about() -> None:
    runs = [c for c in _commands() if "xclaw" in c]
    assert len(runs) >= 5, runs


@pytest.mark.parametrize("command", [c for c in _commands() if "xclaw" in c])
def test_each_command_runs_in_a_fresh_shell_and_parses(command: str) -> None:
    words = shlex.split(command)
    if words[0] == "export":
        return  # a shell builtin, sets what the next lines read
    while "=" in words[0] and not words[0].startswith("-"):  # VAR=value before the command
        words.pop(0)
    program, args = words[0], words[1:]
    # No activate step: the program is the environment's own script, from the repository.
    assert program == ".venv/bin/xclaw", command
    _register()
    name, rest = args[0], args[1:]
    sub = cli.commands.get(name)
    assert sub is not None, f"{command}: no such command {name!r}"
    try:
        sub.make_context(name, list(rest))  # options and their values, without running
    except click.ClickException as e:
        pytest.fail(f"{command}: {e.format_message()}")
