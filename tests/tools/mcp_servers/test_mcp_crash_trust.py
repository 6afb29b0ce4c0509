"""Trust governs what happens after a crash: a real `xclaw serve` SIGKILLed while an MCP
server of our own (tests/tools/mcp_servers/idempotent_server.py) works on a call its tool
declares idempotent. Untrusted, the call is not run again on resume (the model hears it may
or may not have run); trusted, or allowed by `tool_policies`, it runs again by itself. The
server's own call log says how often the call reached it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.gateway.harness import Client, Server, write_script
from tests.tools.mcp_servers.servers import children_running
from xclaw.store import open_store
from xclaw.store.steps.model import StepStatus, StepType

pytestmark = pytest.mark.slow

SERVER = Path(__file__).with_name("idempotent_server.py")
NAME = "mcp__slow__slow_add"
CALL = {"name": NAME, "input": {"a": 2, "b": 3, "seconds": 5}}


class SlowServe(Server):
    """`xclaw serve` with the idempotent server configured as `slow` (plus `server_extra`
    inside its entry and `more_yaml` after it)."""

    server_extra: str = ""
    more_yaml: str = ""

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(
            config.read_text()
            + "mcp_servers:\n  slow:\n"
            + f"    command: {sys.executable}\n    args: [{SERVER}]\n"
            + f"    env: {{CALL_LOG: {self.root / 'calls.log'}}}\n"
            + self.server_extra
            + self.more_yaml
        )
        return env


async def _kill_mid_call_and_resume(server: SlowServe) -> tuple[list[dict], list, list]:
    """Start the call, SIGKILL serve while the server works on it, start again, reconnect,
    wait for the reply; returns (approval requests, tool steps, resume alerts)."""
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    await c.send({"type": "message", "sessionId": sid, "content": "add them"})
    await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running", timeout=60)
    log = server.root / "calls.log"
    for _ in range(600):  # the call has reached the server
        if log.exists() and log.read_text():
            break
        await asyncio.sleep(0.05)
    assert server.proc is not None
    serve_pid = server.proc.pid
    mcp = children_running(str(SERVER), parent=serve_pid)
    server.kill()
    for _ in range(600):  # the orphaned server sees its stdin close and exits
        if not [p for p in mcp if p in children_running(str(SERVER))]:
            break
        await asyncio.sleep(0.05)
    server.start()
    c2 = await Client.open(server)
    await c2.send({"type": "reconnect", "sessionId": sid})
    reply = await c2.until_type("reply", timeout=90)
    assert reply["content"] == "Done."
    asked = c2.of_type("approval_request")
    for client in (c, c2):
        await client.close()
    store = open_store(str(server.home / "xclaw.db"))
    try:
        calls = [s for s in store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
        resume = [s for s in store.record.steps(sid) if s.name == "resume"]
    finally:
        store.close()
    return asked, calls, resume


def _serve(tmp_path: Path, server_extra: str = "", more_yaml: str = "") -> SlowServe:
    root = tmp_path / "srv"
    root.mkdir()
    script = write_script(
        root / "script.json",
        [{"text": "Adding.", "tool_calls": [CALL]}, {"text": "Done."}],
    )
    server = SlowServe(root=root, script=script, approval="yolo")
    server.server_extra = server_extra
    server.more_yaml = more_yaml
    return server.start()


async def test_an_untrusted_idempotent_call_is_not_run_again_after_a_crash(
    tmp_path: Path,
) -> None:
    server = _serve(tmp_path)
    try:
        asked, calls, resume = await _kill_mid_call_and_resume(server)
    finally:
        server.kill()
    assert [s.status for s in calls] == [StepStatus.FAILED]
    assert calls[0].error_message == "interrupted"
    assert resume and resume[-1].input_data["retrying"] == []
    assert (server.root / "calls.log").read_text() == "slow_add 2 3\n"  # reached it once
    assert asked == []  # the model did not issue it again: nothing to ask


@pytest.mark.parametrize(
    ("server_extra", "more_yaml"),
    [
        ("    trusted: true\n", ""),
        ("", f"tool_policies:\n  {NAME}: {{resume: retry}}\n"),
    ],
    ids=["trusted", "tool_policies"],
)
async def test_trusted_or_allowed_by_policy_the_idempotent_call_runs_again(
    tmp_path: Path, server_extra: str, more_yaml: str
) -> None:
    server = _serve(tmp_path, server_extra, more_yaml)
    try:
        asked, calls, resume = await _kill_mid_call_and_resume(server)
    finally:
        server.kill()
    assert [s.status for s in calls] == [StepStatus.FAILED, StepStatus.COMPLETED]
    assert calls[1].output_data == "5" and calls[0].call_id == calls[1].call_id
    assert resume and resume[-1].input_data["retrying"] == [calls[0].display_id]
    assert (server.root / "calls.log").read_text() == "slow_add 2 3\n" * 2
    assert asked == []
