"""[store/transfer] Moving sessions into a store, and what retention would free (`xclaw import`,
`xclaw gc`), one text for both backends (dialect.py). Part of the record role
(store/steps/record.py), over the connection layer's `_dialect`, `_write` and `_read`; the export format itself is
store/transfer/format.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import StoreError
from xclaw.store.dialect import Dialect
from xclaw.store.role import Role
from xclaw.store.steps.model import Session, Step
from xclaw.store.steps.rows import SESSIONS, STEPS
from xclaw.store.steps.writes import Kind
from xclaw.store.transfer.format import Exported, Imported, placed

if TYPE_CHECKING:
    from xclaw.store.snapshots.sql import SnapshotMethods

T = TypeVar("T")

# Every column of the Session and Step values as they were exported (store/steps/columns.py).
_INSERT_SESSION = SESSIONS.insert("next_seq")
_INSERT_STEP = STEPS.insert()
_SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id=?"


def _step_rows(d: Dialect, steps: Sequence[Step]) -> list[list[Any]]:
    return [STEPS.params(st, d.json, d.text) for st in sorted(steps, key=lambda s: s.seq)]


def _insert(
    d: Dialect, conn: Any, session: Session, steps: Sequence[Step], rows: list[list[Any]]
) -> Session:
    """One session and its steps, in the caller's transaction."""
    sid = session.session_id
    if conn.execute(d.sql(_SESSION_EXISTS), (sid,)).fetchone():
        raise StoreError(f"a session with id {sid!r} already exists")
    parent = session.parent_session_id
    if parent and not conn.execute(d.sql(_SESSION_EXISTS), (parent,)).fetchone():
        parent = None
    next_seq = max((s.seq for s in steps), default=0) + 1
    session = replace(session, parent_session_id=parent, metadata=dict(session.metadata))
    conn.execute(d.sql(_INSERT_SESSION), (*SESSIONS.params(session, d.json, d.text), next_seq))
    d.executemany(conn, d.sql(_INSERT_STEP), rows)
    return session


class TransferMethods(Role):
    """`import_sessions` and `retention_preview` of the Store protocol, for both backends."""

    _snapshots: SnapshotMethods  # the blobs an import brings go in with its steps

    def import_sessions(self, exported: Sequence[Exported]) -> list[Imported]:
        """Insert the sessions of an export with their steps and blobs exactly as given (ids,
        seqs, times, statuses) in one durable transaction: all of them, or none. A session
        whose id is taken here gets a new one (transfer.placed); a parent session absent
        here is unlinked."""
        d = self._dialect
        # Through the blob store (the database's table or the object store), in this
        # transaction.
        put_blobs = self._snapshots._put_blobs_tx(
            {h: b for ex in exported for h, b in ex.blobs.items()}
        )
        # Converted before the transaction (no JSON encoding on the writer thread).
        prepared = [(ex, _step_rows(d, ex.steps)) for ex in exported]
        prepared.sort(key=lambda p: p[0].session.created_at)  # parents before their forks

        def tx(conn: Any) -> list[Imported]:
            def taken(sid: str) -> bool:
                return conn.execute(d.sql(_SESSION_EXISTS), (sid,)).fetchone() is not None

            put_blobs(conn)
            renamed: dict[str, str] = {}
            done = []
            for ex, rows in prepared:
                session, steps = placed(ex, taken, renamed)
                if steps is not ex.steps:
                    rows = _step_rows(d, steps)
                done.append(
                    Imported(
                        ex.session.session_id, _insert(d, conn, session, steps, rows), len(steps)
                    )
                )
            return done

        return self._write(tx, Kind.IMPORTED)

    def retention_preview(self, session_ids: Sequence[str]) -> tuple[int, int, int]:
        """(snapshots, blobs, blob bytes) that deleting these sessions would free: their
        snapshots, and the blobs no other snapshot, no pending restore and no step's images
        name (the sweep's mark phase, without those sessions)."""
        d = self._dialect
        doomed, ids = d.in_ids("session_id", session_ids)
        kept = {
            part: f" AND NOT ({d.in_ids(alias + '.session_id', session_ids)[0]})"
            for part, alias in (("snapshots", "s"), ("restores", "r"), ("steps", "t"))
        }
        marked = d.referenced_hashes.format(**kept)
        snaps_sql = d.sql(f"SELECT count(*) FROM snapshots WHERE {doomed}")
        freed_sql = d.sql(
            f"SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE hash NOT IN ({marked})"
        )

        def q(conn: Any) -> tuple[int, int, int]:
            snaps = conn.execute(snaps_sql, (ids,)).fetchone()
            blobs = conn.execute(freed_sql, (ids, ids, ids)).fetchone()
            return int(snaps[0]), int(blobs[0]), int(blobs[1])

        return self._read(q, snapshot=True)
