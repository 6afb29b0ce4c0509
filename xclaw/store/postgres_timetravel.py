"""Rollback and fork as transaction bodies for PostgresStore.

Both address steps by sequence number, never by timestamp; both lock the source session's
row first, so no step can be added to it while it is cut or copied.
"""

from __future__ import annotations

import psycopg

from xclaw.store.base import RollbackResult
from xclaw.store.common import forked_session
from xclaw.store.leases import Lease
from xclaw.store.model import INTERRUPTED, Session, SessionEvent
from xclaw.store.postgres_rows import lock_session, require_step, write_status
from xclaw.store.postgres_snapshots import fork_snapshots_tx, rollback_snapshots_tx
from xclaw.store.rows import SESSION_COLS, row_to_session
from xclaw.store.snapshot_model import WorkspaceRestore

# One INSERT..SELECT copies the prefix, ids and parent links remapped by string arithmetic
# (new id || ':sNNNN'); seq is preserved. A step running in the source is copied as
# interrupted: a fork never inherits a run in flight. A parent link to a step after the fork
# point (possible only in data written by other tools) is dropped rather than left dangling.
_FORK_STEPS_SQL = """
INSERT INTO traces (step_id, session_id, seq, parent_step_id, step_type, name, status, agent,
                    call_id, input_data, output_data, error_message, start_time, end_time,
                    token_usage_prompt, token_usage_completion)
SELECT %(new)s::text || substr(step_id, %(cut)s::int), %(new)s::text, seq,
       CASE WHEN parent_step_id IS NULL
                 OR substr(parent_step_id, %(cut)s::int + 2)::bigint > %(seq)s::bigint THEN NULL
            ELSE %(new)s::text || substr(parent_step_id, %(cut)s::int) END,
       step_type, name,
       CASE status WHEN 'running' THEN 'failed' ELSE status END,
       agent, call_id, input_data, output_data,
       CASE status WHEN 'running' THEN %(interrupted)s::text ELSE error_message END,
       start_time,
       CASE status WHEN 'running' THEN %(now)s::bigint ELSE end_time END,
       token_usage_prompt, token_usage_completion
FROM traces WHERE session_id = %(old)s AND seq <= %(seq)s ORDER BY seq
"""


def rollback_tx(
    conn: psycopg.Connection,
    session_id: str,
    seq: int,
    ref: object,
    now: int,
    workspace: WorkspaceRestore | None = None,
    *,
    lease: Lease | None = None,
) -> RollbackResult:
    """Delete the target step and every later one; the session goes Running, waiting.
    With `workspace`, the restore of its files is journaled in the same transaction."""
    current, _, _ = lock_session(conn, session_id, lease)
    require_step(conn, session_id, seq, ref)
    # next_seq is left alone, so ids are never reused: after s0005..s0010 comes s0011.
    deleted = conn.execute(
        "DELETE FROM traces WHERE session_id=%s AND seq>=%s", (session_id, seq)
    ).rowcount
    # Rollback lands in Running, waiting for a new instruction (model.next_status).
    write_status(conn, session_id, current, SessionEvent.ROLLED_BACK, now)
    row = conn.execute(
        f"SELECT {SESSION_COLS} FROM sessions WHERE session_id=%s", (session_id,)
    ).fetchone()
    restore = rollback_snapshots_tx(conn, session_id, seq, workspace, now)
    return RollbackResult(row_to_session(row), seq, deleted, restore)  # type: ignore[arg-type]


def fork_tx(
    conn: psycopg.Connection,
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
    lock_session(conn, session_id)
    src = conn.execute(
        f"SELECT {SESSION_COLS} FROM sessions WHERE session_id=%s", (session_id,)
    ).fetchone()
    require_step(conn, session_id, seq, ref)
    source = row_to_session(src)  # type: ignore[arg-type]
    forked = forked_session(new_sid, source, seq, title, now)
    conn.execute(
        "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at,"
        " metadata, is_forked, parent_session_id, next_seq, awaiting_input, forked_from_seq)"
        " VALUES (%s, %s, 'Init', %s, %s, %s::jsonb, 1, %s, %s, 0, %s)",
        (new_sid, forked.title, now, now, src[5], session_id, seq + 1, seq),  # type: ignore[index]
    )
    conn.execute(
        _FORK_STEPS_SQL,
        {
            "new": new_sid,
            "cut": len(session_id) + 1,
            "seq": seq,
            "old": session_id,
            "interrupted": INTERRUPTED,
            "now": now,
        },
    )
    fork_snapshots_tx(conn, session_id, seq, new_sid, workspace, now)
    return forked
