"""Moving sessions in and out of SQLite, and what retention would free (`xclaw import`,
`xclaw gc`). Mixed into SQLiteStore, which provides `_write` and `_read`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from xclaw.errors import StoreError
from xclaw.store.model import Session, Step
from xclaw.store.rows import dump_json

T = TypeVar("T")

_INSERT_SESSION = (
    "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, metadata,"
    " is_forked, parent_session_id, next_seq, awaiting_input, forked_from_seq)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_STEP = (
    "INSERT INTO traces (step_id, session_id, seq, parent_step_id, step_type, name, status,"
    " agent, call_id, input_data, output_data, error_message, start_time, end_time,"
    " token_usage_prompt, token_usage_completion) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?, ?, ?, ?)"
)
# What deleting `doomed` sessions would free: their snapshots, and the blobs no other
# snapshot, no pending restore and no step's images name (the sweep's mark phase, without
# those sessions).
_FREED_BLOBS = """
SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE hash NOT IN (
    SELECT json_extract(j.value, '$.hash') FROM snapshots AS s, json_each(s.manifest) AS j
     WHERE json_extract(j.value, '$.hash') IS NOT NULL
       AND s.session_id NOT IN (SELECT value FROM json_each(?1))
    UNION
    SELECT json_extract(j.value, '$.hash') FROM workspace_restores AS r, json_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND json_extract(j.value, '$.hash') IS NOT NULL
       AND r.session_id NOT IN (SELECT value FROM json_each(?1))
    UNION
    SELECT json_extract(j.value, '$.hash') FROM traces AS t, json_each(t.output_data, '$.images') AS j
     WHERE t.step_type = 'tool_call' AND t.output_data LIKE '{%"images"%'
       AND json_extract(j.value, '$.hash') IS NOT NULL
       AND t.session_id NOT IN (SELECT value FROM json_each(?1))
)
"""


class SqliteTransfer:
    if TYPE_CHECKING:  # provided by the store this is mixed into

        def _write(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool) -> T: ...
        def _read(self, fn: Callable[[sqlite3.Connection], T], *, snapshot: bool = False) -> T: ...

    def import_session(self, session: Session, steps: Sequence[Step], next_seq: int) -> Session:
        """Insert a session and its steps exactly as given (ids, seqs, times) in one durable
        transaction. A parent session absent here is unlinked. Raises StoreError when the
        id is taken."""
        meta = dump_json(session.metadata, "metadata")
        rows = [
            (
                st.step_id,
                session.session_id,
                st.seq,
                st.parent_step_id,
                st.step_type.value,
                st.name,
                st.status.value,
                st.agent,
                st.call_id,
                dump_json(st.input_data, "input_data"),
                dump_json(st.output_data, "output_data"),
                st.error_message,
                st.start_time,
                st.end_time,
                st.token_usage_prompt,
                st.token_usage_completion,
            )
            for st in sorted(steps, key=lambda s: s.seq)
        ]

        def tx(conn: sqlite3.Connection) -> Session:
            sid = session.session_id
            if conn.execute("SELECT 1 FROM sessions WHERE session_id=?", (sid,)).fetchone():
                raise StoreError(f"a session with id {sid!r} already exists")
            parent = session.parent_session_id
            if (
                parent
                and not conn.execute(
                    "SELECT 1 FROM sessions WHERE session_id=?", (parent,)
                ).fetchone()
            ):
                parent = None
            conn.execute(
                _INSERT_SESSION,
                (
                    sid,
                    session.title,
                    session.status.value,
                    session.created_at,
                    session.updated_at,
                    meta,
                    int(session.is_forked),
                    parent,
                    next_seq,
                    int(session.awaiting_input),
                    session.forked_from_seq,
                ),
            )
            conn.executemany(_INSERT_STEP, rows)
            return Session(
                sid,
                session.title,
                session.status,
                session.created_at,
                session.updated_at,
                dict(session.metadata),
                session.is_forked,
                parent,
                session.awaiting_input,
                session.forked_from_seq,
            )

        return self._write(tx, durable=True)

    def retention_preview(self, session_ids: Sequence[str]) -> tuple[int, int, int]:
        """(snapshots, blobs, blob bytes) that deleting these sessions would free."""
        ids = json.dumps(list(session_ids))

        def q(conn: sqlite3.Connection) -> tuple[int, int, int]:
            snaps = conn.execute(
                "SELECT count(*) FROM snapshots WHERE session_id IN (SELECT value FROM json_each(?))",
                (ids,),
            ).fetchone()[0]
            blobs, size = conn.execute(_FREED_BLOBS, (ids,)).fetchone()
            return int(snaps), int(blobs), int(size)

        return self._read(q, snapshot=True)
