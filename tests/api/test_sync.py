"""The synchronous facade (xclaw.open_sync, xclaw.connect_sync): the same sessions as the async
API from plain code — in this process on a real SQLite file, and through a real `xclaw serve`
— with the same typed errors, and the agent's own loop kept apart from any loop the caller
runs (a notebook's)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import xclaw
from tests.api.conftest import sh, write_script
from xclaw.api.sync import SyncAgent
from xclaw.wire.frames import ApprovalRequestFrame, ReplyFrame, ToolFrame

TWO_STEPS = [
    {"text": "Writing it.", "tool_calls": [sh("echo hi > a.txt")]},
    {"text": "Done: a.txt."},
]


def _walk(agent: SyncAgent, workspace: Any) -> None:
    """What a notebook does with a session: events with an approval answered, the record,
    a prefix, a fork, a rollback that rewinds the files, the typed errors."""
    session = agent.new_session(title="sync notes")
    events = []
    for event in session.send("write a.txt"):
        events.append(event)
        if isinstance(event, ApprovalRequestFrame):
            session.approve(event.step_id, True)
    assert isinstance(events[-1], ReplyFrame) and events[-1].content == "Done: a.txt."
    assert [e.state for e in events if isinstance(e, ToolFrame)] == ["running", "completed"]
    assert workspace(session.id).joinpath("a.txt").read_text() == "hi\n"
    steps = session.steps()
    assert [s.type for s in steps][:2] == ["user_input", "llm_call"]
    assert session.info().state == "success"
    assert agent.session(session.id[:6]).id == session.id
    assert [s.session_id for s in agent.search("SYNC")] == [session.id]
    assert session.usage().llm_calls == 2

    branch = session.fork("s0002", title="branch")
    assert branch.info().parent_session_id == session.id
    rolled = session.rollback("s0003")
    assert rolled.session.state == "waiting"
    assert not workspace(session.id).joinpath("a.txt").exists()
    result = session.run("again", approve=True)
    assert result.reply == "Done: a.txt."
    assert list(session.resume()) == []  # nothing interrupted

    with pytest.raises(xclaw.errors.UnknownSession):
        agent.session("no-such-session")
    with pytest.raises(xclaw.errors.BadStep):
        session.rollback("s9999")


def test_open_sync_in_this_process(tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", TWO_STEPS * 2)
    with xclaw.open_sync(
        db=tmp_path / "app.db",
        home=tmp_path / "home",
        model=f"script:{script}",
        approval="ask",
        cwd=tmp_path,
    ) as agent:
        _walk(agent, lambda sid: tmp_path / "home" / "workspaces" / sid)
    # Closed with the `with`: the database is left for the next process, nothing running.
    with xclaw.open_sync(
        db=tmp_path / "app.db", home=tmp_path / "home", model=f"script:{script}"
    ) as again:
        assert len(again.sessions()) == 2


@pytest.mark.slow
def test_connect_sync_through_a_gateway(gateway: Any) -> None:
    server = gateway(TWO_STEPS * 2, approval="ask")
    with xclaw.connect_sync(server.http, token=server.token) as agent:
        _walk(agent, server.workspace)


async def test_usable_from_code_that_runs_its_own_loop(tmp_path: Path) -> None:
    """Inside a running event loop (a notebook cell, an async test) the facade still works:
    it runs the agent on its own loop, in its own thread, and never touches the caller's."""
    script = write_script(tmp_path / "script.json", [{"text": "hello"}])
    mine = asyncio.get_running_loop()
    agent = xclaw.open_sync(
        db=tmp_path / "app.db", home=tmp_path / "home", model=f"script:{script}", cwd=tmp_path
    )
    try:
        session = agent.new_session()
        assert session.run("hi").reply == "hello"
    finally:
        agent.close()
    assert asyncio.get_running_loop() is mine and not mine.is_closed()


def test_a_session_of_its_own_directory_and_a_named_client(tmp_path: Path) -> None:
    """The async API's `workspace=` and `client=` from plain code: the files land in the
    project, the approval records the client the person answered through."""
    script = write_script(tmp_path / "script.json", TWO_STEPS)
    project = tmp_path / "project"
    project.mkdir()
    with xclaw.open_sync(
        db=tmp_path / "app.db", home=tmp_path / "home", model=f"script:{script}", approval="ask"
    ) as agent:
        session = agent.new_session(workspace=project)
        for event in session.send("write a.txt"):
            if isinstance(event, ApprovalRequestFrame):
                session.approve(event.step_id, True, client="notebook")
        assert project.joinpath("a.txt").read_text() == "hi\n"
        approval = next(s for s in session.steps() if s.name == "approval")
        assert isinstance(approval.output, dict)
        assert approval.output["by"]["client"] == "notebook"
