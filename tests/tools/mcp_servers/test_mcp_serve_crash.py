"""A real `xclaw serve` SIGKILLed while a real MCP server (server-everything) works on a long
call: the write-ahead row is there, the server child goes away with its parent, and after the
restart the call — read-only and idempotent by the annotations of a server configured
`trusted: true` — runs again on its own. (Untrusted, it would not: test_mcp_crash_trust.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from tests.gateway.harness import Client, Server, write_script
from tests.tools.mcp_servers.servers import children_running, everything
from xclaw.store import open_store
from xclaw.store.model import StepStatus, StepType

pytestmark = pytest.mark.slow

LONG = {"name": "mcp__ev__trigger-long-running-operation", "input": {"duration": 6, "steps": 3}}


class McpServe(Server):
    """`xclaw serve` with server-everything configured as MCP server `ev` (plus
    `server_extra` inside its entry and `more_yaml` after it)."""

    server_extra: str = ""
    more_yaml: str = ""

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(
            config.read_text()
            + f"mcp_servers:\n  ev:\n    command: {everything()}\n"
            + self.server_extra
            + self.more_yaml
        )
        return env


async def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid not in children_running("mcp-server-everything"):
            return True
        await asyncio.sleep(0.1)
    return False


async def test_sigkill_of_serve_during_a_long_mcp_call_then_resume(tmp_path: Path) -> None:
    everything()  # skip or fail before starting anything if it is not installed
    root = tmp_path / "srv"
    root.mkdir()
    script = write_script(
        root / "script.json",
        [
            {"text": "This takes a while.", "tool_calls": [LONG]},
            {"text": "The long operation finished."},
        ],
    )
    server = McpServe(root=root, script=script, approval="yolo")
    server.server_extra = "    trusted: true\n"
    server.start()
    orphans: list[int] = []
    try:
        c = await Client.open(server)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "run the long operation"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running", timeout=60)
        assert server.proc is not None
        serve_pid = server.proc.pid
        deadline = time.monotonic() + 30
        while not (mcp := children_running("mcp-server-everything", parent=serve_pid)):
            assert time.monotonic() < deadline, "no MCP server child of xclaw serve"
            await asyncio.sleep(0.05)
        orphans.extend(mcp)

        server.kill()  # SIGKILL while the MCP call is in flight

        # Write-ahead: the call's row was committed before the call went to the server.
        store = open_store(str(server.home / "xclaw.db"))
        try:
            [row] = [s for s in store.steps(sid) if s.step_type is StepType.TOOL_CALL]
            assert row.name == LONG["name"] and row.status is StepStatus.RUNNING
        finally:
            store.close()
        # The orphaned server sees its stdin close and exits.
        for pid in mcp:
            assert await wait_gone(pid), "the MCP server outlived xclaw serve"

        server.start()
        c2 = await Client.open(server)
        await c2.send({"type": "reconnect", "sessionId": sid})
        notice = await c2.until_type("notice", timeout=30)
        assert notice["content"] == "[resume] detected interrupted tool_call, retrying..."
        reply = await c2.until_type("reply", timeout=90)
        assert reply["content"] == "The long operation finished."
        assert not c2.of_type("approval_request")  # trusted, read-only, idempotent: no question

        store = open_store(str(server.home / "xclaw.db"))
        try:
            calls = [s for s in store.steps(sid) if s.step_type is StepType.TOOL_CALL]
            resume = [s for s in store.steps(sid) if s.name == "resume"]
        finally:
            store.close()
        assert [s.status for s in calls] == [StepStatus.FAILED, StepStatus.COMPLETED]
        assert calls[0].error_message == "interrupted"
        assert "Long running operation" in calls[1].output_data
        assert calls[0].call_id == calls[1].call_id  # the same call, run again
        assert resume and resume[-1].input_data["retrying"] == [calls[0].display_id]
        for client in (c, c2):
            await client.close()
    finally:
        server.kill()
        for pid in orphans:
            if pid in children_running("mcp-server-everything"):
                os.kill(pid, signal.SIGKILL)


async def test_a_call_configured_not_to_retry_is_asked_again_with_the_may_have_run_warning(
    tmp_path: Path,
) -> None:
    """`tool_policies: {...: {resume: ask}}` overrides the annotations: after the kill the
    model hears the call may have run, re-issues it, and a human is asked (maybeRepeated)."""
    everything()
    root = tmp_path / "srv"
    root.mkdir()
    script = write_script(
        root / "script.json",
        [
            {"text": "This takes a while.", "tool_calls": [LONG]},
            {"text": "Trying it again.", "tool_calls": [LONG]},
            {"text": "Done after asking."},
        ],
    )
    server = McpServe(root=root, script=script, approval="yolo")
    server.more_yaml = f"tool_policies:\n  {LONG['name']}: {{resume: ask}}\n"
    server.start()
    try:
        c = await Client.open(server)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "run it"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running", timeout=60)
        assert server.proc is not None
        serve_pid = server.proc.pid
        server.kill()
        for pid in children_running("mcp-server-everything", parent=serve_pid):
            assert await wait_gone(pid)

        server.start()
        c2 = await Client.open(server)
        await c2.send({"type": "reconnect", "sessionId": sid})
        ask = await c2.until_type("approval_request", timeout=60)
        assert ask["name"] == LONG["name"] and ask["maybeRepeated"] is True
        await c2.send(
            {"type": "approval", "sessionId": sid, "stepId": ask["stepId"], "approve": True}
        )
        reply = await c2.until_type("reply", timeout=90)
        assert reply["content"] == "Done after asking."
        for client in (c, c2):
            await client.close()
    finally:
        server.kill()
