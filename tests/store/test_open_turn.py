"""The write that opens a turn on a session that exists (writes.OpenTurn) on PostgreSQL: in two
round trips inside its transaction (xclaw/store/postgres/opening.py), with the same effects as
the shared body of store/common.py it stands in for — the lease taken, the metadata merged, the
dangling steps marked interrupted, the message recorded with the session's move, its queued
entry removed; a resend and another worker's live lease refused with nothing written.

Round trips are counted from libpq's own trace of the messages between client and server (a
round trip: the client sent, then read the server's answer), on a real PostgreSQL."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.store.builders import llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.errors import MessageRecorded
from xclaw.store.base import Store
from xclaw.store.common import StoreBase
from xclaw.store.postgres.conn import connect, parse_url
from xclaw.store.steps.model import Status, StepStatus
from xclaw.store.steps.writes import AddStep, BeginStep, OpenTurn, QueueInput

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    from tests.store.conftest import BACKENDS

    b = BACKENDS[request.param](tmp_path)
    yield b
    b.drop()


def _opening(sid: str, **kw: Any) -> OpenTurn:
    return OpenTurn(
        session_id=sid,
        message=user("the queued one"),
        worker_id="w1",
        ttl_s=30,
        create=False,
        message_id="m-1",
        dequeue=True,
        keep_approvals=False,
        approval_output={"approved": False, "why": "a new message"},
        **kw,
    )


def _left_mid_run(store: Store, title: str) -> str:
    """A session whose run was cut short: a tool call still `running`, a message queued."""
    rec = store.record
    sid = rec.create_session(title=title, metadata={"kept": 1, "over": "old"}).session_id
    rec.write(AddStep(session_id=sid, step=user("first")))
    call = rec.write(BeginStep(session_id=sid, step=llm()))
    rec.write(finish(sid, call.seq, output_data={"text": "x"}))
    rec.write(BeginStep(session_id=sid, step=tool("sleep 9")))
    rec.write(QueueInput(session_id=sid, id="m-1", mode="queue", content="the queued one"))
    rec.write(QueueInput(session_id=sid, id="m-2", mode="queue", content="next"))
    return sid


def _traced(backend: Backend, body: Callable[[psycopg.Connection], Any]) -> tuple[Any, int]:
    """body(conn) in a transaction on a connection configured as the pool's: its result, and
    the round trips the client made (BEGIN and COMMIT included)."""
    conn = connect(parse_url(backend.url))
    try:
        with tempfile.TemporaryFile("w+") as f:
            conn.pgconn.trace(f.fileno())
            conn.pgconn.set_trace_flags(
                psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
            )
            try:
                with conn.transaction():
                    result = body(conn)
            finally:
                conn.pgconn.untrace()
            f.seek(0)
            # A round trip: the client sent, then waited for the server's answer.
            sides = [line[0] for line in f if line[:2] in ("F\t", "B\t")]
        return result, sum(1 for a, b in itertools.pairwise(sides) if (a, b) == ("F", "B"))
    finally:
        conn.close()


def _state(store: Store, sid: str) -> tuple[Any, ...]:
    s = store.record.get_session(sid)
    steps = [
        (st.seq, st.step_type, st.status, st.error_message, st.input_data, st.output_data)
        for st in store.record.steps(sid)
    ]
    return (
        s.status,
        s.awaiting_input,
        s.title,
        s.metadata,
        steps,
        [q.id for q in store.record.queued(sid)],
    )


def test_opens_in_two_round_trips_with_the_shared_bodys_effects(
    store: Store, backend: Backend
) -> None:
    shared_sid = _left_mid_run(store, "t")
    piped_sid = _left_mid_run(store, "t")
    more = {"metadata": {"over": "new", "added": [1]}, "title": "re\x00named"}
    record: Any = store.record

    shared, shared_trips = _traced(
        backend, StoreBase._open_turn_tx(record, _opening(shared_sid, **more))
    )
    piped, trips = _traced(backend, record._open_turn_tx(_opening(piped_sid, **more)))
    # BEGIN, the lease and the last message, the writes, COMMIT: four (the shared body's
    # statements one round trip each: ten).
    assert trips == 4, trips
    assert shared_trips > trips

    for (lease, interrupted, step), sid in ((shared, shared_sid), (piped, piped_sid)):
        assert lease.session_id == sid and lease.owner == "w1" and lease.token == 1
        assert [(s.seq, s.status, s.error_message) for s in interrupted] == [
            (3, StepStatus.FAILED, "interrupted")
        ]
        assert step.seq == 4 and step.output_data == {"messageId": "m-1", "queued": True}
    assert _state(store, piped_sid) == _state(store, shared_sid)
    status, waiting, title, metadata, _, queue = _state(store, piped_sid)
    assert (status, waiting, title, queue) == (Status.RUNNING, False, "re\ufffdnamed", ["m-2"])
    assert metadata == {"kept": 1, "over": "new", "added": [1]}
    info = store.leases.lease_info(piped_sid)
    assert info.owner == "w1" and info.token == 1 and info.live


def test_a_resend_or_another_live_worker_writes_nothing(store: Store, backend: Backend) -> None:
    sid = _left_mid_run(store, "t")
    record: Any = store.record
    before = _state(store, sid)
    lease = store.leases.acquire_lease(sid, "w2", 30)  # another worker drives it
    assert lease is not None
    store.leases.register_worker("w2")
    try:
        assert _traced(backend, record._open_turn_tx(_opening(sid)))[0] == (None, [], None)
        assert _state(store, sid) == before
        assert store.leases.lease_info(sid).owner == "w2"
    finally:
        store.leases.release_lease(lease)
    opened = record.write(_opening(sid))  # through the pool, as a run opens it
    assert opened[2].seq == 4
    store.leases.release_lease(opened[0])
    again = _state(store, sid)
    with pytest.raises(MessageRecorded):
        record.write(_opening(sid))
    assert _state(store, sid) == again
