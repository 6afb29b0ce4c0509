"""[store/steps] The change log (`session_changes`, migration 4): rollbacks and deletions, each
written in the transaction that makes it, with the process that made it.

A server learns from it of the changes it did not make — `xclaw rollback` or `xclaw gc` from
the command line, a rollback through another server on the database — and pushes the new
history to the clients it serves (xclaw/runtime/changes.py). Both backends, one SQL text
(dialect.py). Rows older than ten minutes are deleted by the next change; a reader looks a
window back in time, not at ids: PostgreSQL may commit a later id first.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.store.role import Role
from xclaw.store.steps.rows import load_json

if TYPE_CHECKING:
    from xclaw.store.dialect import Dialect

T = TypeVar("T")

# This process, as the log names it: a server skips the changes it made itself.
ORIGIN = f"{socket.gethostname()}:{os.getpid()}"
KEEP_MS = 10 * 60_000

_INSERT = (
    "INSERT INTO session_changes (session_id, kind, detail, origin, created_at)"
    " VALUES (?, ?, ?::jsonb, ?, ?)"
)
_PRUNE = "DELETE FROM session_changes WHERE created_at < ?"
_SINCE = (
    "SELECT id, session_id, kind, detail, origin, created_at FROM session_changes"
    " WHERE created_at >= ? ORDER BY id"
)


@dataclass(frozen=True, slots=True)
class SessionChange:
    id: int
    session_id: str
    kind: str  # rollback | delete
    origin: str  # host:pid of the process that made it
    created_at: int  # ms, by that process's clock
    detail: dict[str, Any] = field(default_factory=dict)  # rollback: {"stepId", "deleted"}


def record_change_tx(
    d: Dialect, conn: Any, session_id: str, kind: str, detail: dict[str, Any], now: int
) -> None:
    """Inside the transaction that changes the session: say so, and forget old entries."""
    conn.execute(d.sql(_PRUNE), (now - KEEP_MS,))
    conn.execute(d.sql(_INSERT), (session_id, kind, d.json(detail, "detail"), d.text(ORIGIN), now))


class ChangeMethods(Role):
    """Reading the log: part of the lease role (`store.leases`) of both backends."""

    def changes_since(self, since_ms: int) -> list[SessionChange]:
        """The changes recorded at or after `since_ms`, oldest first."""
        sql = self._dialect.sql(_SINCE)
        rows = self._read(lambda c: c.execute(sql, (since_ms,)).fetchall())
        return [SessionChange(r[0], r[1], r[2], r[4], r[5], load_json(r[3]) or {}) for r in rows]
