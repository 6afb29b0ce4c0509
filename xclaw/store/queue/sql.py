"""[store/queue] Messages waiting for a session's run to end (migration 7, `queued_inputs`;
docs/protocol.md, "Input while a run is busy").

Both backends, one SQL text (dialect.py), part of the record role (`store.record`,
store/steps/record.py). An entry is written by `writes.QueueInput`, removed by `writes.Unqueue` (a
cancel, a steer delivered) or by the `writes.OpenTurn` that starts its turn, in that turn's
transaction: a message leaves the queue exactly when it is recorded as the turn's
`user_input` step, so a kill at any moment leaves it in one place or the other, never both
and never neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import MessageRecorded, SessionNotFound
from xclaw.store.role import Role
from xclaw.store.steps.rows import dump_json, load_json

if TYPE_CHECKING:
    from xclaw.store.dialect import Dialect
    from xclaw.store.steps.writes import QueueInput, Unqueue

T = TypeVar("T")

# What a message sent while a run is busy asks for (docs/protocol.md): the three that keep it.
QUEUE_MODES = ("queue", "steer", "interrupt")

_COLS = "seq, session_id, id, mode, content, sent_by, agent, created_at"
# An interrupting message goes first: it stopped the run to run next.
_ORDER = "ORDER BY CASE mode WHEN 'interrupt' THEN 0 ELSE 1 END, seq"
_QUEUED = f"SELECT {_COLS} FROM queued_inputs WHERE session_id=? {_ORDER}"
_ONE = f"SELECT {_COLS} FROM queued_inputs WHERE session_id=? AND id=?"
_INSERT = (
    "INSERT INTO queued_inputs (session_id, id, mode, content, sent_by, agent, created_at)"
    " VALUES (?, ?, ?, ?, ?::jsonb, ?, ?) ON CONFLICT (session_id, id) DO NOTHING"
)
_DELETE = "DELETE FROM queued_inputs WHERE session_id=? AND id=?"
_SESSIONS = "SELECT DISTINCT session_id FROM queued_inputs ORDER BY session_id"
_EXISTS = "SELECT 1 FROM sessions WHERE session_id=?"


@dataclass(frozen=True, slots=True)
class QueuedInput:
    """One message waiting its turn. `id`: the message id its `user_input` step will record
    (the client's, or one the server made); `mode`: `queue`, `steer` (given to the model at
    the run's next tool boundary; left queued if the run ends first) or `interrupt`."""

    seq: int
    session_id: str
    id: str
    mode: str
    content: str
    sent_by: Mapping[str, Any] | None
    agent: str | None
    created_at: int

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "busy": self.mode,
            "content": self.content,
            "at": self.created_at,
        }
        by = (self.sent_by or {}).get("by")
        user = by.get("user") if isinstance(by, dict) else None
        if user:
            out["user"] = user
        if self.agent:
            out["agent"] = self.agent
        return out


def _entry(row: Any) -> QueuedInput:
    return QueuedInput(
        seq=int(row[0]),
        session_id=str(row[1]),
        id=str(row[2]),
        mode=str(row[3]),
        content=str(row[4]),
        sent_by=load_json(row[5]),
        agent=row[6],
        created_at=int(row[7]),
    )


def dequeue_tx(d: Dialect, conn: Any, session_id: str, entry_id: str) -> bool:
    """The entry removed in the open transaction (the turn that runs it opens)."""
    return bool(conn.execute(d.sql(_DELETE), (session_id, entry_id)).rowcount)


class QueueMethods(Role):
    """The queue of messages sent while a run is busy, for both backends."""

    def queued(self, session_id: str) -> list[QueuedInput]:
        """The session's waiting messages, in the order they run."""
        sql = self._dialect.sql(_QUEUED)
        return [_entry(r) for r in self._read(lambda c: c.execute(sql, (session_id,)).fetchall())]

    def queued_sessions(self) -> list[str]:
        """Sessions with a message waiting (what a worker's sweep looks at)."""
        sql = self._dialect.sql(_SESSIONS)
        return [str(r[0]) for r in self._read(lambda c: c.execute(sql).fetchall())]

    # --- transaction bodies (writes.QueueInput, writes.Unqueue) --------------------------
    def _queue_input_tx(self, w: QueueInput) -> Callable[[Any], tuple[QueuedInput, bool]]:
        """(the entry, True) once written; (the entry queued before, False) for a resend of
        its id; MessageRecorded when a message with that id is recorded already (it ran, or
        runs); SessionNotFound for a session that does not exist."""
        from xclaw.store.common import message_step_tx  # (common imports this module)

        d, now = self._dialect, self._now()
        sent_by = None if w.sent_by is None else dump_json(dict(w.sent_by), "sent_by")

        def tx(conn: Any) -> tuple[QueuedInput, bool]:
            if conn.execute(d.sql(_EXISTS), (w.session_id,)).fetchone() is None:
                raise SessionNotFound(w.session_id)
            earlier = message_step_tx(d, conn, w.session_id, w.id)
            if earlier is not None:
                raise MessageRecorded(earlier.seq)
            added = conn.execute(
                d.sql(_INSERT), (w.session_id, w.id, w.mode, w.content, sent_by, w.agent, now)
            ).rowcount
            row = conn.execute(d.sql(_ONE), (w.session_id, w.id)).fetchone()
            return _entry(row), bool(added)

        return tx

    def _unqueue_tx(self, w: Unqueue) -> Callable[[Any], QueuedInput | None]:
        """The entry removed (None: it was not queued: run, cancelled, or never there)."""
        d = self._dialect

        def tx(conn: Any) -> QueuedInput | None:
            row = conn.execute(d.sql(_ONE), (w.session_id, w.id)).fetchone()
            if row is None:
                return None
            conn.execute(d.sql(_DELETE), (w.session_id, w.id))
            return _entry(row)

        return tx
