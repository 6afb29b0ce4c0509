"""xclaw.open: sessions driven in this process by the runtime `xclaw serve` runs, on a real
SQLite file, with the scripted model."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

import xclaw
from tests.api.conftest import AgentFactory, sh
from xclaw.wire.frames import (
    ApprovalRequestFrame,
    DeltaFrame,
    NoticeFrame,
    ReplyFrame,
    StatusFrame,
    StepFrame,
    ToolFrame,
)

TWO_STEPS = [
    {"text": "Writing it.", "tool_calls": [sh("echo hi > a.txt")]},
    {"text": "Done: a.txt."},
]


async def test_a_run_is_its_typed_events_in_order(open_agent: AgentFactory) -> None:
    agent = await open_agent(TWO_STEPS, approval="ask")
    session = await agent.new_session(title="release notes")
    assert session.title == "release notes" and (await session.info()).state == "new"
    seen = []
    async for event in session.send("write a.txt"):
        seen.append(event)
        assert event.wire()["type"] == event.type  # the wire frame's type
        if isinstance(event, ApprovalRequestFrame):
            assert event.name == "shell" and event.input == {"command": "echo hi > a.txt"}
            await session.approve(event.step_id, True)
    kinds = [e.type for e in seen]
    assert kinds[0] == "status" and kinds[-1] == "reply"
    assert isinstance(seen[-1], ReplyFrame) and seen[-1].content == "Done: a.txt."
    assert "".join(e.content for e in seen if isinstance(e, DeltaFrame)) == (
        "Writing it.Done: a.txt."
    )
    tools = [e for e in seen if isinstance(e, ToolFrame)]
    assert [t.state for t in tools] == ["running", "completed"]
    assert all(e.session_id == session.id for e in seen if not isinstance(e, NoticeFrame))

    steps = await session.steps()
    assert [(s.id, s.type, s.name, s.status) for s in steps] == [
        ("s0001", "user_input", "user", "completed"),
        ("s0002", "llm_call", steps[1].name, "completed"),
        ("s0003", "system_alert", "approval", "completed"),
        ("s0004", "tool_call", "shell", "completed"),
        ("s0005", "llm_call", steps[4].name, "completed"),
    ]
    assert steps[0].input == "write a.txt" and steps[3].output == "(no output)"
    assert steps[2].output["by"] == {"kind": "person", "client": "python", "via": "in-process"}
    assert [s.id for s in await session.steps(2)] == ["s0004", "s0005"]
    info = await session.info()
    assert info.status == "Success" and info.state == "success" and info.title == "release notes"
    assert (Path(agent.runtime.toolbox.workspace(session.id)) / "a.txt").read_text() == "hi\n"


async def test_await_a_run_with_an_approval_rule(open_agent: AgentFactory) -> None:
    agent = await open_agent(TWO_STEPS, approval="ask")
    session = await agent.new_session()  # written with its first message, titled after it
    asked: list[str] = []

    async def rule(request: ApprovalRequestFrame) -> bool:
        asked.append(request.name)
        return False

    result = await session.send("write it", approve=rule)
    assert result.ok and result.reply == "Done: a.txt." and result.error is None
    assert asked == ["shell"]
    denied = [e for e in result.of_type("tool") if isinstance(e, ToolFrame)]
    assert [t.state for t in denied] == ["failed"]
    assert (await session.info()).title == "write it"
    ok = await (await agent.new_session()).send("again", approve=lambda request: True)
    assert ok.reply == "Done: a.txt."


async def test_sessions_by_prefix_listing_and_search(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "ok"}])
    a = await agent.new_session(title="alpha report")
    b = await agent.new_session(title="beta notes")
    await a.send("hello")
    again = await agent.session(a.id[:8])
    assert again.id == a.id and again.title == "alpha report"
    listed = await agent.sessions()
    assert [s.session_id for s in listed] == [a.id, b.id]  # most recently updated first
    assert [s.session_id for s in await agent.search("NOTES")] == [b.id]
    assert [s.session_id for s in await agent.sessions(state="new")] == [b.id]
    assert [s.session_id for s in await agent.sessions(state="success")] == [a.id]
    assert len(await agent.sessions(limit=1)) == 1
    with pytest.raises(xclaw.UnknownSession) as unknown:
        await agent.session("no-such-session")
    assert unknown.value.code == "unknown_session"


async def test_an_ambiguous_prefix_names_the_candidates(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "ok"}])
    ids = [(await agent.new_session(title=str(i))).id for i in range(40)]
    first = {i[0] for i in ids}
    shared = next(c for c in first if sum(i.startswith(c) for i in ids) > 1)
    with pytest.raises(xclaw.AmbiguousSession) as e:
        await agent.session(shared)
    assert e.value.code == "ambiguous_session" and len(e.value.matches) > 1
    assert isinstance(e.value, xclaw.UnknownSession)  # a kind of unknown session


async def test_rollback_and_fork(open_agent: AgentFactory) -> None:
    agent = await open_agent(TWO_STEPS)
    session = await agent.new_session(title="main")
    assert (await session.send("write it")).ok
    assert (Path(agent.runtime.toolbox.workspace(session.id)) / "a.txt").exists()
    other = await session.fork("s0002", title="another way")
    assert isinstance(other, xclaw.Session) and other.title == "another way"
    forked = await other.info()
    assert forked.is_forked and forked.parent_session_id == session.id
    assert forked.forked_from == "s0002"
    assert [s.id for s in await other.steps()] == ["s0001", "s0002"]
    rolled = await session.rollback("s0003")
    assert rolled.step_id == "s0003" and rolled.deleted == 2
    assert rolled.session.state == "waiting" and rolled.session.awaiting_input
    assert [s.id for s in await session.steps()] == ["s0001", "s0002"]
    # files follow memory: the write happened at s0003, so it is gone
    assert not (Path(agent.runtime.toolbox.workspace(session.id)) / "a.txt").exists()
    with pytest.raises(xclaw.BadStep) as bad:
        await session.rollback("s0999")
    assert bad.value.code == "bad_step"
    with pytest.raises(xclaw.BadStep):
        await session.fork("banana")


async def test_one_driver_busy_and_cancel(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    session = await agent.new_session()
    events = session.send("wait")
    seen = []
    async for event in events:
        seen.append(event)
        if isinstance(event, ToolFrame) and event.state == "running":
            with pytest.raises(xclaw.Busy) as busy:
                await session.send("another").result()
            assert busy.value.code == "busy"
            assert await session.cancel() is True
    notices = [e.content for e in seen if isinstance(e, NoticeFrame)]
    assert notices[-1].startswith("[cancel] run stopped")
    assert (await session.info()).state == "waiting"
    assert await session.cancel() is False  # nothing running now


async def test_cancelling_the_consuming_task_cancels_the_run(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    session = await agent.new_session()
    running = asyncio.Event()

    async def consume() -> None:
        async for event in session.send("wait"):
            if isinstance(event, ToolFrame) and event.state == "running":
                running.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(running.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancellation ended once the run had stopped: nothing is in flight any more.
    info = await session.info()
    assert info.busy is False and info.state == "waiting"
    steps = await session.steps()
    assert steps[-1].type == "tool_call" and steps[-1].error == "cancelled by the user"
    assert (await session.send("again")).reply == "x"  # not `busy`


async def test_resume_with_nothing_to_resume_yields_nothing(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "ok"}])
    session = await agent.new_session()
    assert [e async for e in session.resume()] == []
    await session.send("hi")
    assert (await session.resume()).events == []


async def test_trace_usage_history_compact_tools_rename_delete(
    open_agent: AgentFactory,
) -> None:
    model = "script:script.json"  # the name its llm_call steps record
    prices = {model: {"input": 1_000_000, "output": 2_000_000}}  # $1 a token, $2 out
    agent = await open_agent(TWO_STEPS, config={"prices": prices})
    session = await agent.new_session(title="t")
    await session.send("write it")
    tree = await session.trace()
    assert [n.id for n in tree] == ["s0001"]
    assert [c.id for c in tree[0].children] == ["s0002", "s0004"]
    assert [c.id for c in tree[0].children[0].children] == ["s0003"]
    usage = await session.usage()
    assert usage.llm_calls == 2 and usage.usage.input > 0 and usage.unpriced_calls == 0
    assert usage.cost == usage.usage.input + 2 * usage.usage.output
    history = await session.history()
    assert [m.kind for m in history] == ["user", "assistant", "tool_result", "assistant"]
    events = await session.compact()
    assert any(isinstance(e, StatusFrame) for e in events.events)
    assert any(e.type == "step" for e in events.events)
    assert (await session.history())[0].kind == "summary"
    names = {t.name for t in await session.tools()}
    assert {"shell", "read_file", "write_file"} <= names
    await session.rename("  a   new name ")
    assert session.title == "a new name" and (await session.info()).title == "a new name"
    with pytest.raises(xclaw.BadCommand):
        await session.rename("x" * 201)
    await session.delete()
    with pytest.raises(xclaw.UnknownSession):
        await session.info()


async def test_step_events_carry_step_objects(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "hi"}])
    session = await agent.new_session()
    result = await session.send("hello")
    steps = [e.step for e in result.events if isinstance(e, StepFrame)]
    assert steps[0].id == "s0001" and steps[0].type == "user_input"
    llm = [s for s in steps if s.type == "llm_call" and s.status == "completed"]
    assert llm and llm[0].usage is not None and llm[0].tokens.prompt == llm[0].usage.input


async def test_a_wait_may_be_bounded(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    session = await agent.new_session()
    async for event in session.send("wait"):
        if isinstance(event, ToolFrame) and event.state == "running":
            with pytest.raises(xclaw.Timeout) as waited:
                await session.wait(timeout=0.2)
            assert isinstance(waited.value, TimeoutError) and waited.value.code == "timeout"
            assert (await session.info()).busy  # the run goes on
            await session.cancel()
    await session.wait(timeout=20)


async def test_a_session_of_a_closed_agent_says_so(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "ok"}])
    session = await agent.new_session(title="t")
    untitled = await agent.new_session()
    await agent.close()
    calls = [
        session.info(),
        session.steps(),
        session.history(),
        session.send("hi").result(),
        session.rollback("s0001"),
        untitled.rename("x"),
        agent.new_session(),
        agent.session(session.id),
        agent.sessions(),
        agent.tools(),
    ]
    for call in calls:
        with pytest.raises(xclaw.AgentClosed) as closed:
            await call
        assert closed.value.code == "agent_closed" and "closed" in closed.value.message
    with pytest.raises(xclaw.AgentClosed):
        await session.approve("s0001")


async def test_a_run_neither_awaited_nor_iterated_warns(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "ok"}])
    session = await agent.new_session(title="t")
    with pytest.warns(RuntimeWarning, match=r"session.send\('forgotten'\).*never awaited"):
        session.send("forgotten")
        gc.collect()
    assert await session.steps() == []  # and nothing was sent
    with pytest.warns(RuntimeWarning, match=r"session.resume\(\) .*never awaited"):
        session.resume()
        gc.collect()


async def test_a_new_untitled_session_is_found_by_its_id(open_agent: AgentFactory) -> None:
    agent = await open_agent([{"text": "one"}, {"text": "two"}])
    fresh = await agent.new_session()
    found = await agent.session(fresh.id)
    assert found.id == fresh.id and (await found.info()).state == "new"
    assert await found.steps() == [] and await found.history() == []
    assert (await found.send("hello")).reply == "one"
    again = await agent.session(fresh.id)
    assert again.title == "hello" and (await fresh.send("more")).reply == "two"
    with pytest.raises(xclaw.UnknownSession):
        await agent.session("never-handed-out")


async def test_a_database_path_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    """As with the command line: a misspelt directory creates nothing."""
    where = tmp_path / "no" / "such" / "dir" / "app.db"
    with pytest.raises(xclaw.DatabaseRefused) as refused:
        await xclaw.open(db=where, home=tmp_path / "home", model="script:x.json")
    assert refused.value.code == "database_refused" and str(where.parent) in refused.value.message
    assert not (tmp_path / "no").exists()
    # xclaw's own home is made for its default database.
    home = tmp_path / "new-home"
    async with xclaw.open(home=home, model="script:x.json", cwd=tmp_path) as agent:
        await agent.new_session(title="t")
    assert (home / "xclaw.db").exists()
