"""A real `xclaw serve` SIGKILLed while a real MCP server (server-everything) works on a long
call: the write-ahead row is there, the server child goes away with its parent, and after the
restart the call — read-only and idempotent by the annotations of a server configured
`trusted: true` — runs again on its own. (Untrusted, it would not: test_mcp_crash_trust.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.harness import Client, Server, write_script
from tests.tools.mcp_servers.servers import children_running, everything, python_server
from xclaw.store import open_store
from xclaw.store.steps.model import StepStatus, StepType

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
            [row] = [s for s in store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
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
            calls = [s for s in store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
            resume = [s for s in store.record.steps(sid) if s.name == "resume"]
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
        # Its MCP server, looked up while it is still xclaw serve's child (after the kill it
        # is init's), then gone with it.
        mcp = children_running("mcp-server-everything", parent=server.proc.pid)
        assert mcp, "no MCP server child of xclaw serve"
        server.kill()
        for pid in mcp:
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


# An MCP server that leaves a process of its own behind (as npm servers' helpers do): a
# `sleep` started with every inheritable descriptor the server got, then the real server.
CARELESS = """
import os, subprocess, sys
child = subprocess.Popen(["sleep", "120"], close_fds=False, start_new_session=True)
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
os.execv(sys.argv[2], [sys.argv[2]])
"""


class CarelessServe(Server):
    """`xclaw serve` with CARELESS wrapping mcp-server-time as MCP server `time`."""

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        args = [self.root / "careless.py", self.root / "left-behind.pid"]
        config.write_text(
            config.read_text()
            + f"mcp_servers:\n  time:\n    command: {sys.executable}\n"
            + f"    args: [{args[0]}, {args[1]}, {python_server('mcp-server-time')}]\n"
        )
        return env


def listening_inodes(port: int) -> set[str]:
    """Socket inodes of the TCP sockets listening on `port` (any address), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(fields[9])
    return inodes


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            out.add(target.removeprefix("socket:[").removesuffix("]"))
    return out


async def test_a_process_a_tool_left_behind_does_not_keep_the_port_of_a_killed_serve(
    tmp_path: Path,
) -> None:
    """The gateway's listening sockets are not inherited: a process started by an MCP server
    (or any child) that outlives a SIGKILLed `xclaw serve` does not hold its port, and the
    server starts again on that port while the process still runs."""
    root = tmp_path / "srv"
    root.mkdir()
    wrapper = root / "careless.py"
    wrapper.write_text(CARELESS)
    pidfile = root / "left-behind.pid"
    call = {"name": "mcp__time__get_current_time", "input": {"timezone": "UTC"}}
    script = write_script(
        root / "script.json", [{"text": "", "tool_calls": [call]}, {"text": "It is now."}]
    )
    server = CarelessServe(root=root, script=script, approval="yolo")
    server.start()
    left: int | None = None
    try:
        c = await Client.open(server)
        await c.attach(None)
        assert (await c.turn("what time is it?"))["content"] == "It is now."
        left = int(pidfile.read_text())
        listeners = listening_inodes(server.port)
        assert listeners, "xclaw serve listens on no socket of its port"
        await c.close()

        server.kill()
        assert alive(left), "the process left behind is gone already"
        assert not socket_inodes(left) & listeners, "a tool's process holds the gateway's port"
        assert not listening_inodes(server.port)
        server.start()  # the same port, while the process left behind still runs
        assert alive(left)
    finally:
        server.kill()
        if left is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(left, signal.SIGKILL)
