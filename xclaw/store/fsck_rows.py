"""[store] What `xclaw fsck` reads from and writes to a database, as plain values, the seam
(`FsckAccess`) each backend implements (sqlite.fsck, postgres.fsck: consistent reads, the
clock, the backup), and the one repair transaction both run through their dialect.

The checks themselves live in xclaw/ops/fsck.py and see only these values and the Store
protocol; the repairs are typed actions whose SQL re-checks its own condition, so applying
one twice, or after the database moved on, changes nothing it should not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from xclaw.errors import StoreError
from xclaw.store.base import Store
from xclaw.store.blobs.store import sweep_blobs_tx
from xclaw.store.dialect import Dialect
from xclaw.store.snapshots.model import PendingRestore
from xclaw.store.snapshots.sql import row_to_restore
from xclaw.store.steps.model import INTERRUPTED, Status, Step, event_for_target
from xclaw.store.steps.rows import STEP_COLS, load_json, row_to_step

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A sessions row with the bookkeeping columns the Session value leaves out."""

    session_id: str
    status: str
    next_seq: int
    awaiting_input: bool
    is_forked: bool
    parent_session_id: str | None
    forked_from_seq: int | None
    lease_owner: str | None
    lease_expires_at: int | None
    lease_token: int


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    session_id: str
    seq: int
    base_seq: int | None
    manifest: Any  # decoded JSON: whole state or delta
    removed: Any


@dataclass(frozen=True, slots=True)
class BlobRow:
    hash: str
    size: int
    encoding: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Repair:
    """One safe fix. kind: interrupt_step (session_id, seq) | set_status (session_id,
    status, expected) | raise_next_seq (session_id, value) | detach_parent (step_id) |
    clear_lease_expiry / expire_lease (session_id) | sweep_blobs."""

    kind: str
    session_id: str | None = None
    seq: int | None = None
    step_id: str | None = None
    status: str | None = None
    expected: str | None = None
    value: int | None = None


class FsckReader:
    """Reads of one consistent view of the database (one read transaction: SQLite's WAL
    snapshot, PostgreSQL's REPEATABLE READ), so a server writing meanwhile cannot make a
    healthy record look broken. The SQL is the shared text, run through the backend's
    dialect (PostgreSQL's jsonb columns come back as their text, as SQLite's JSON text)."""

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return list(self.conn.execute(self.dialect.sql(sql), params).fetchall())

    def sessions(self) -> list[SessionRow]:
        rows = self._all(
            "SELECT session_id, current_status, next_seq, awaiting_input, is_forked, "
            "parent_session_id, forked_from_seq, lease_owner, lease_expires_at, lease_token "
            "FROM sessions ORDER BY created_at, session_id"
        )
        return [
            SessionRow(
                r[0],
                r[1],
                int(r[2]),
                bool(r[3]),
                bool(r[4]),
                r[5],
                r[6],
                r[7],
                r[8],
                int(r[9] or 0),
            )
            for r in rows
        ]

    def steps(self, session_id: str) -> list[Step]:
        rows = self._all(
            f"SELECT {STEP_COLS} FROM traces WHERE session_id=? ORDER BY seq", (session_id,)
        )
        return [row_to_step(r) for r in rows]

    def snapshot_rows(self, session_id: str) -> list[SnapshotRow]:
        rows = self._all(
            "SELECT session_id, seq, base_seq, manifest, removed FROM snapshots "
            "WHERE session_id=? ORDER BY seq",
            (session_id,),
        )
        return [SnapshotRow(r[0], r[1], r[2], load_json(r[3]), load_json(r[4])) for r in rows]

    def restores(self) -> list[PendingRestore]:
        rows = self._all(
            "SELECT session_id, restore_id, kind, source_session_id, snapshot_seq, "
            "manifest, ignore, created_at FROM workspace_restores ORDER BY session_id"
        )
        return [row_to_restore(r) for r in rows]

    def stray_steps(self) -> list[tuple[str, str]]:
        """(step_id, session_id) of trace rows whose session does not exist."""
        return self._all(
            "SELECT step_id, session_id FROM traces t WHERE NOT EXISTS "
            "(SELECT 1 FROM sessions s WHERE s.session_id=t.session_id) ORDER BY step_id"
        )

    def stray_snapshots(self) -> list[tuple[str, int]]:
        return self._all(
            "SELECT session_id, seq FROM snapshots p WHERE NOT EXISTS "
            "(SELECT 1 FROM sessions s WHERE s.session_id=p.session_id)"
        )

    def blob_hashes(self) -> set[str]:
        """Every content stored: in the `blobs` table, or in an object store (where
        `object_blobs` says; the object store itself is not read)."""
        return {
            r[0] for r in self._all("SELECT hash FROM blobs UNION SELECT hash FROM object_blobs")
        }

    def blobs(self, batch: int = 64) -> Iterator[BlobRow]:
        """Every blob, a page at a time (contents are checked against their hash)."""
        after = ""
        while True:
            rows = self._all(
                "SELECT hash, size, encoding, data FROM blobs WHERE hash>? ORDER BY hash LIMIT ?",
                (after, batch),
            )
            if not rows:
                return
            for r in rows:
                yield BlobRow(r[0], int(r[1]), r[2], bytes(r[3]))
            after = rows[-1][0]


class FsckAccess(Protocol):
    """A backend's consistent reads, clock, backup and the one repair transaction."""

    def read(self, fn: Callable[[FsckReader], T]) -> T:
        """fn over one consistent view of the whole database."""
        ...

    def now(self) -> int:
        """The lease clock (ms): the database server's for PostgreSQL."""
        ...

    def storage(self) -> list[tuple[str, str]]:
        """(code, meaning) of what is wrong below the rows: the database's own integrity
        check, a WAL file it cannot read. Nothing found: []."""
        ...

    def backup(self, stamp: str) -> str:
        """A full copy of the database taken before repairs; returns where it is."""
        ...

    def repair(self, actions: Sequence[Repair]) -> list[int]:
        """Apply every action in one transaction; rows changed per action."""
        ...


# Each repair's SQL carries its own condition, so it only ever fixes what was found.
_REPAIR_SQL = {
    "interrupt_step": (
        "UPDATE traces SET status='failed', error_message=?, end_time=? "
        "WHERE session_id=? AND seq=? AND status='running' AND session_id IN "
        "(SELECT session_id FROM sessions WHERE current_status IN ('Success', 'Failed'))"
    ),
    "raise_next_seq": "UPDATE sessions SET next_seq=? WHERE session_id=? AND next_seq<?",
    "detach_parent": "UPDATE traces SET parent_step_id=NULL WHERE step_id=?",
    "clear_lease_expiry": (
        "UPDATE sessions SET lease_expires_at=NULL WHERE session_id=? AND lease_owner IS NULL"
    ),
    "expire_lease": (
        "UPDATE sessions SET lease_expires_at=? WHERE session_id=? AND lease_owner IS NOT NULL "
        "AND (lease_expires_at IS NULL OR lease_expires_at>?)"
    ),
}


def repair_tx(
    d: Dialect,
    conn: Any,
    actions: Sequence[Repair],
    now: int,
    lease_clock: Callable[[Any], int],
) -> list[int]:
    """Every action in the caller's one transaction; rows changed per action. `lease_clock`
    reads the lease clock (the database server's on PostgreSQL) for expire_lease."""
    changed: list[int] = []
    for a in actions:
        if a.kind == "sweep_blobs":
            changed.append(sweep_blobs_tx(d, conn))
            continue
        if a.kind == "set_status":
            changed.append(_set_status(d, conn, a, now))
            continue
        params: tuple[object, ...]
        if a.kind == "interrupt_step":
            params = (INTERRUPTED, now, a.session_id, a.seq)
        elif a.kind == "raise_next_seq":
            params = (a.value, a.session_id, a.value)
        elif a.kind == "detach_parent":
            params = (a.step_id,)
        elif a.kind == "clear_lease_expiry":
            params = (a.session_id,)
        elif a.kind == "expire_lease":
            clock = lease_clock(conn)
            params = (clock, a.session_id, clock)
        else:
            raise ValueError(f"unknown repair {a.kind!r}")
        changed.append(conn.execute(d.sql(_REPAIR_SQL[a.kind]), params).rowcount)
    return changed


def _set_status(d: Dialect, conn: Any, a: Repair, now: int) -> int:
    """Move a session found in the wrong status, through the one status write (so along the
    state machine), and only if it is still in the status the check saw."""
    row = conn.execute(
        d.sql("SELECT current_status FROM sessions WHERE session_id=?"), (a.session_id,)
    ).fetchone()
    if row is None or a.expected is None or row[0] != a.expected:
        return 0
    current, target = Status(a.expected), Status(str(a.status))
    d.write_status(conn, str(a.session_id), current, event_for_target(current, target), now)
    return 1


@runtime_checkable
class Checkable(Protocol):
    """A store that can be checked: it gives its backend's FsckAccess (both backends do;
    a view of one, such as a lease holder's, does not)."""

    def fsck_access(self) -> FsckAccess: ...


def fsck_access(store: Store) -> FsckAccess:
    """The backend's FsckAccess for an open store."""
    if isinstance(store, Checkable):
        return store.fsck_access()
    raise StoreError(f"fsck does not know the store {type(store).__name__}")
