"""`xclaw mcp` driven by the official `mcp` Python SDK's client over stdio, as an MCP host
drives it: a session started with send_message, its steps read, an approval answered with the
approve tool (or through elicitation where the host supports it), structured results, the
resources; and the server killed mid-tool, started again, the run continued without repeating
the interrupted call blindly."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult

from tests.acp.client import agent_env

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def _sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@asynccontextmanager
async def _mcp(
    tmp: Path, turns: list[dict[str, Any]], *args: str, elicit: Any = None
) -> AsyncIterator[ClientSession]:
    script = tmp / "script.json"
    if not script.exists():
        script.write_text(json.dumps({"turns": turns}))
    env = agent_env(XCLAW_MODEL=f"script:{script}", XCLAW_DB=str(tmp / "x.db"))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "xclaw", "mcp", *args], env=env, cwd=str(tmp)
    )
    async with stdio_client(params) as (r, w):
        kwargs = {"elicitation_callback": elicit} if elicit is not None else {}
        async with ClientSession(r, w, **kwargs) as s:
            await s.initialize()
            yield s


def _count_file(sid: str) -> list[Path]:
    return list(Path(agent_env()["XCLAW_HOME"]).glob(f"workspaces/{sid}/count.txt"))


async def _call(s: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    result = await s.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # text as well
    return result.structured_content


async def test_a_session_through_the_tools_and_resources(tmp_path: Path) -> None:
    turns = [
        {"text": "Noting.", "tool_calls": [_sh("echo n >> notes.txt")]},
        {"text": "Noted."},
    ]
    async with _mcp(tmp_path, turns) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == {
            "send_message",
            "session_status",
            "list_sessions",
            "steps",
            "approve",
            "rollback",
            "fork",
            "cancel",
        }
        sent = await _call(s, "send_message", text="take a note", wait_s=30)
        sid = sent["session_id"]
        assert sent["state"] == "paused" and sent["pending_approvals"][0]["name"] == "shell"
        step = sent["pending_approvals"][0]["step_id"]
        await _call(s, "approve", session_id=sid, step_id=step, approve=True)
        done = await _call(s, "session_status", session_id=sid, wait_s=30)
        assert done["reply"] == "Noted." and done["state"] == "success"
        listed = await _call(s, "steps", session_id=sid)
        kinds = [(st["type"], st["name"]) for st in listed["steps"]]
        assert ("tool_call", "shell") in kinds
        approval = next(st for st in listed["steps"] if st["name"] == "approval")
        assert approval["output"]["by"]["client"] == "mcp"
        assert (await _call(s, "list_sessions"))["sessions"][0]["session_id"] == sid
        resources = {str(r.uri) for r in (await s.list_resources()).resources}
        assert "xclaw://sessions" in resources
        text = (await s.read_resource(f"xclaw://sessions/{sid}/transcript")).contents[0].text
        assert "Noted." in text
        other = await s.call_tool("steps", {"session_id": "someone-elses"})
        assert other.is_error and "unknown_session: no session" in other.content[0].text


async def test_an_approval_is_elicited_where_the_host_can_ask(tmp_path: Path) -> None:
    turns = [{"tool_calls": [_sh("echo y >> yes.txt")]}, {"text": "Did it."}]
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    async with _mcp(tmp_path, turns, elicit=elicit) as s:
        done = await _call(s, "send_message", text="do it", wait_s=30)
    assert done["reply"] == "Did it." and len(asked) == 1 and "shell" in asked[0]


async def test_killed_mid_tool_the_next_call_continues_without_a_blind_repeat(
    tmp_path: Path,
) -> None:
    slow = "echo run >> count.txt; sleep 60"
    turns = [
        {"text": "Counting.", "tool_calls": [_sh(slow)]},
        {"after_interruption": True, "text": "Interrupted.", "tool_calls": [_sh(slow)]},
        {"text": "Finished."},
    ]
    async with _mcp(tmp_path, turns, "--approval", "yolo") as s:
        sent = await _call(s, "send_message", text="count", wait_s=0)
        sid = sent["session_id"]
        deadline = asyncio.get_running_loop().time() + 90
        while not (found := _count_file(sid)):
            assert asyncio.get_running_loop().time() < deadline, "the command never started"
            status = await _call(s, "session_status", session_id=sid, wait_s=0.2)
            assert status["running"], status
        assert found
        # The host's server process dies here (the context exits: stdin closed, killed).
    async with _mcp(tmp_path, turns, "--approval", "ask") as s:
        status = await _call(s, "session_status", session_id=sid, wait_s=30)
        pending = status["pending_approvals"]
        assert pending and pending[0]["maybe_repeated"] is True  # asked, warned: not blind
        await _call(s, "approve", session_id=sid, step_id=pending[0]["step_id"], approve=False)
        done = await _call(s, "session_status", session_id=sid, wait_s=30)
        assert done["reply"] == "Finished."
    assert found[0].read_text() == "run\n"
