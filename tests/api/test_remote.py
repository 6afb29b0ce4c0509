"""xclaw.connect: the same Agent and Session through a real `xclaw serve` process on loopback
(its WebSocket and HTTP API), with the scripted model — and a run's event stream that goes on
across a gateway killed and restarted, nothing lost and nothing given twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import xclaw
from tests.api.conftest import sh
from xclaw.api.remote import RemoteAgent
from xclaw.wire.frames import ApprovalRequestFrame, NoticeFrame, ReplyFrame, StepFrame, ToolFrame

pytestmark = pytest.mark.slow

TWO_STEPS = [
    {"text": "Writing it.", "tool_calls": [sh("echo hi > a.txt")]},
    {"text": "Done: a.txt."},
]


async def test_a_session_through_a_gateway(gateway: Any) -> None:
    server = gateway(TWO_STEPS, approval="ask")
    async with xclaw.connect(server.http, token=server.token) as agent:
        assert isinstance(agent, RemoteAgent)
        session = await agent.new_session(title="release notes")
        seen = []
        async for event in session.send("write a.txt"):
            seen.append(event)
            assert event.session_id == session.id
            if isinstance(event, ApprovalRequestFrame):
                await session.approve(event.step_id, True)
        assert [e.type for e in seen][-1] == "reply"
        assert isinstance(seen[-1], ReplyFrame) and seen[-1].content == "Done: a.txt."
        assert [t.state for t in seen if isinstance(t, ToolFrame)] == ["running", "completed"]
        steps = await session.steps()
        assert [(s.id, s.type, s.status) for s in steps][:4] == [
            ("s0001", "user_input", "completed"),
            ("s0002", "llm_call", "completed"),
            ("s0003", "system_alert", "completed"),
            ("s0004", "tool_call", "completed"),
        ]
        assert server.workspace(session.id).joinpath("a.txt").read_text() == "hi\n"
        info = await session.info()
        assert info.state == "success" and info.title == "release notes" and info.busy is False

        # Another connection finds it by a prefix, and the listing and search.
        again = await agent.session(session.id[:6])
        assert again.id == session.id
        assert [s.session_id for s in await agent.search("RELEASE")] == [session.id]
        assert [s.session_id for s in await agent.sessions(state="success")] == [session.id]

        usage = await session.usage()
        assert usage.llm_calls == 2 and usage.usage.input > 0
        tree = await session.trace()
        assert tree[0].id == "s0001" and [c.id for c in tree[0].children] == ["s0002", "s0005"]
        assert next(m.kind for m in await session.history()) == "user"
        assert "shell" in {t.name for t in await agent.tools()}

        other = await session.fork("s0002", title="another way")
        assert (await other.info()).parent_session_id == session.id
        rolled = await session.rollback("s0003")
        assert rolled.deleted == 3 and rolled.session.state == "waiting"
        assert not server.workspace(session.id).joinpath("a.txt").exists()
        await session.rename("renamed")
        assert (await session.info()).title == "renamed"

        # An untitled session is written by its first message; awaiting a run.
        fresh = await agent.new_session()
        assert (await fresh.info()).state == "new" and await fresh.steps() == []
        found = await agent.session(fresh.id)  # by its id, before anything was said to it
        assert found.id == fresh.id and (await found.info()).state == "new"
        result = await fresh.send("again", approve=True)
        assert result.reply == "Done: a.txt." and (await fresh.info()).title == "again"
        assert [e async for e in fresh.resume()] == []  # nothing to resume


async def test_errors_are_the_wire_codes(gateway: Any) -> None:
    server = gateway([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    with pytest.raises(xclaw.Unauthorized):
        await xclaw.connect(server.http, token="wrong")
    async with xclaw.connect(f"{server.http}/?token={server.token}") as agent:
        with pytest.raises(xclaw.UnknownSession):
            await agent.session("no-such-session")
        session = await agent.new_session(title="busy one")
        events = session.send("wait")
        async for event in events:
            if isinstance(event, ToolFrame) and event.state == "running":
                with pytest.raises(xclaw.Busy):
                    await session.send("another").result()
                with pytest.raises(xclaw.Busy):
                    await session.rollback("s0001")
                with pytest.raises(xclaw.BadStep):
                    await session.approve("s0099", True)
                assert await session.cancel() is True
        assert (await session.info()).state == "waiting"
        with pytest.raises(xclaw.BadStep):
            await session.rollback("s0999")
        with pytest.raises(xclaw.BadCommand):
            session.send("/steps")


async def test_cancelling_the_consuming_task_cancels_the_remote_run(gateway: Any) -> None:
    server = gateway([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    async with xclaw.connect(server.http, token=server.token) as agent:
        session = await agent.new_session(title="t")
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
        # The cancellation ended once the gateway had stopped the run.
        assert (await session.info()).busy is False
        steps = await session.steps()
        assert steps[-1].error == "cancelled by the user"


async def test_the_stream_goes_on_across_a_gateway_restart(gateway: Any) -> None:
    """SIGKILL the gateway mid-tool while a run's events stream; start it again: the client
    reconnects by itself, the gateway resumes the session, and the stream ends with the
    reply — each step state given once, the completed call not run again."""
    slow = "echo run >> marker.txt; [ $(wc -l < marker.txt) -gt 1 ] || sleep 30"
    turns = [
        {"text": "Quick part.", "tool_calls": [sh("echo run >> first.txt")]},
        {"text": "Slow part.", "tool_calls": [sh(slow)]},
        {"after_interruption": True, "text": "Again.", "tool_calls": [sh(slow)]},
        {"text": "All done."},
    ]
    server = gateway(turns, approval="yolo")
    # A restart on a loaded machine may take longer than the default bound on an outage.
    async with xclaw.connect(server.http, token=server.token, timeout=120) as agent:
        session = await agent.new_session(title="restart")
        marker = server.workspace(session.id) / "marker.txt"
        seen = []
        asked = []
        async for event in session.send(
            "go", approve=lambda request: asked.append(request) or True
        ):
            seen.append(event)
            if (
                isinstance(event, ToolFrame)
                and event.state == "running"
                and "sleep" in str(event.input)
            ) and not asked:  # the first time only: the run before the crash
                for _ in range(400):  # its sleep has begun
                    if marker.exists():
                        break
                    await asyncio.sleep(0.025)
                await asyncio.to_thread(server.restart)
        assert session._socket().reconnects == 1  # the gateway went away once, came back
        notices = [e.content for e in seen if isinstance(e, NoticeFrame)]
        assert "[resume] detected interrupted tool_call, retrying..." in notices
        steps = [(e.step.id, e.step.status) for e in seen if isinstance(e, StepFrame)]
        assert len(steps) == len(set(steps)), steps  # no step state given twice
        assert isinstance(seen[-1], ReplyFrame) and seen[-1].content == "All done."
        assert len(asked) == 1 and asked[0].maybe_repeated  # the interrupted call, asked again
        # Every step of the record was given, in its final state, once.
        recorded = {(s.id, s.status) for s in await session.steps()}
        assert recorded <= set(steps)
        assert server.workspace(session.id).joinpath("first.txt").read_text() == "run\n"
        assert len(marker.read_text().splitlines()) == 2  # approved: run again, once


async def test_a_send_right_after_a_restart_is_delivered_exactly_once(gateway: Any) -> None:
    """The gateway is SIGKILLed and started again between two messages, and the next
    message is sent at once — in odd tries on a socket the client still thinks attached
    (its event loop was busy meanwhile, as a program's may be: it has not read the close
    yet), in even ones after it noticed. Each of ten tries: the message is recorded once,
    its run is the one streamed (its own reply, not the previous run's), nothing runs
    twice."""
    tries = 10
    server = gateway([{"text": f"answer {i}"} for i in range(tries + 1)], approval="yolo")
    async with xclaw.connect(server.http, token=server.token, timeout=120) as agent:
        session = await agent.new_session(title="restarts")
        assert (await session.send("message 0")).reply == "answer 0"
        for i in range(1, tries + 1):
            if i % 2:
                server.restart()  # blocking this loop: nothing of the close is read yet
            else:
                await asyncio.to_thread(server.restart)
            result = await session.send(f"message {i}")
            assert result.reply == f"answer {i}", (i, [e.type for e in result.events])
            mine = [e.step for e in result.events if isinstance(e, StepFrame)]
            assert mine and min(s.seq for s in mine) == mine[0].seq  # its own steps only
            assert mine[0].type == "user_input" and mine[0].input == f"message {i}"
            inputs = [s.input for s in await session.steps() if s.type == "user_input"]
            assert inputs == [f"message {k}" for k in range(i + 1)], inputs
        assert session._socket().reconnects == tries


async def test_a_send_given_up_during_an_outage_is_not_run_later(gateway: Any) -> None:
    """While the gateway is down two sends are given up — one by its caller's own bound, one
    by the agent's `timeout` — and neither is delivered when the gateway comes back, by the
    clients' reconnects or later; the next message is."""
    server = gateway([{"text": "first"}, {"text": "second"}], approval="yolo")
    async with (
        xclaw.connect(server.http, token=server.token, timeout=60) as agent,
        xclaw.connect(server.http, token=server.token, timeout=3) as impatient,
    ):
        session = await agent.new_session(title="outage")
        assert (await session.send("before")).reply == "first"
        other = await impatient.session(session.id)
        await other.info()
        server.kill()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1):
                await session.send("given up").result()
        with pytest.raises(xclaw.GatewayUnavailable):
            await other.send("timed out").result()
        await asyncio.to_thread(server.start)
        sockets = [session._socket(), other._socket()]
        for _ in range(1200):  # the clients' own reconnects, with their backoff
            if all(s.attached.is_set() for s in sockets):
                break
            await asyncio.sleep(0.05)
        assert all(s.attached.is_set() for s in sockets)
        await asyncio.sleep(1.0)  # an absence: nothing arrives late
        assert [s.input for s in await session.steps() if s.type == "user_input"] == ["before"]
        assert (await session.send("after")).reply == "second"
        inputs = [s.input for s in await session.steps() if s.type == "user_input"]
        assert inputs == ["before", "after"]
