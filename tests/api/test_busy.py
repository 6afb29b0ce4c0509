"""`send(text, busy=...)` (docs/protocol.md, "Input while a run is busy") through the Python
API, in process and through a real gateway: two messages sent with `queue` while a run is in
flight are kept (a `queued` event each), listed, and run once each in order after it; one is
cancelled with `unqueue`; without a policy the send is refused Busy as before."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import xclaw
from tests.api.conftest import AgentFactory, sh
from xclaw.api.base import Session
from xclaw.errors import Busy
from xclaw.wire.frames import QueuedFrame, ToolFrame

TURNS = [
    {"text": "Working.", "tool_calls": [sh("sleep 2")]},
    {"text": "first done"},
    {"text": "second done"},
    {"text": "third done"},
]


async def _queue_two_while_busy(session: Session) -> None:
    first = session.send("first")
    running = asyncio.Event()

    async def stream() -> list[Any]:
        seen = []
        async for event in first:
            seen.append(event)
            if isinstance(event, ToolFrame) and event.state == "running":
                running.set()
        return seen

    task = asyncio.create_task(stream())
    await asyncio.wait_for(running.wait(), 60)
    with pytest.raises(Busy):
        await session.send("refused")
    kept = [await session.send(text, busy="queue") for text in ("second", "third", "dropped")]
    assert all(isinstance(r.queued, QueuedFrame) and r.queued.busy == "queue" for r in kept)
    assert all(r.reply is None and len(r.events) == 1 for r in kept)
    waiting = await session.queued()
    assert [q.content for q in waiting] == ["second", "third", "dropped"]
    dropped = kept[2].queued
    assert dropped is not None and waiting[2].id == dropped.message_id
    assert await session.unqueue(dropped.message_id) is True
    assert await session.unqueue(dropped.message_id) is False
    seen = await asyncio.wait_for(task, 60)
    assert seen[-1].type == "reply" and seen[-1].content == "first done"
    await session.wait(60)  # the queued runs follow
    history = [m for m in await session.history() if m.kind in ("user", "assistant")]
    assert [(m.kind, m.text) for m in history] == [
        ("user", "first"),
        ("assistant", "Working."),
        ("assistant", "first done"),
        ("user", "second"),
        ("assistant", "second done"),
        ("user", "third"),
        ("assistant", "third done"),
    ]
    assert await session.queued() == []


async def test_queued_in_process(open_agent: AgentFactory) -> None:
    agent = await open_agent(TURNS)
    session = await agent.new_session(title="queue")
    await _queue_two_while_busy(session)


@pytest.mark.slow
async def test_queued_through_a_gateway(gateway: Any) -> None:
    server = gateway(TURNS)
    async with xclaw.connect(server.http, token=server.token) as agent:
        session = await agent.new_session(title="queue")
        await _queue_two_while_busy(session)
