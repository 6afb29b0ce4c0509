"""`xclaw tools`, `/tools`, a misspelled xclaw.yaml key, and the rollback/fork note on steps
with effects outside the workspace — as a user meets them (real processes, real servers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.harness import clean_env
from tests.tools.mcp_servers.servers import everything, python_server
from xclaw.gateway.commands import CommandRunner
from xclaw.tools.mcp.config import parse_servers
from xclaw.wire.protocol import parse_command

pytestmark = pytest.mark.slow


def xclaw(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        cwd=cwd,
        env=clean_env(XCLAW_HOME=str(cwd / "home"), NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_tools_check_starts_each_server_and_names_the_one_that_fails(tmp_path: Path) -> None:
    (tmp_path / "xclaw.yaml").write_text(
        "mcp_servers:\n"
        f"  time: {{command: {python_server('mcp-server-time')}, trusted: true}}\n"
        "  gone: {command: xclaw-no-such-mcp-server}\n"
    )
    plain = xclaw(tmp_path, "tools")
    assert plain.returncode == 0, plain.stderr
    assert "shell" in plain.stdout and "time: stdio" in plain.stdout
    assert "not started yet" in plain.stdout  # without --check nothing is started

    checked = xclaw(tmp_path, "tools", "--check", "--json")
    assert checked.returncode == 1  # one server failed
    data = json.loads(checked.stdout)
    servers = {s["name"]: s for s in data["servers"]}
    assert servers["time"]["status"] == "ok" and "get_current_time" in " ".join(
        servers["time"]["tools"]
    )
    assert servers["gone"]["status"] == "error" and "'gone'" in servers["gone"]["error"]
    tools = {t["name"]: t for t in data["tools"]}
    current = tools["mcp__time__get_current_time"]
    assert current["source"] == "MCP server 'time'" and current["readOnly"] is True
    assert current["approval"] == "runs" and current["resume"] == "retried"  # trusted
    assert current["inputSchema"]["properties"]["timezone"]["type"] == "string"
    assert tools["read_file"]["source"] == "built-in"


def test_a_misspelled_key_stops_every_command_with_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "xclaw.yaml").write_text("mcp_server:\n  time: {command: mcp-server-time}\n")
    for args in (("run", "hello"), ("tools",), ("serve", "--port", "0")):
        r = xclaw(tmp_path, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "unknown key 'mcp_server'; did you mean 'mcp_servers'?" in r.stderr
        assert "Traceback" not in r.stderr


async def test_tools_command_and_rollback_fork_notes_in_the_gateway(make) -> None:
    h = make(
        [
            {
                "text": "Change things.",
                "tool_calls": [
                    {"name": "mcp__ev__toggle-simulated-logging", "input": {}},
                    {"name": "mcp__ev__echo", "input": {"message": "read-only"}},
                    {"name": "mcp__ev__toggle-subscriber-updates", "input": {}},
                ],
            },
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=parse_servers(
            {"ev": {"command": everything(), "trusted": True}}, dict(os.environ)
        ),
    )
    sid = await h.ask("go")
    runner = CommandRunner(h.runtime, h.store)

    async def run(text: str) -> str:
        cmd = parse_command(text)
        assert cmd is not None
        result = await runner.run(sid, cmd)
        return "\n".join(
            f["content"] for f in result.reply + result.broadcast if f.get("type") == "notice"
        )

    listing = await run("/tools")
    assert "mcp__ev__echo" in listing and "MCP server 'ev'" in listing
    assert "effects outside the workspace" in listing

    steps = h.store.record.steps(sid)
    first_call = next(s for s in steps if s.name == "mcp__ev__toggle-simulated-logging")
    marks = [s for s in steps if s.name == "outside_effects"]
    assert len(marks) == 2
    fork_text = await run(f"/fork {first_call.display_id}")
    assert "1 step had effects outside the workspace; it is not undone" in fork_text
    assert "mcp__ev__toggle-subscriber-updates" in fork_text

    assert "the original session" in fork_text and "still owns it" in fork_text

    # Nothing undoes an unconfigured MCP tool's effects: the rollback names them and waits
    # for the explicit word, then rewinds leaving them done, and says so.
    first_user = next(s for s in steps if s.step_type.value == "user_input")
    shown = await run(f"/rollback {first_user.display_id}")
    assert "NOT undone — they stay done (2)" in shown
    assert f"{first_call.display_id} mcp__ev__toggle-simulated-logging: not undone" in shown
    assert h.store.record.steps(sid) == steps  # a preview does nothing
    rolled = await run(f"/rollback {first_user.display_id} --accept-irreversible")
    assert "2 outside effect(s) NOT undone (they stay done)" in rolled


def test_the_outside_check_through_xclaw_run_shows_the_servers_answer(tmp_path: Path) -> None:
    """An MCP server as a new user adds it: `mcp_servers: {time: {command: mcp-server-time}}`,
    a scripted model calling mcp__time__get_current_time {"timezone": "UTC"}. Untrusted, with no
    terminal to ask, the call is denied (exit 3); trusted, it completes and the terminal shows
    the answer itself, not the first line of pretty-printed JSON (`↳ { …`)."""
    (tmp_path / "s.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "mcp__time__get_current_time", "input": {"timezone": "UTC"}}
                        ]
                    },
                    {"text": "done"},
                ]
            }
        )
    )
    env = clean_env(
        XCLAW_HOME=str(tmp_path / "home"), NO_COLOR="1", XCLAW_MODEL=f"script:{tmp_path / 's.json'}"
    )

    def run(yaml: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "xclaw.yaml").write_text(yaml)
        return subprocess.run(
            [sys.executable, "-m", "xclaw", "run", "what time is it"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    server = python_server("mcp-server-time")
    denied = run(f"mcp_servers: {{time: {{command: {server}}}}}\n")
    assert denied.returncode == 3, denied.stdout + denied.stderr
    assert "MCP server 'time' is not trusted" in denied.stdout
    ok = run(f"mcp_servers: {{time: {{command: {server}, trusted: true}}}}\n")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    [shown] = [line for line in ok.stdout.splitlines() if line.strip().startswith("↳")]
    assert '"timezone":"UTC"' in shown and '"datetime":"' in shown, shown


IDEMPOTENT_SERVER = Path(__file__).with_name("idempotent_server.py")


@pytest.mark.parametrize(
    ("server_extra", "more_yaml", "resume"),
    [
        ("", "", "ask"),
        (", trusted: true", "", "retry"),
        ("", "tool_policies:\n  mcp__slow__slow_add: {resume: retry}\n", "retry"),
    ],
    ids=["untrusted", "trusted", "tool_policies"],
)
def test_only_trust_or_a_policy_lets_an_idempotent_hint_rerun_calls_after_a_crash(
    tmp_path: Path, server_extra: str, more_yaml: str, resume: str
) -> None:
    """A server's idempotentHint is its own claim: like its readOnlyHint for approval, it
    loosens what happens after a crash only when the server is trusted (or xclaw.yaml says
    so for the tool)."""
    (tmp_path / "xclaw.yaml").write_text(
        "mcp_servers:\n"
        f"  slow: {{command: {sys.executable}, args: [{IDEMPOTENT_SERVER}]{server_extra}}}\n"
        + more_yaml
    )
    listed = xclaw(tmp_path, "tools", "--check")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()
    after = lines[lines.index("  mcp__slow__slow_add") + 2]
    data = json.loads(xclaw(tmp_path, "tools", "--check", "--json").stdout)
    [tool] = [t for t in data["tools"] if t["name"] == "mcp__slow__slow_add"]
    assert tool["traits"]["idempotent"] is True and tool["traits"]["resume"] == resume
    if resume == "retry":
        assert after.endswith("after a crash: retried"), after
        assert tool["resume"] == "retried"
    else:
        assert after.endswith(
            "after a crash: asked again (may have run; MCP server 'slow' is not trusted: "
            "its idempotent hint does not count)"
        ), after
        assert tool["resume"].startswith("asked again (may have run")
