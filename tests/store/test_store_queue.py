"""The messages waiting for a session's run (xclaw/store/queue/sql.py), on both backends: in
order (an `interrupt` first), a resend of an id queued once, an id already recorded refused,
a cancel removing one, and the write that opens a queued message's turn taking it off the
queue in its own transaction."""

from __future__ import annotations

from typing import Any

import pytest

from tests.store.builders import user
from xclaw.errors import MessageRecorded, SessionNotFound
from xclaw.store.base import Store
from xclaw.store.steps.writes import OpenTurn, QueueInput, Unqueue, Write


def _put(store: Store, w: Write) -> Any:
    return store.record.write(w)


def _queue(store: Store, sid: str, mid: str, mode: str = "queue", text: str = "") -> Any:
    return _put(
        store, QueueInput(session_id=sid, id=mid, mode=mode, content=text or f"text of {mid}")
    )


def test_queued_in_order_once_each_and_cancelled(store: Store) -> None:
    sid = store.record.create_session().session_id
    first, added = _queue(store, sid, "m-1")
    assert added and first.id == "m-1" and first.mode == "queue" and first.content == "text of m-1"
    _queue(store, sid, "m-2", text="second")
    again, added = _queue(store, sid, "m-1", text="a resend")
    assert not added and again.content == "text of m-1"  # queued once, as first queued
    _queue(store, sid, "m-3", mode="interrupt")
    assert [q.id for q in store.record.queued(sid)] == ["m-3", "m-1", "m-2"]
    assert store.record.queued_sessions() == [sid]

    gone = _put(store, Unqueue(session_id=sid, id="m-1"))
    assert gone is not None and gone.id == "m-1"
    assert _put(store, Unqueue(session_id=sid, id="m-1")) is None
    assert [q.id for q in store.record.queued(sid)] == ["m-3", "m-2"]

    with pytest.raises(SessionNotFound):
        _queue(store, "no-such-session", "m-9")


def test_the_turn_that_runs_it_takes_it_off_the_queue(store: Store) -> None:
    sid = store.record.create_session().session_id
    _queue(store, sid, "m-1")
    _queue(store, sid, "m-2")
    opening = OpenTurn(
        session_id=sid,
        message=user("text of m-1"),
        worker_id="w1",
        ttl_s=30,
        create=False,
        message_id="m-1",
        dequeue=True,
    )
    lease, _, step = _put(store, opening)
    assert step.output_data == {"messageId": "m-1", "queued": True}
    assert [q.id for q in store.record.queued(sid)] == ["m-2"]
    store.leases.release_lease(lease)
    # Recorded: queued again, it is refused (it ran), and nothing is added.
    with pytest.raises(MessageRecorded):
        _queue(store, sid, "m-1")
    assert [q.id for q in store.record.queued(sid)] == ["m-2"]
    # A session deleted takes its queue with it.
    store.record.delete_session(sid)
    assert store.record.queued(sid) == [] and store.record.queued_sessions() == []
