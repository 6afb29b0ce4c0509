"""[store/postgres] The write that opens a turn on a session that exists (writes.OpenTurn), in two
round trips inside its transaction instead of one per statement.

The shared body (store/common.py `_open_turn_tx`) is the store calls it stands for, one after
the other: on PostgreSQL each of its statements is a round trip (eight for a queued message,
ten with BEGIN and COMMIT), and at a load where a round trip costs 1.5 to 3 ms that was most
of the hand-over from a run to the message queued behind it (bench/README.md, "Queued
messages"). Here psycopg's pipeline mode sends the statements that do not wait on an answer
together: first the session row locked with its lease, status and next step number, and the
session's last message (is this one a resend?); then, once those say the turn opens, the
lease taken, the metadata merged, the dangling steps marked interrupted, the message inserted
with the session's move, and the queued entry removed. Same statements' effects, same order,
same transaction: what the shared body writes, this writes (tests/store/test_open_turn.py
runs both).

A new session (`create`) or a member's message (whose share is checked first) take the shared
body: neither is the hand-over's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import psycopg

from xclaw.errors import MessageRecorded, SessionNotFound
from xclaw.store.common import LATEST_MESSAGE, message_among
from xclaw.store.leases import Lease
from xclaw.store.postgres.leases import LEASE_FOR_UPDATE, TAKE_LEASE, free_for
from xclaw.store.postgres.rows import POSTGRES, pg_json, pg_text
from xclaw.store.queue.sql import dequeue_tx
from xclaw.store.steps.model import Status, Step, StepStatus
from xclaw.store.steps.rows import row_to_step
from xclaw.store.steps.sql import approval_pending, interrupting
from xclaw.store.steps.writes import OpenTurn, normalise_step

if TYPE_CHECKING:
    from xclaw.store.postgres.store import PgRecord

_STATUS = {s.value: s for s in Status}

# Retitled and metadata keys merged over what the session holds (jsonb `||`: the given keys
# set, the others kept), in one statement.
_UPDATE = (
    "UPDATE sessions SET title = coalesce(%s, title), "
    "metadata = CASE WHEN %s::jsonb IS NULL THEN metadata "
    "ELSE coalesce(metadata, '{}'::jsonb) || %s::jsonb END, updated_at = %s "
    "WHERE session_id = %s"
)

Opened = tuple[Lease | None, list[Step], Step | None]
Insert = Callable[[psycopg.Connection, Status, int, str | None, Callable[[], bool]], Step]


def open_turn_tx(
    record: PgRecord,
    w: OpenTurn,
    insert_locked: Callable[..., Insert],
) -> Callable[[psycopg.Connection], Opened]:
    """writes.OpenTurn's transaction for a session that exists (not `create`, not `member`):
    (lease, interrupted, message step), or (None, [], None) when another live worker drives
    it; MessageRecorded for a `message_id` the session's last message holds already."""
    assert not w.create and not w.member
    d, sid = POSTGRES, w.session_id
    message = normalise_step(w.message)
    output = w.output()
    insert = insert_locked(sid, message, StepStatus.COMPLETED, output, None)
    interrupt_sql, interrupt_params = interrupting(d, w.keep_approvals, w.approval_output)
    meta = None if w.metadata is None else pg_json(dict(w.metadata), "metadata")
    ttl_ms = max(1, int(w.ttl_s * 1000))

    def tx(conn: psycopg.Connection) -> Opened:
        with conn.pipeline():
            # Round trip 1: may the lease be taken, and is this message new?
            locked = conn.execute(LEASE_FOR_UPDATE, (sid,))
            last = None if w.message_id is None else conn.execute(d.sql(LATEST_MESSAGE), (sid,))
            row = locked.fetchone()
            if row is None:
                raise SessionNotFound(sid)
            if not free_for(row, w.worker_id):  # another live worker drives it
                return None, [], None
            if last is not None and w.message_id is not None:
                earlier = message_among(last.fetchall(), w.message_id)
                if earlier is not None:  # a resend: nothing written, never run twice
                    raise MessageRecorded(earlier.seq)
            current, seq = _STATUS[row[1]], int(row[8])
            # Round trip 2: everything the turn's opening writes, in the shared body's order.
            taken = conn.execute(TAKE_LEASE, (w.worker_id, ttl_ms, sid))
            if w.title is not None or meta is not None:
                conn.execute(_UPDATE, (pg_text(w.title), meta, meta, record._now(), sid))
            marked = conn.execute(interrupt_sql, (*interrupt_params, record._now(), sid))
            # Only a Paused session asks whether an approval still waits (a round trip more).
            added = insert(conn, current, seq, w.worker_id, lambda: approval_pending(d, conn, sid))
            if w.dequeue and w.message_id is not None:  # it leaves the queue as it is recorded
                dequeue_tx(d, conn, sid, w.message_id)
        # Read once the pipeline is synced (its end): reading in it would wait once more.
        token, expires = taken.fetchone()  # type: ignore[misc]
        interrupted = sorted(map(row_to_step, marked.fetchall()), key=lambda s: s.seq)
        return Lease(sid, w.worker_id, token, expires), interrupted, added

    return tx
