"""`xclaw mcp` driven by the official `mcp` Python SDK's client over stdio, as an MCP host
drives it: a session started with send_message, its steps read, an approval answered with the
approve tool (or through elicitation where the host supports it), structured results, the
resources; and the server killed mid-tool, started again, the run continued without repeating
the interrupted call blindly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult

import xclaw
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


def _servers() -> list[int]:
    """The `xclaw mcp` processes this test process started (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if ppid == os.getpid() and b"xclaw" in argv and b"mcp" in argv:
            found.append(int(stat.parent.name))
    return found


async def test_killed_mid_tool_the_next_call_continues_without_a_blind_repeat(
    tmp_path: Path,
) -> None:
    slow = "echo run >> count.txt; sleep 60"
    turns = [
        {"text": "Counting.", "tool_calls": [_sh(slow)]},
        {"after_interruption": True, "text": "Interrupted.", "tool_calls": [_sh(slow)]},
        {"text": "Finished."},
    ]
    with pytest.raises(BaseExceptionGroup) as ended:
        async with _mcp(tmp_path, turns, "--approval", "yolo") as s:
            sent = await _call(s, "send_message", text="count", wait_s=0)
            sid = sent["session_id"]
            deadline = asyncio.get_running_loop().time() + 90
            while not (found := _count_file(sid)):
                assert asyncio.get_running_loop().time() < deadline, "the command never started"
                status = await _call(s, "session_status", session_id=sid, wait_s=0.2)
                assert status["running"], status
            # The host waits on the run when the server is SIGKILLed (no clean close).
            waiting = asyncio.ensure_future(
                s.call_tool("session_status", {"session_id": sid, "wait_s": 120})
            )
            [pid] = _servers()
            os.kill(pid, signal.SIGKILL)
            await asyncio.wait_for(waiting, 60)
    assert ended.group_contains(MCPError)  # the host hears that the server is gone
    async with _mcp(tmp_path, turns, "--approval", "ask") as s:
        status = await _call(s, "session_status", session_id=sid, wait_s=30)
        pending = status["pending_approvals"]
        assert pending and pending[0]["maybe_repeated"] is True  # asked, warned: not blind
        await _call(s, "approve", session_id=sid, step_id=pending[0]["step_id"], approve=False)
        done = await _call(s, "session_status", session_id=sid, wait_s=30)
        assert done["reply"] == "Finished."
    assert found[0].read_text() == "run\n"


async def test_a_new_session_exists_when_send_message_answers(tmp_path: Path) -> None:
    async with _mcp(tmp_path, [{"text": "Noted.", "sleep": 30}], "--approval", "yolo") as s:
        for i in range(5):
            sent = await _call(s, "send_message", text=f"note {i}", wait_s=0)
            steps = await _call(s, "steps", session_id=sent["session_id"])
            assert steps["steps"][0]["input"] == f"note {i}", steps


async def test_a_run_refused_at_its_start_is_said(tmp_path: Path) -> None:
    turns = [{"text": "Late.", "sleep": 60}]
    async with _mcp(tmp_path, turns, "--approval", "yolo") as first:
        sent = await _call(first, "send_message", text="take your time", wait_s=0)
        sid = sent["session_id"]
        assert sent["running"] is True
        # Another `xclaw mcp` on the same database: the session is driven by the first.
        async with _mcp(tmp_path, turns, "--approval", "yolo") as second:
            refused = await second.call_tool("send_message", {"text": "me", "session_id": sid})
            assert refused.is_error and "busy: " in refused.content[0].text


async def test_hostile_lines_get_an_error_never_a_traceback_or_a_hang(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "Fine."}]}))
    env = agent_env(XCLAW_MODEL=f"script:{script}", XCLAW_DB=str(tmp_path / "x.db"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "xclaw",
        "mcp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        limit=2**26,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    async def ask(line: str | dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        raw = line if isinstance(line, str) else json.dumps(line)
        proc.stdin.write(raw.encode() + b"\n")
        await proc.stdin.drain()
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
        return answer

    def tool(id_: int, name: str, **args: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": args}
        return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}

    try:
        opened = await ask(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert opened["result"]["serverInfo"]["name"] == "xclaw"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for line, code in (
            ("{not json", -32700),
            ('{"jsonrpc": "2.0", "id": 1, "method": "x", "params": ' + "[" * 100_000, -32700),
            ("[]", -32600),
            ('"a string"', -32600),
            ('{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', -32600),
        ):
            answer = await ask(line)
            assert answer["id"] is None and answer["error"]["code"] == code, (line[:30], answer)
        unknown = await ask({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
        assert unknown["id"] == 2 and unknown["error"]["code"] == -32601
        for id_, call, said in (
            (3, tool(3, "no_such_tool"), "Unknown tool"),
            (4, tool(4, "send_message", text="x" * 2_000_000), "bad_command: text must be"),
            (5, tool(5, "send_message", text="/steps"), "bad_command: /steps is a slash"),
            (6, tool(6, "steps", session_id="a" * 100_000), "unknown_session: no session"),
            (7, tool(7, "steps", session_id="../x\u0000y"), "unknown_session: no session"),
            (8, tool(8, "approve", session_id="abc", step_id="s" * 10_000, approve=True), "bad_"),
            (9, tool(9, "fork", session_id="abc", step_id="s1", title="t" * 1000), "bad_"),
            (10, tool(10, "session_status", session_id="abc", wait_s="soon"), "validation"),
            (11, tool(11, "steps", session_id="nobody-has-this", n=-1), "bad_request"),
        ):
            answer = await ask(call)
            assert answer["id"] == id_ and answer["result"]["isError"] is True, answer
            text = answer["result"]["content"][0]["text"]
            assert said in text and len(text) < 2_000, (id_, text[:300])
        alive = await ask({"jsonrpc": "2.0", "id": 12, "method": "tools/list"})
        assert len(alive["result"]["tools"]) == 8
    finally:
        proc.stdin.close()
        err = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
        await proc.wait()
    assert "Traceback" not in err, err


async def test_send_message_names_a_declared_agent_and_an_unknown_one_is_refused(
    tmp_path: Path,
) -> None:
    """`agent` on send_message runs an agent of xclaw.yaml's `agents:`; a name not declared
    is an `unknown_agent` error listing the declared ones, and starts nothing."""
    (tmp_path / "xclaw.yaml").write_text(
        "agents:\n  quiet:\n    instructions: Answer in one word.\n    builtin_tools: []\n"
    )
    async with _mcp(tmp_path, [{"text": "Fine."}]) as s:
        refused = await s.call_tool("send_message", {"text": "hi", "agent": "loud"})
        assert refused.is_error
        said = refused.content[0].text
        assert "unknown_agent" in said and "loud" in said and "quiet" in said
        assert (await _call(s, "list_sessions"))["sessions"] == []
        done = await _call(s, "send_message", text="how are you?", agent="quiet", wait_s=60)
        assert done["reply"] == "Fine."
        sid = done["session_id"]
    async with xclaw.open(db=tmp_path / "x.db", model="script:/dev/null") as agent:
        assert (await (await agent.session(sid)).info()).agent == "quiet"
