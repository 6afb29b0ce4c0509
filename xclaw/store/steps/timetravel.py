"""[store/steps] Rollback and fork as transaction bodies, one text for both backends (dialect.py).

Both address steps by sequence number, never by timestamp, so two steps written in the same
millisecond are told apart. Both take the source session first through the dialect's
`lock_session` (PostgreSQL: the row locked `FOR UPDATE`, so no step can be added to it while
it is cut or copied; SQLite: the single writer already runs alone), and both are one
transaction, the caller's, committed durably. StoreBase (common.py) runs them, for both
backends, as its `_rollback` / `_fork`: one durable write transaction of the store.
"""

from __future__ import annotations

from typing import Any

from xclaw.errors import SessionNotFound, StoreError
from xclaw.store.base import PlanDone, RollbackResult
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.snapshots.model import WorkspaceRestore
from xclaw.store.snapshots.sql import fork_snapshots_tx, rollback_snapshots_tx
from xclaw.store.steps.changes import record_change_tx
from xclaw.store.steps.model import (
    INTERRUPTED,
    OWN_WORKSPACE_KEY,
    Session,
    SessionEvent,
    Status,
    display_id,
)
from xclaw.store.steps.rows import SESSION_COLS, SESSIONS, STEPS, row_to_session

# One INSERT..SELECT copies the prefix: ids and parent links are remapped by string arithmetic
# (new id || ':sNNNN'); seq is preserved, so the fork's s0005 is the source's s0005. A step
# running in the source is copied as interrupted: a fork never inherits a run in flight.
# A parent link to a step after the fork point (possible only in data written by other tools)
# is dropped rather than left dangling.
_FORK_COPY = {
    "step_id": ":new::text || substr(step_id, :cut::int)",
    "session_id": ":new::text",
    "parent_step_id": (
        "CASE WHEN parent_step_id IS NULL"
        " OR CAST(substr(parent_step_id, :cut::int + 2) AS BIGINT) > :seq::bigint"
        " THEN NULL ELSE :new::text || substr(parent_step_id, :cut::int) END"
    ),
    "status": "CASE status WHEN 'running' THEN 'failed' ELSE status END",
    "error_message": "CASE status WHEN 'running' THEN :interrupted::text ELSE error_message END",
    "end_time": "CASE status WHEN 'running' THEN :now::bigint ELSE end_time END",
}
# Every other column of model.Step is copied as it is (store/steps/columns.py).
_FORK_STEPS_SQL = (
    f"INSERT INTO traces ({STEPS.names()})\nSELECT {STEPS.copied(_FORK_COPY)}\n"
    "FROM traces WHERE session_id = :old AND seq <= :seq ORDER BY seq"
)
_SESSION_SQL = f"SELECT {SESSION_COLS} FROM sessions WHERE session_id=?"
# The fork's session row: every column from the Session value, and its step counter.
_FORK_SESSION_SQL = SESSIONS.insert("next_seq")


def forked_session(new_sid: str, source: Session, seq: int, title: str | None, now: int) -> Session:
    """The new session a fork at `seq` creates: Init, is_forked, its parent and fork point."""
    name = title or f"fork of {source.title or source.session_id} at {display_id(seq)}"
    return Session(
        session_id=new_sid,
        title=name,
        status=Status.INIT,
        created_at=now,
        updated_at=now,
        # A fork works in a workspace of its own, never in its source's own directory (an
        # editor's project): that one stays the source's (docs/workspace.md).
        metadata={k: v for k, v in source.metadata.items() if k != OWN_WORKSPACE_KEY},
        is_forked=True,
        parent_session_id=source.session_id,
        awaiting_input=False,
        forked_from_seq=seq,
    )


# What a rollback deletes: the target step and every later one, but the records of rollbacks
# and their compensations (model.UNDO_STEPS): they say what was undone, by whom and when, and
# outlive the steps of the effects they undid (their parent links to them become NULL).
_ROLLBACK_DELETE = (
    "DELETE FROM traces WHERE session_id=? AND seq>=?"
    " AND NOT (step_type='system_alert' AND name IN ('rollback', 'compensation'))"
)
# The plan of a compensating rollback, completed in the rollback's transaction.
_PLAN_DONE = (
    "UPDATE traces SET status='completed', output_data=?::jsonb, end_time=?"
    " WHERE session_id=? AND seq=? AND status='running'"
    " AND step_type='system_alert' AND name='rollback'"
)


def rollback_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    seq: int,
    ref: object,
    now: int,
    workspace: WorkspaceRestore | None = None,
    *,
    lease: Lease | None = None,
    plan: PlanDone | None = None,
) -> RollbackResult:
    """Delete the target step and every later one (not the records of rollbacks and their
    compensations); the session goes Running, waiting. With `workspace`, the restore of its
    files is journaled in the same transaction; with `plan`, that rollback plan completed."""
    current, _, _ = d.lock_session(conn, session_id, lease)
    d.require_step(conn, session_id, seq, ref)
    if plan is not None:
        done = conn.execute(
            d.sql(_PLAN_DONE), (d.json(plan.output, "output_data"), now, session_id, plan.seq)
        ).rowcount
        if done != 1:
            raise StoreError(
                f"the rollback plan {display_id(plan.seq)} of session {session_id} is not "
                "pending: another process finished or abandoned it"
            )
    # next_seq is left alone, so ids are never reused: after s0005..s0010 comes s0011.
    deleted = conn.execute(d.sql(_ROLLBACK_DELETE), (session_id, seq)).rowcount
    # Rollback lands in Running, waiting for a new instruction (model.next_status).
    d.write_status(conn, session_id, current, SessionEvent.ROLLED_BACK, now)
    row = conn.execute(d.sql(_SESSION_SQL), (session_id,)).fetchone()
    restore = rollback_snapshots_tx(d, conn, session_id, seq, workspace, now)
    # Servers that did not make it learn of it (their clients get the new history).
    record_change_tx(
        d, conn, session_id, "rollback", {"stepId": display_id(seq), "deleted": deleted}, now
    )
    return RollbackResult(row_to_session(row), seq, deleted, restore)


def fork_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    seq: int,
    ref: object,
    new_sid: str,
    title: str | None,
    now: int,
    workspace: WorkspaceRestore | None = None,
) -> Session:
    """A new Init session holding a copy of the source's steps up to and including seq
    (and of its workspace snapshots; with `workspace`, its files' restore is journaled)."""
    d.lock_session(conn, session_id, None)
    src = conn.execute(d.sql(_SESSION_SQL), (session_id,)).fetchone()
    if src is None:
        raise SessionNotFound(session_id)
    d.require_step(conn, session_id, seq, ref)
    source = row_to_session(src)
    forked = forked_session(new_sid, source, seq, d.text(title), now)
    conn.execute(d.sql(_FORK_SESSION_SQL), (*SESSIONS.params(forked, d.json, d.text), seq + 1))
    conn.execute(
        d.sql(_FORK_STEPS_SQL),
        {
            "new": new_sid,
            "cut": len(session_id) + 1,
            "seq": seq,
            "old": session_id,
            "interrupted": INTERRUPTED,
            "now": now,
        },
    )
    fork_snapshots_tx(d, conn, session_id, seq, new_sid, workspace, now)
    return forked
