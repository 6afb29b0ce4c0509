"""What `xclaw fsck` reads from and writes to a database, as plain values, and the seam
(`FsckAccess`) each backend implements with its own SQL (sqlite_fsck, postgres_fsck).

The checks themselves live in xclaw/ops/fsck.py and see only these values and the Store
protocol; the repairs are typed actions whose SQL re-checks its own condition, so applying
one twice, or after the database moved on, changes nothing it should not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from xclaw.errors import StoreError
from xclaw.store.base import Store


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


REPAIR_KINDS = frozenset(
    {
        "interrupt_step",
        "set_status",
        "raise_next_seq",
        "detach_parent",
        "clear_lease_expiry",
        "expire_lease",
        "sweep_blobs",
    }
)


class FsckAccess(Protocol):
    """Raw reads and the one repair transaction of a backend."""

    def sessions(self) -> list[SessionRow]: ...

    def stray_steps(self) -> list[tuple[str, str]]:
        """(step_id, session_id) of trace rows whose session does not exist."""
        ...

    def snapshot_rows(self, session_id: str) -> list[SnapshotRow]:
        """A session's snapshot rows in seq order."""
        ...

    def stray_snapshots(self) -> list[tuple[str, int]]: ...

    def blob_hashes(self) -> set[str]: ...

    def blobs(self, batch: int = 64) -> Iterator[BlobRow]:
        """Every blob, a batch at a time (contents are checked against their hash)."""
        ...

    def now(self) -> int:
        """The lease clock (ms): the database server's for PostgreSQL."""
        ...

    def backup(self, stamp: str) -> str:
        """A full copy of the database taken before repairs; returns where it is."""
        ...

    def repair(self, actions: Sequence[Repair]) -> list[int]:
        """Apply every action in one transaction; rows changed per action."""
        ...


def fsck_access(store: Store) -> FsckAccess:
    """The backend's FsckAccess for an open store."""
    from xclaw.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        from xclaw.store.sqlite_fsck import SqliteFsck

        return SqliteFsck(store)
    try:
        from xclaw.store.postgres import PostgresStore
    except ImportError:  # pragma: no cover - psycopg is optional
        PostgresStore = None  # type: ignore[assignment,misc]
    if PostgresStore is not None and isinstance(store, PostgresStore):
        from xclaw.store.postgres_fsck import PgFsck

        return PgFsck(store)
    raise StoreError(f"fsck does not know the store {type(store).__name__}")
