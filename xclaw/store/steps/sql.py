"""[store/steps] Sessions and step reads of the Store protocol (create, find, list, update, delete,
transition; get_step, latest_steps, steps, mark_interrupted), one SQL text for both backends
(dialect.py). Part of the record role (store/steps/record.py); its connection layer
(store/role.py) provides `_dialect`, `_write` (SQLite: the writer thread; PostgreSQL: a pooled transaction) and `_read`
(SQLite: the thread's read-only connection; PostgreSQL: the pool). What is committed together
and which commits are synced is decided here, per method, as before the move: a new or
deleted session and a move to a status in DURABLE_STATUSES are synced; a title or metadata
edit is not; mark_interrupted is synced (resume decisions depend on it). The one insert and
the one completion of a step (`_insert_step_tx`, `_finish_step_tx`) stay with each backend: they are
the write path, shaped per backend (PostgreSQL inserts the step in the status statement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from xclaw.errors import SessionNotFound, StepNotRunning, StoreError
from xclaw.store.blobs.store import sweep_blobs_tx
from xclaw.store.common import cancel_event, message_step_tx
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.role import Role
from xclaw.store.steps.changes import record_change_tx
from xclaw.store.steps.model import (
    INTERRUPTED,
    Session,
    Status,
    Step,
    StepStatus,
    display_id,
    event_for_target,
    full_step_id,
    parse_step_ref,
)
from xclaw.store.steps.rows import (
    SESSION_COLS,
    SESSIONS,
    STEP_COLS,
    row_to_session,
    row_to_step,
)
from xclaw.store.steps.writes import (
    CreateSession,
    DeleteSession,
    Transition,
    UpdateSession,
)

T = TypeVar("T")
R = TypeVar("R")

# Every column from the Session value (store/steps/columns.py).
_INSERT_SESSION = SESSIONS.insert() + " ON CONFLICT (session_id) DO NOTHING RETURNING 1"
_FIND_SESSION = f"SELECT {SESSION_COLS} FROM sessions WHERE session_id=?"
_UPDATE_SESSION = (
    "UPDATE sessions SET title=coalesce(?, title), metadata=coalesce(?::jsonb, metadata),"
    f" updated_at=? WHERE session_id=? RETURNING {SESSION_COLS}"
)
_DELETE_SESSION = "DELETE FROM sessions WHERE session_id=?"
_GET_STEP = f"SELECT {STEP_COLS} FROM traces WHERE session_id=? AND seq=?"
_LATEST_STEPS = f"SELECT {STEP_COLS} FROM traces WHERE session_id=? ORDER BY seq DESC LIMIT ?"
# A rollback's pending plan is no interrupted step: it stays running until the rollback is
# finished or abandoned (xclaw/runtime/rollbacks.py).
_NOT_PLAN = " AND NOT (step_type='system_alert' AND name='rollback')"
_INTERRUPT = (
    "UPDATE traces SET status='failed', error_message=?, end_time=?"
    " WHERE session_id=? AND status='running'" + _NOT_PLAN
)
# A pending approval is asked again after a restart, so mark_interrupted leaves it running.
_NOT_APPROVAL = " AND NOT (step_type='system_alert' AND name='approval')"
# ... or, when something else ended its wait, settles it with an output saying what.
_INTERRUPT_ANSWERING = (
    "UPDATE traces SET output_data = CASE WHEN step_type='system_alert' AND name='approval'"
    " THEN ?::jsonb ELSE output_data END, status='failed', error_message=?, end_time=?"
    " WHERE session_id=? AND status='running'" + _NOT_PLAN
)
_RUNNING_APPROVAL = (
    "SELECT 1 FROM traces WHERE session_id=? AND status='running'"
    " AND step_type='system_alert' AND name='approval' LIMIT 1"
)


_STEP_STATE = "SELECT status, error_message FROM traces WHERE session_id=? AND seq=?"


def not_running(d: Dialect, conn: Any, session_id: str, seq: int, ref: object) -> StepNotRunning:
    """Why a completion found no running step `seq`: StepNotFound / SessionNotFound raised
    here, else the StepNotRunning to raise (saying interrupted or its status)."""
    d.require_step(conn, session_id, seq, ref)
    was = conn.execute(d.sql(_STEP_STATE), (session_id, seq)).fetchone()
    how = INTERRUPTED if was and was[1] == INTERRUPTED else (was or ("?",))[0]
    return StepNotRunning(
        f"step {display_id(seq)} of session {session_id} is already {how}; "
        "only a running step can be completed or failed"
    )


def interrupting(
    d: Dialect, keep_approvals: bool, approval_output: Mapping[str, Any] | None
) -> tuple[str, tuple[Any, ...]]:
    """The statement that marks a session's dangling `running` steps interrupted (returning
    them), and its first parameters; the end time and the session id follow."""
    answering = approval_output is not None and not keep_approvals
    head = _INTERRUPT_ANSWERING if answering else _INTERRUPT
    sql = d.sql(head + (_NOT_APPROVAL if keep_approvals else "") + f" RETURNING {STEP_COLS}")
    if answering:
        return sql, (d.json(approval_output, "output_data"), INTERRUPTED)
    return sql, (INTERRUPTED,)


def approval_pending(d: Dialect, conn: Any, session_id: str) -> bool:
    """Another approval of this session is still waiting for its answer."""
    return conn.execute(d.sql(_RUNNING_APPROVAL), (session_id,)).fetchone() is not None


class SessionMethods(Role):
    """The session methods of the Store protocol, for both backends."""

    def create_session(
        self,
        *,
        session_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        # 128 random bits, URL-safe: unguessable (docs/protocol.md; at least 96 asked).
        w = (
            CreateSession(title=title, metadata=metadata)
            if session_id is None
            else CreateSession(session_id=session_id, title=title, metadata=metadata)
        )
        return self.write(w)

    def _created_session_tx(self, w: CreateSession) -> Callable[[Any], Session]:
        """writes.CreateSession's transaction: StoreError when the id is taken."""
        sid = w.session_id
        tx = self._create_session_tx(sid, w.title, w.metadata)

        def created(conn: Any) -> Session:
            session = tx(conn)
            if session is None:
                raise StoreError(f"a session with id {sid!r} already exists")
            return session

        return created

    def _create_session_tx(
        self, sid: str, title: str, metadata: Mapping[str, Any] | None
    ) -> Callable[[Any], Session | None]:
        """The insert of a new session in Init; None: the id is taken."""
        d = self._dialect
        meta = dict(metadata or {})
        d.json(meta, "metadata")  # refused here, before the transaction, if it is not JSON
        title = d.text(title) or ""

        def tx(conn: Any) -> Session | None:
            now = self._now()
            session = Session(
                session_id=sid,
                title=title,
                status=Status.INIT,
                created_at=now,
                updated_at=now,
                metadata=meta,
            )
            # fetchall: SQLite finishes a RETURNING statement only once its rows are read.
            rows = conn.execute(
                d.sql(_INSERT_SESSION), SESSIONS.params(session, d.json, d.text)
            ).fetchall()
            return session if rows else None

        return tx

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
        return self.write(UpdateSession(session_id=session_id, title=title, metadata=metadata))

    def _update_session_tx(
        self,
        session_id: str,
        title: str | None,
        metadata: Mapping[str, Any] | None,
        *,
        merge: bool = False,
    ) -> Callable[[Any], Session]:
        """Rename, or replace the metadata (`merge`: these keys set, the others kept)."""
        d = self._dialect
        meta_json = None if metadata is None else d.json(dict(metadata), "metadata")

        def tx(conn: Any) -> Session:
            given = meta_json
            if merge and metadata is not None:
                row = conn.execute(d.sql(_FIND_SESSION), (session_id,)).fetchone()
                if row is None:
                    raise SessionNotFound(session_id)
                given = d.json({**row_to_session(row).metadata, **metadata}, "metadata")
            rows = conn.execute(
                d.sql(_UPDATE_SESSION), (d.text(title), given, self._now(), session_id)
            ).fetchall()
            if not rows:
                raise SessionNotFound(session_id)
            return row_to_session(rows[0])

        return tx

    def delete_session(self, session_id: str) -> None:
        self.write(DeleteSession(session_id=session_id))

    def _delete_session_tx(self, session_id: str) -> Callable[[Any], None]:
        d = self._dialect

        def tx(conn: Any) -> None:
            # Steps go by ON DELETE CASCADE; forks live on with parent_session_id NULL.
            if conn.execute(d.sql(_DELETE_SESSION), (session_id,)).rowcount == 0:
                raise SessionNotFound(session_id)
            sweep_blobs_tx(d, conn)  # its snapshots went by cascade: collect their contents
            record_change_tx(d, conn, session_id, "delete", {}, self._now())

        return tx

    def _transition_tx(self, w: Transition, lease: Lease | None) -> Callable[[Any], Session]:
        """writes.Transition's transaction (checked: model.next_status)."""
        d, session_id = self._dialect, w.session_id
        target = Status(w.target)
        cancelled = cancel_event(target, w.awaiting_input)

        def tx(conn: Any) -> Session:
            # PostgreSQL: the row locked FOR UPDATE; SQLite: the single writer (fence checked).
            current, _, _ = d.lock_session(conn, session_id, lease)
            event = cancelled or event_for_target(current, target)
            d.write_status(conn, session_id, current, event, self._now())
            return row_to_session(conn.execute(d.sql(_FIND_SESSION), (session_id,)).fetchone())

        return tx

    # --- steps ------------------------------------------------------------------------------
    def _parent_id(self, conn: Any, session_id: str, ref: str | None) -> str | None:
        """A parent link must name an existing step of the same session (never outside)."""
        if ref is None:
            return None
        seq = parse_step_ref(ref, session_id)
        self._dialect.require_step(conn, session_id, seq, ref)
        return full_step_id(session_id, seq)

    def get_step(self, session_id: str, ref: str | int) -> Step:
        d = self._dialect
        seq = parse_step_ref(ref, session_id)
        sql = d.sql(_GET_STEP)

        def q(conn: Any) -> Step:
            row = conn.execute(sql, (session_id, seq)).fetchone()
            if row is None:
                d.require_step(conn, session_id, seq, ref)
            return row_to_step(row)

        return self._read(q, snapshot=d.free_read_snapshots)

    def latest_steps(self, session_id: str, n: int = 10) -> list[Step]:
        d = self._dialect
        sql = d.sql(_LATEST_STEPS)

        def q(conn: Any) -> list[Any]:
            rows = conn.execute(sql, (session_id, max(n, 0))).fetchall()
            if not rows:
                d.require_session(conn, session_id)
            return list(rows)

        return [row_to_step(r) for r in reversed(self._read(q, snapshot=d.free_read_snapshots))]

    def steps(
        self,
        session_id: str,
        *,
        agent: str | None = None,
        statuses: Iterable[StepStatus] | None = None,
        after_seq: int = 0,
    ) -> list[Step]:
        d = self._dialect
        sql = f"SELECT {STEP_COLS} FROM traces WHERE session_id=? AND seq>?"
        params: list[Any] = [session_id, after_seq]
        if agent is not None:
            sql += " AND agent=?"
            params.append(agent)
        if statuses is not None:
            # Distinct words: at most one per StepStatus, so any_of gives one condition.
            words = list(dict.fromkeys(StepStatus(s).value for s in statuses))
            if not words:
                return []
            ((condition, values),) = d.any_of("status", words)
            sql += " AND " + condition
            params.extend(values)
        sql = d.sql(sql + " ORDER BY seq")  # never by timestamp (two steps can share a ms)

        def q(conn: Any) -> list[Step]:
            # Converted while iterating: the raw rows and the steps never both sit in memory.
            steps = list(map(row_to_step, conn.execute(sql, params)))
            if not steps:
                d.require_session(conn, session_id)
            return steps

        return self._read(q, snapshot=d.free_read_snapshots)

    def message_step(self, session_id: str, message_id: str) -> Step | None:
        d = self._dialect
        return self._read(
            lambda conn: message_step_tx(d, conn, session_id, message_id),
            snapshot=d.free_read_snapshots,
        )

    def _mark_interrupted_tx(
        self,
        session_id: str,
        keep_approvals: bool,
        approval_output: Mapping[str, Any] | None,
        lease: Lease | None,
    ) -> Callable[[Any], list[Step]]:
        d = self._dialect
        sql, params = interrupting(d, keep_approvals, approval_output)

        def tx(conn: Any) -> list[Step]:
            # SessionNotFound, the fence, and on PostgreSQL the row lock against other writers.
            d.lock_session(conn, session_id, lease)
            rows = conn.execute(sql, (*params, self._now(), session_id)).fetchall()
            return sorted(map(row_to_step, rows), key=lambda s: s.seq)

        return tx
