"""Sessions of the Store protocol (create, find, list, update, delete, transition), one SQL
text for both backends (dialect.py). Mixed into SQLiteStore and PostgresStore, which provide
`_dialect`, `_write` (SQLite: the writer thread; PostgreSQL: a pooled transaction) and `_read`
(SQLite: the thread's read-only connection; PostgreSQL: the pool). What is committed together
and which commits are synced is decided here, per method, as before the move: a new or
deleted session and a move to a status in DURABLE_STATUSES are synced; a title or metadata
edit is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from xclaw.errors import SessionNotFound, StoreError
from xclaw.store.common import DURABLE_STATUSES, cancel_event
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.model import Session, Status, event_for_target
from xclaw.store.rows import SESSION_COLS, check_session_id, new_session_id, row_to_session
from xclaw.store.snapshots import sweep_blobs_tx

T = TypeVar("T")

_INSERT_SESSION = (
    "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, metadata,"
    " is_forked) VALUES (?, ?, 'Init', ?, ?, ?::jsonb, 0)"
    " ON CONFLICT (session_id) DO NOTHING RETURNING 1"
)
_FIND_SESSION = f"SELECT {SESSION_COLS} FROM sessions WHERE session_id=?"
_UPDATE_SESSION = (
    "UPDATE sessions SET title=coalesce(?, title), metadata=coalesce(?::jsonb, metadata),"
    f" updated_at=? WHERE session_id=? RETURNING {SESSION_COLS}"
)
_DELETE_SESSION = "DELETE FROM sessions WHERE session_id=?"


class SessionMethods:
    """The session methods of the Store protocol, for both backends."""

    _dialect: ClassVar[Dialect]
    if TYPE_CHECKING:  # provided by the store this is mixed into

        def _write(self, fn: Callable[[Any], T], *, durable: bool) -> T: ...
        def _read(self, fn: Callable[[Any], T], *, snapshot: bool = False) -> T: ...
        def _now(self) -> int: ...

    def create_session(
        self,
        *,
        session_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        d = self._dialect
        # 128 random bits, URL-safe: unguessable (docs/protocol.md; at least 96 asked).
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        meta = dict(metadata or {})
        meta_json = d.json(meta, "metadata")
        title = d.text(title) or ""

        def tx(conn: Any) -> Session:
            now = self._now()
            # fetchall: SQLite finishes a RETURNING statement only once its rows are read.
            rows = conn.execute(
                d.sql(_INSERT_SESSION), (sid, title, now, now, meta_json)
            ).fetchall()
            if not rows:
                raise StoreError(f"a session with id {sid!r} already exists")
            return Session(sid, title, Status.INIT, now, now, meta)

        return self._write(tx, durable=True)

    def find_session(self, session_id: str) -> Session | None:
        sql = self._dialect.sql(_FIND_SESSION)
        row = self._read(lambda c: c.execute(sql, (session_id,)).fetchone())
        return None if row is None else row_to_session(row)

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """Most recently updated first; the dialect's tie-break keeps the order stable."""
        d = self._dialect
        sql = (
            f"SELECT {SESSION_COLS} FROM sessions ORDER BY updated_at DESC, created_at DESC, "
            f"{d.session_tiebreak} DESC"
        )
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (max(limit, 0),)
        rows = self._read(lambda c: c.execute(d.sql(sql), params).fetchall())
        return [row_to_session(r) for r in rows]

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        d = self._dialect
        meta_json = None if metadata is None else d.json(dict(metadata), "metadata")

        def tx(conn: Any) -> Session:
            rows = conn.execute(
                d.sql(_UPDATE_SESSION), (d.text(title), meta_json, self._now(), session_id)
            ).fetchall()
            if not rows:
                raise SessionNotFound(session_id)
            return row_to_session(rows[0])

        return self._write(tx, durable=False)

    def delete_session(self, session_id: str) -> None:
        d = self._dialect

        def tx(conn: Any) -> None:
            # Steps go by ON DELETE CASCADE; forks live on with parent_session_id NULL.
            if conn.execute(d.sql(_DELETE_SESSION), (session_id,)).rowcount == 0:
                raise SessionNotFound(session_id)
            sweep_blobs_tx(d, conn)  # its snapshots went by cascade: collect their contents

        self._write(tx, durable=True)

    def transition(
        self,
        session_id: str,
        target: Status,
        *,
        lease: Lease | None = None,
        awaiting_input: bool = False,
    ) -> Session:
        d = self._dialect
        target = Status(target)
        cancelled = cancel_event(target, awaiting_input)

        def tx(conn: Any) -> Session:
            # PostgreSQL: the row locked FOR UPDATE; SQLite: the single writer (fence checked).
            current, _, _ = d.lock_session(conn, session_id, lease)
            event = cancelled or event_for_target(current, target)
            d.write_status(conn, session_id, current, event, self._now())
            return row_to_session(conn.execute(d.sql(_FIND_SESSION), (session_id,)).fetchone())

        return self._write(tx, durable=target in DURABLE_STATUSES)
