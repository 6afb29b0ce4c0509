"""What the `xclaw` processes the suite (and a user) start do not import: the largest packages
a command needs only sometimes are loaded when first used. Every start of `xclaw serve` or
`xclaw run` paid for them before (the MCP SDK was about half of `xclaw serve`'s CPU before it
listened; rich's Markdown renderer, with markdown-it and Pygments, a fifth of `xclaw run`'s),
and every test worker importing tests/llm/test_anthropic.py to collect it loaded the Anthropic
SDK."""

from __future__ import annotations

import os
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


def _help(columns: int, *, all_registered: bool) -> str:
    """`xclaw --help` at a terminal width, as a start prints it, or with every command's module
    imported first."""
    code = (
        "import sys\nimport xclaw.cli.main as m\n"
        + ("m._register()\n" if all_registered else "")
        + "sys.argv = ['xclaw', '--help']\ntry:\n    m.main()\nexcept SystemExit:\n    pass"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "COLUMNS": str(columns)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


# `xclaw --help` (and every start, before it knows its command): click, xclaw's errors and the
# scrubbing of its own command line; no command's module, hence no configuration, store,
# pydantic, YAML or rich (0.48 -> 0.07 CPU-s a start, bench/README.md "Process starts").
HELP = (
    "import contextlib, io, sys\nfrom xclaw.cli.main import main\nsys.argv = ['xclaw', '--help']\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main()"
)
HELP_LOADS = [
    "xclaw",
    "xclaw.cli",
    "xclaw.cli.exit_status",
    "xclaw.cli.main",
    "xclaw.cli.startup",
    "xclaw.errors",
    "xclaw.security",
    "xclaw.security.credentials",
]


def test_help_loads_no_command_and_nothing_heavy() -> None:
    heavy = ("pydantic", "yaml", "rich", "ctypes", "asyncio", "sqlite3", "secrets")
    assert sorted(loaded_by(HELP, ("xclaw", *heavy))) == HELP_LOADS


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_help_lists_the_commands_as_their_own_definitions_do(columns: int) -> None:
    """The listing comes from main.SUMMARIES without importing the commands: it is exactly what
    click prints from the commands themselves, at any width."""
    lazy = _help(columns, all_registered=False)
    assert "sessions" in lazy and "serve" in lazy
    assert lazy == _help(columns, all_registered=True)


# What `xclaw serve` imports before it listens: the gateway and the runtime over SQLite; none of
# the SDKs, backends or terminal libraries only other commands or configurations use.
SERVE = (
    "import click\nfrom xclaw.cli.main import cli\n"
    "cli.get_command(click.Context(cli), 'serve')\n"
    "from xclaw.gateway.server import serve"
)


def test_serve_loads_no_sdk_backend_or_terminal_library() -> None:
    heavy = (
        "psycopg",
        "psycopg_pool",
        "boto3",
        "botocore",
        "opentelemetry",
        "prompt_toolkit",
        "rich",
        "markdown_it",
        "pygments",
        "mcp",
        "acp",
        "anthropic",
        "openai",
    )
    assert loaded_by(SERVE, heavy) == []
    xclaw_modules = loaded_by(SERVE, ("xclaw",))
    assert not [m for m in xclaw_modules if m.startswith("xclaw.store.postgres")]
    # The frames' and the HTTP bodies' pydantic models (78 classes, ~15 % of a start's CPU):
    # imported by the first request that validates a body or asks for /api/openapi.json.
    for declared in ("xclaw.wire.frames", "xclaw.wire.http_bodies", "xclaw.gateway.openapi"):
        assert declared not in xclaw_modules
    assert [m for m in xclaw_modules if m.startswith("xclaw.cli.commands_")] == [
        "xclaw.cli.commands_serve"
    ]


def test_a_command_process_pauses_the_collector_only_while_it_imports() -> None:
    """`xclaw` commands import with the cycle collector paused, then freeze what they imported;
    a program running the commands in its own process keeps its collector untouched."""
    code = (
        "import gc, click\nfrom xclaw.cli import startup\nfrom xclaw.cli.main import cli\n"
        "cli.get_command(click.Context(cli), 'sessions')\n"
        "print(gc.isenabled(), gc.get_freeze_count())\n"
        "startup.begin()\n"
        "cli.get_command(click.Context(cli), 'serve')\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split("\n")
    assert out[:2] == ["True 0", "True True"]
