"""ACP while a run of the session is in flight (docs/editors.md; docs/protocol.md, "Input while a
run is busy"): `xclaw acp` spawned as an editor spawns it, driven by the official
`agent-client-protocol` client, the scripted model. Under `input.busy: queue` a second
`session/prompt` is kept in the session's queue and answered when its own turn ends (its
updates sent then, after the first prompt's); under the default it is refused `busy`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

import xclaw
from tests.acp.client import Editor, agent_env, spawned

pytestmark = pytest.mark.slow


def _sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


TURNS = [
    {"text": "Working.", "tool_calls": [_sh("sleep 10")]},
    {"text": "First done."},
    {"text": "Second done."},
]


def _project(tmp: Path, policy: str | None) -> tuple[Path, dict[str, str]]:
    project = tmp / "project"
    project.mkdir()
    script = tmp / "script.json"
    script.write_text(json.dumps({"turns": TURNS}))
    config = tmp / "xclaw.yaml"
    config.write_text(f"input:\n  busy: {policy}\n" if policy else "{}\n")
    env = agent_env(
        XCLAW_MODEL=f"script:{script}", XCLAW_DB=str(tmp / "x.db"), XCLAW_CONFIG=str(config)
    )
    return project, env


async def _inputs(db: Path, session_id: str) -> list[Any]:
    async with xclaw.open(db=db, model="script:/dev/null") as agent:
        steps = await (await agent.session(session_id)).steps()
    return [s.input for s in steps if s.type == "user_input"]


async def test_a_prompt_sent_while_a_run_is_in_flight_is_queued_and_answered_after_its_turn(
    tmp_path: Path,
) -> None:
    project, env = _project(tmp_path, "queue")
    editor = Editor()
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.until(lambda: "tool_call" in editor.kinds(sid))
        second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("then this")]))
        await editor.until(
            lambda: "kept until the run in flight ends" in editor.text("agent_thought_chunk")
        )
        assert not second.done()  # it waits for its turn
        one = await asyncio.wait_for(first, 90)
        two = await asyncio.wait_for(second, 90)
    assert one.stop_reason == "end_turn" and two.stop_reason == "end_turn"
    said = editor.text()
    assert "First done." in said and "Second done." in said
    assert said.index("First done.") < said.index("Second done.")
    assert await _inputs(tmp_path / "x.db", sid) == ["go", "then this"]


async def test_by_default_a_prompt_beside_a_run_is_refused_busy(tmp_path: Path) -> None:
    project, env = _project(tmp_path, None)
    editor = Editor()
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.until(lambda: "tool_call" in editor.kinds(sid))
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("then this")])
        assert (refused.value.data or {}).get("code") == "busy"
        assert (await asyncio.wait_for(first, 90)).stop_reason == "end_turn"
    assert await _inputs(tmp_path / "x.db", sid) == ["go"]


async def test_a_steering_prompt_reaches_the_running_model_and_answers_when_the_run_ends(
    tmp_path: Path,
) -> None:
    project, env = _project(tmp_path, "steer")
    editor = Editor()
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.until(lambda: "tool_call" in editor.kinds(sid))
        second = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=[text_block("use the staging db")])
        )
        one = await asyncio.wait_for(first, 90)
        two = await asyncio.wait_for(second, 90)
    assert one.stop_reason == "end_turn" and two.stop_reason == "end_turn"
    assert "First done." in editor.text()
    async with xclaw.open(db=tmp_path / "x.db", model="script:/dev/null") as agent:
        steps = await (await agent.session(sid)).steps()
    inputs = [s for s in steps if s.type == "user_input"]
    assert [s.input for s in inputs] == ["go", "use the staging db"]
    assert (inputs[1].output or {}).get("steer") is True  # delivered inside the first run
    kinds = [s.type for s in steps]
    assert kinds.index("tool_call") < steps.index(inputs[1]) < len(steps) - 1


async def test_commands_beside_a_run_are_answered_and_a_rollback_says_what_to_do(
    tmp_path: Path,
) -> None:
    """Under the default policy (a prompt beside the run is refused): /steps, /ps and /fork
    read or copy the record and are answered at once; /rollback, which would rewind what
    the run is writing, is refused `busy` saying how to go on; the run is untouched."""
    project, env = _project(tmp_path, None)
    editor = Editor()
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await editor.until(lambda: "tool_call" in editor.kinds(sid))
        steps = await conn.prompt(session_id=sid, prompt=[text_block("/steps")])
        assert steps.stop_reason == "end_turn"
        await editor.until(lambda: "s0001" in editor.text() and "user_input" in editor.text())
        forked = await conn.prompt(session_id=sid, prompt=[text_block("/fork s0001 aside")])
        assert forked.stop_reason == "end_turn"
        await editor.until(lambda: "Forked after s0001" in editor.text())
        ps = await conn.prompt(session_id=sid, prompt=[text_block("/ps")])
        assert ps.stop_reason == "end_turn"
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001")])
        assert (refused.value.data or {}).get("code") == "busy"
        assert "session/cancel" in str(refused.value)
        assert not first.done()  # the run went on meanwhile
        assert (await asyncio.wait_for(first, 90)).stop_reason == "end_turn"
    assert await _inputs(tmp_path / "x.db", sid) == ["go"]
    async with xclaw.open(db=tmp_path / "x.db", model="script:/dev/null") as agent:
        titles = [s.title for s in await agent.sessions()]
    assert "aside" in titles
