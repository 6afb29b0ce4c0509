"""Moving sessions in and out of PostgreSQL, and what retention would free (`xclaw import`,
`xclaw gc`). Mixed into PostgresStore, which provides `_write` and `_read`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import psycopg

from xclaw.errors import StoreError
from xclaw.store.model import Session, Step
from xclaw.store.postgres_rows import pg_json, pg_text

_INSERT_SESSION = (
    "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, metadata,"
    " is_forked, parent_session_id, next_seq, awaiting_input, forked_from_seq)"
    " VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s)"
)
_INSERT_STEP = (
    "INSERT INTO traces (step_id, session_id, seq, parent_step_id, step_type, name, status,"
    " agent, call_id, input_data, output_data, error_message, start_time, end_time,"
    " token_usage_prompt, token_usage_completion) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s,"
    " %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s)"
)
_FREED_BLOBS = """
SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE hash NOT IN (
    SELECT j.value->>'hash' FROM snapshots AS s, jsonb_each(s.manifest) AS j
     WHERE j.value->>'hash' IS NOT NULL AND NOT (s.session_id = ANY(%(ids)s))
    UNION
    SELECT j.value->>'hash' FROM workspace_restores AS r, jsonb_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND j.value->>'hash' IS NOT NULL
       AND NOT (r.session_id = ANY(%(ids)s))
    UNION
    SELECT i.value->>'hash' FROM traces AS t, jsonb_array_elements(t.output_data->'images') AS i
     WHERE t.step_type = 'tool_call' AND jsonb_typeof(t.output_data) = 'object'
       AND jsonb_typeof(t.output_data->'images') = 'array' AND i.value->>'hash' IS NOT NULL
       AND NOT (t.session_id = ANY(%(ids)s))
)
"""


T = TypeVar("T")


class PgTransfer:
    if TYPE_CHECKING:  # provided by the store this is mixed into

        def _write(self, fn: Callable[[psycopg.Connection], T], *, durable: bool) -> T: ...
        def _read(self, fn: Callable[[psycopg.Connection], T], *, snapshot: bool = False) -> T: ...

    def import_session(self, session: Session, steps: Sequence[Step], next_seq: int) -> Session:
        """As SQLiteStore.import_session: one durable transaction, ids kept as given."""
        meta = pg_json(session.metadata, "metadata")
        rows = [
            (
                st.step_id,
                session.session_id,
                st.seq,
                st.parent_step_id,
                st.step_type.value,
                pg_text(st.name),
                st.status.value,
                pg_text(st.agent),
                pg_text(st.call_id),
                pg_json(st.input_data, "input_data"),
                pg_json(st.output_data, "output_data"),
                pg_text(st.error_message),
                st.start_time,
                st.end_time,
                st.token_usage_prompt,
                st.token_usage_completion,
            )
            for st in sorted(steps, key=lambda s: s.seq)
        ]

        def tx(conn: psycopg.Connection) -> Session:
            sid = session.session_id
            if conn.execute("SELECT 1 FROM sessions WHERE session_id=%s", (sid,)).fetchone():
                raise StoreError(f"a session with id {sid!r} already exists")
            parent = session.parent_session_id
            if (
                parent
                and not conn.execute(
                    "SELECT 1 FROM sessions WHERE session_id=%s", (parent,)
                ).fetchone()
            ):
                parent = None
            conn.execute(
                _INSERT_SESSION,
                (
                    sid,
                    pg_text(session.title),
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
            with conn.cursor() as cur:
                cur.executemany(_INSERT_STEP, rows)
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
        ids = list(session_ids)

        def q(conn: psycopg.Connection) -> tuple[int, int, int]:
            snaps = conn.execute(
                "SELECT count(*) FROM snapshots WHERE session_id = ANY(%s)", (ids,)
            ).fetchone()
            blobs = conn.execute(_FREED_BLOBS, {"ids": ids}).fetchone()
            assert snaps is not None and blobs is not None
            return int(snaps[0]), int(blobs[0]), int(blobs[1])

        return self._read(q, snapshot=True)
