"""`xclaw acp` driven by the official Python ACP client (`agent-client-protocol`), as an
editor drives it: a real `xclaw acp` process on stdio, a real SQLite file, the scripted model.

The editor's project is the session's workspace; a prompt streams message, thought and tool
updates and ends with its stop reason; approvals are `session/request_permission`; cancel
stops the running command; `/steps`, `/rollback`, `/fork`, `/ps` work; and the agent killed mid-tool
is started again, `session/load` replays the history, and the interrupted call is not run
twice."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import EnvVariable, McpServerStdio

import xclaw
from tests.acp.client import Editor, agent_env, spawned

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

SLOW = "echo run >> count.txt; sleep 60"


def _sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def _script(tmp: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"script:{path}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    (p / "README.md").write_text("hello\n")
    return p


def _env(tmp: Path, model: str) -> dict[str, str]:
    return agent_env(XCLAW_MODEL=model, XCLAW_DB=str(tmp / "x.db"))


YOLO = ("--approval", "yolo")


async def _by(db: Path, session_id: str) -> list[dict[str, Any]]:
    """Who answered each approval of the session, as the record says."""
    async with xclaw.open(db=db, model="script:/dev/null") as agent:
        steps = await (await agent.session(session_id)).steps()
    return [s.output["by"] for s in steps if s.name == "approval" and isinstance(s.output, dict)]


async def test_initialize_advertises_what_is_real(tmp_path: Path, project: Path) -> None:
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, [{"text": "hi"}]))
    async with spawned(editor, project, env=env) as (conn, _):
        info = await conn.initialize(protocol_version=1)
        caps = info.agent_capabilities
        assert info.protocol_version == 1
        assert caps.load_session is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.prompt_capabilities.image is False  # xclaw's messages are text
        sc = caps.session_capabilities
        assert sc.list is not None and sc.resume is not None and sc.close is not None
        assert sc.fork is None  # not a stable method


async def test_a_prompt_streams_tools_with_diffs_and_approvals_and_ends_the_turn(
    tmp_path: Path, project: Path
) -> None:
    turns = [
        {
            "text": "Writing it.",
            "thinking": "a new file",
            "tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "x\n"}}],
        },
        {"tool_calls": [_sh("cat a.txt > b.txt")]},
        {"tool_calls": [_sh("cat b.txt > c.txt")]},
        {"text": "Done."},
    ]
    answers = iter(["allow", "allow-always"])  # the second shell call is not asked
    editor = Editor(lambda call: next(answers))
    async with spawned(editor, project, env=_env(tmp_path, _script(tmp_path, turns))) as (conn, _):
        new = await conn.new_session(cwd=str(project), mcp_servers=[])
        sid = new.session_id
        await editor.until(lambda: "available_commands_update" in editor.kinds(sid))
        cmds = next(u for _, u in editor.updates if u.session_update == "available_commands_update")
        assert {c.name for c in cmds.available_commands} == {"steps", "rollback", "fork", "ps"}
        done = await conn.prompt(session_id=sid, prompt=[text_block("write a file")])
        assert done.stop_reason == "end_turn"
    # The files are in the editor's project.
    assert (project / "c.txt").read_text() == "x\n"
    assert "Writing it." in editor.text() and editor.text().endswith("Done.")
    assert editor.text("agent_thought_chunk") == "a new file"
    starts = [u for _, u in editor.updates if u.session_update == "tool_call"]
    assert [s.kind for s in starts] == ["edit", "execute", "execute"]
    diff = starts[0].content[0]
    assert diff.type == "diff" and diff.path == str(project / "a.txt") and diff.new_text == "x\n"
    assert starts[0].locations[0].path == str(project / "a.txt")
    ends = [
        u
        for _, u in editor.updates
        if u.session_update == "tool_call_update" and u.status in ("completed", "failed")
    ]
    assert [e.status for e in ends] == ["completed", "completed", "completed"]
    # Asked twice (the write, the first shell call); "always" answered the third.
    assert len(editor.asked) == 2
    by = await _by(tmp_path / "x.db", sid)
    assert by and all(b["kind"] == "person" and b["client"] == "acp" for b in by)


async def test_cancel_stops_the_running_command_and_the_session_waits(
    tmp_path: Path, project: Path
) -> None:
    turns = [{"tool_calls": [_sh("sleep 60")]}, {"text": "never"}]
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, turns))
    async with spawned(editor, project, *YOLO, env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        run = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("wait")]))
        await editor.until(lambda: "tool_call" in editor.kinds(sid))
        started = asyncio.get_running_loop().time()
        await conn.cancel(session_id=sid)
        done = await asyncio.wait_for(run, 30)
        assert done.stop_reason == "cancelled"
        assert asyncio.get_running_loop().time() - started < 20  # killed, not waited for
        steps = await conn.prompt(session_id=sid, prompt=[text_block("/steps")])
        assert steps.stop_reason == "end_turn"
    assert "cancelled by the user" in editor.text() or "failed" in editor.text()


async def test_steps_rollback_and_fork_commands_work_as_in_chat(
    tmp_path: Path, project: Path
) -> None:
    turns = [
        {"tool_calls": [{"name": "write_file", "input": {"path": "n.txt", "content": "1\n"}}]},
        {"text": "written"},
    ]
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, turns))
    async with spawned(editor, project, *YOLO, env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write")])
        assert (project / "n.txt").exists()
        await conn.prompt(session_id=sid, prompt=[text_block("/steps")])
        listing = editor.text()
        assert "s0003" in listing and "write_file" in listing
        await conn.prompt(session_id=sid, prompt=[text_block("/fork s0003 other way")])
        assert "Forked after s0003: session" in editor.text()
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0003")])
        assert "Rolled back to just before s0003" in editor.text()
        assert not (project / "n.txt").exists()  # the project's file went with the memory
        listed = await conn.list_sessions(cwd=str(project))
        assert [s.session_id for s in listed.sessions] == [sid]  # the fork is not in here


async def test_killed_mid_tool_load_replays_and_the_call_is_not_run_twice(
    tmp_path: Path, project: Path
) -> None:
    turns = [
        {"text": "Counting.", "tool_calls": [_sh(SLOW)]},
        {"after_interruption": True, "text": "That was interrupted.", "tool_calls": [_sh(SLOW)]},
        {"text": "Finished."},
    ]
    env = _env(tmp_path, _script(tmp_path, turns))
    first = Editor(lambda call: "allow")
    async with spawned(first, project, env=env) as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        run = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("count")]))
        await first.until(lambda: (project / "count.txt").exists())
        proc.send_signal(signal.SIGKILL)  # the editor's agent dies mid-tool
        await proc.wait()
        with pytest.raises(Exception):  # noqa: B017 - the connection is gone, however it says so
            await asyncio.wait_for(run, 30)
    assert (project / "count.txt").read_text() == "run\n"
    # Started again, as an editor reopening the session does.
    second = Editor(lambda call: "reject")
    async with spawned(second, project, env=env) as (conn, _):
        await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
        replay = second.kinds(sid)
        assert replay[0] == "user_message_chunk" and "tool_call" in replay
        assert "Counting." in second.text()
        # The model issues the interrupted call again: asked, with the warning; rejected.
        await second.until(lambda: second.asked)
        assert "may have run" in second.asked[0].title
        assert [o for o in second.asked] and len(second.asked) == 1
        await second.until(lambda: "Finished." in second.text())
    assert (project / "count.txt").read_text() == "run\n"  # not run twice
    by = await _by(tmp_path / "x.db", sid)
    assert by[-1]["client"] == "acp"


async def test_hostile_input_gets_json_rpc_errors_and_the_agent_goes_on(
    tmp_path: Path, project: Path
) -> None:
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, [{"text": "fine"}]))
    async with spawned(editor, project, *YOLO, env=env) as (conn, proc):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="someone-elses", prompt=[text_block("hi")])
        assert unknown.value.code == -32002
        with pytest.raises(RequestError) as missing:
            await conn.load_session(cwd=str(project), session_id="nope", mcp_servers=[])
        assert missing.value.code == -32002
        with pytest.raises(RequestError) as huge:
            await conn.prompt(session_id=sid, prompt=[text_block("x" * 2_000_000)])
        assert huge.value.code == -32602
        with pytest.raises(RequestError) as method:
            await conn.ext_method("nothing", {})
        assert method.value.code == -32601
        with pytest.raises(RequestError) as bad_dir:
            await conn.new_session(cwd="/", mcp_servers=[])
        assert "refusing" in str(bad_dir.value.data)
        # Malformed lines straight on its stdin: answered, and the agent goes on.
        assert proc.stdin is not None
        proc.stdin.write(b'{not json\n[1, 2]\n"x"\n{"jsonrpc": "2.0", "id": 7}\n')
        await proc.stdin.drain()
        done = await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
        assert done.stop_reason == "end_turn" and editor.text() == "fine"


async def test_a_new_session_runs_the_declared_agent_its_meta_names(
    tmp_path: Path, project: Path
) -> None:
    """`session/new` with `_meta: {"xclaw": {"agent": NAME}}` starts a session running that
    agent of xclaw.yaml's `agents:`; a name not declared is an invalid-params error that
    lists the declared ones, and no session is made."""
    (project / "xclaw.yaml").write_text(
        "agents:\n  quiet:\n    instructions: Answer in one word.\n    builtin_tools: []\n"
    )
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, [{"text": "Fine."}]))
    async with spawned(editor, project, env=env) as (conn, _):
        sid = (
            await conn.new_session(cwd=str(project), mcp_servers=[], xclaw={"agent": "quiet"})
        ).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("how are you?")])
        assert "Fine." in editor.text()
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(project), mcp_servers=[], xclaw={"agent": "loud"})
        assert refused.value.code == -32602
        assert "loud" in str(refused.value) and "quiet" in str(refused.value)
        with pytest.raises(RequestError):
            await conn.new_session(cwd=str(project), mcp_servers=[], xclaw={"agent": 7})
    async with xclaw.open(db=tmp_path / "x.db", model="script:/dev/null") as agent:
        sessions = await agent.sessions()
        assert [s.session_id for s in sessions] == [sid]
        assert (await (await agent.session(sid)).info()).agent == "quiet"


async def test_resume_continues_without_the_replay_and_close_forgets_the_session(
    tmp_path: Path, project: Path
) -> None:
    """`session/resume` (a new agent process, as an editor reopening a thread it still
    shows) goes on from the record without replaying it; `session/close` ends the editor's
    hold on the session: a prompt to it afterwards is refused, the record stays."""
    turns = [{"text": "First."}, {"text": "Second."}]
    env = _env(tmp_path, _script(tmp_path, turns))
    first = Editor()
    async with spawned(first, project, env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("one")])
        assert done.stop_reason == "end_turn" and "First." in first.text()
    second = Editor()
    async with spawned(second, project, env=env) as (conn, _):
        await conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[])
        assert "user_message_chunk" not in second.kinds(sid)  # no replay
        assert "First." not in second.text()
        done = await conn.prompt(session_id=sid, prompt=[text_block("two")])
        assert done.stop_reason == "end_turn" and second.text() == "Second."
        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("three")])
        assert refused.value.code == -32002
    async with xclaw.open(db=tmp_path / "x.db", model="script:/dev/null") as agent:
        steps = await (await agent.session(sid)).steps()
    said = [s.input for s in steps if s.type == "user_input"]
    assert said == ["one", "two"]


async def test_a_turn_that_reaches_max_iterations_stops_with_max_turn_requests(
    tmp_path: Path, project: Path
) -> None:
    (project / "xclaw.yaml").write_text("max_iterations: 2\n")
    loop = [{"text": "Again.", "tool_calls": [_sh("echo again >> loop.txt")]}] * 3
    editor = Editor()
    env = _env(tmp_path, _script(tmp_path, loop))
    async with spawned(editor, project, *YOLO, env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("loop")])
        assert done.stop_reason == "max_turn_requests"
        assert "[error]" in editor.text()


async def test_the_editors_mcp_server_is_started_untrusted_and_its_tool_runs(
    tmp_path: Path, project: Path
) -> None:
    """An MCP server the editor passes with `session/new` (`mcpServers`, stdio) is started
    by xclaw; its tool is offered to the model and, the server being untrusted, its call is
    asked about although the server claims it idempotent — then runs once."""
    server = Path(__file__).parents[1] / "tools" / "mcp_servers" / "idempotent_server.py"
    log = tmp_path / "calls.log"
    turns = [
        {"tool_calls": [{"name": "mcp__slow__slow_add", "input": {"a": 2, "b": 3}}]},
        {"text": "It is 5."},
    ]
    editor = Editor(lambda call: "allow")
    env = _env(tmp_path, _script(tmp_path, turns))
    servers = [
        McpServerStdio(
            name="slow",
            command=sys.executable,
            args=[str(server)],
            env=[EnvVariable(name="CALL_LOG", value=str(log))],
        )
    ]
    async with spawned(editor, project, env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=servers)).session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("add 2 and 3")])
        assert done.stop_reason == "end_turn"
        assert len(editor.asked) == 1  # untrusted: its idempotent claim loosens nothing
        assert "It is 5." in editor.text()
    assert log.read_text() == "slow_add 2 3\n"  # reached the server once


async def test_ps_lists_what_the_sessions_container_keeps_running(
    tmp_path: Path, project: Path
) -> None:
    """`/ps` in the editor: the list every client shows (docs/containers.md), here of a
    container session (real podman with runc; under XCLAW_TEST_REQUIRE_PODMAN it fails
    rather than skips without them)."""
    from tests.containers import remove_containers, test_image

    config = tmp_path / "xclaw.yaml"
    config.write_text(
        f"workspace_root: {tmp_path / 'ws'}\n"
        f"sandbox:\n  isolation: container\n  image: {test_image()}\n"
    )
    turns = [{"tool_calls": [_sh("httpd -p 127.0.0.1:8096 -h /opt")]}, {"text": "started"}]
    editor = Editor()
    env = {**_env(tmp_path, _script(tmp_path, turns)), "XCLAW_CONFIG": str(config)}
    try:
        async with spawned(editor, project, *YOLO, env=env) as (conn, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("start a server")])
            await conn.prompt(session_id=sid, prompt=[text_block("/ps")])
            text = editor.text()
            assert "[ps] 1 background process(es) in the session's container" in text, text
            assert "pid" in text and "httpd -p 127.0.0.1:8096 -h /opt" in text
    finally:
        remove_containers(tmp_path / "ws")
