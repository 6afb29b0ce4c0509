"""What the `xclaw` processes the suite (and a user) start do not import: the largest packages
a command needs only sometimes are loaded when first used. Every start of `xclaw serve` or
`xclaw run` paid for them before (the MCP SDK was about half of `xclaw serve`'s CPU before it
listened; rich's Markdown renderer, with markdown-it and Pygments, a fifth of `xclaw run`'s),
and every test worker importing tests/llm/test_anthropic.py to collect it loaded the Anthropic
SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The command with every subcommand registered: what `xclaw serve` and `xclaw run` load first.
CLI = "import xclaw.cli.main\nxclaw.cli.main._register()"


def loaded_by(code: str, packages: tuple[str, ...]) -> list[str]:
    """The modules of `packages` that running `code` loads, in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys\nprint(*(m for m in sys.modules if m.split('.')[0] in {packages!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


# `xclaw mcp` run to its end (stdin closed at once: the host went away) on a new database
# with the scripted model.
MCP_SERVER = """import json, os, tempfile
from xclaw.cli.main import _register, cli
_register()
d = tempfile.mkdtemp()
with open(os.path.join(d, "s.json"), "w") as f:
    json.dump({"turns": [{"text": "hi"}]}, f)
args = ["mcp", "--db", os.path.join(d, "x.db"), "--model", "script:" + os.path.join(d, "s.json")]
try:
    cli.main(args, standalone_mode=False)
except SystemExit:
    pass"""


@pytest.mark.parametrize(
    ("code", "packages"),
    [
        # The MCP SDK: loaded by the first request to /mcp (tests/gateway/test_mcp_http.py).
        ("import xclaw.gateway.server", ("mcp", "mcp_types")),
        # Markdown: only when an answer is rendered on a terminal (tests/cli/test_terminal_render.py).
        ("import xclaw.terminal.render", ("markdown_it", "pygments")),
        # The Anthropic SDK (over 2 s of CPU): by the first request (tests/llm/test_anthropic.py).
        ("import xclaw.llm.anthropic", ("anthropic",)),
        # The OpenAI SDK (over 1 s): likewise (tests/llm/test_openai.py).
        ("import xclaw.llm.openai", ("openai",)),
        (CLI, ("mcp", "mcp_types", "markdown_it", "pygments")),
        # The ACP SDK (~1 s): `xclaw mcp` set its logging up from xclaw/acp/serve.py, which
        # loaded it (xclaw/acp/stderr_log.py).
        (MCP_SERVER, ("acp",)),
    ],
)
def test_a_start_does_not_load_what_it_may_not_use(code: str, packages: tuple[str, ...]) -> None:
    assert loaded_by(code, packages) == []


def test_a_command_loads_no_other_commands_module() -> None:
    """`xclaw serve` (and every command) imports its own module of xclaw/cli, not all of them."""
    code = (
        "import sys\nfrom xclaw.cli.main import main\n"
        "sys.argv = ['xclaw', 'serve', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    loaded = [m for m in loaded_by(code, ("xclaw",)) if m.startswith("xclaw.cli.commands_")]
    assert loaded == ["xclaw.cli.commands_serve"], loaded


def test_the_table_of_commands_is_what_the_modules_register() -> None:
    """main.COMMANDS names each command's module: exactly the commands `_register` adds, each
    found through the table alone."""
    import importlib

    import click

    from xclaw.cli.main import COMMANDS

    for name, module in COMMANDS.items():
        group = click.Group()
        importlib.import_module(f"xclaw.cli.{module}").register(group)
        assert name in group.commands, (name, module)
    out = subprocess.run(
        [sys.executable, "-c", CLI + "\nprint(*sorted(xclaw.cli.main.cli.commands))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out == sorted(COMMANDS)
