"""[store/blobs] Where file contents live: the BlobStore seam and its default, the database.

Workspace snapshots and tool images name contents by sha256 (docs/storage.md). Who holds the
bytes is this seam: `DatabaseBlobs` keeps them in the `blobs` table (the default, and what
every database did before), `ObjectBlobs` (store/blobs/objects.py) in an S3-compatible object
store with only marks in the database (`blob_store: s3://BUCKET/PREFIX`). The snapshot rules
(store/snapshots/sql.py) are the same for both: a snapshot may add only contents the blob store
says are held (`stored_tx`, inside the snapshot's transaction), and sweeps never race a save.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from xclaw.errors import MissingBlobs
from xclaw.store.dialect import Dialect
from xclaw.store.snapshots.model import content_hash, decode_blob, encode_blob
from xclaw.store.steps.writes import Kind

T = TypeVar("T")

Reader = Callable[[Callable[[Any], Any]], Any]


class StoreAccess(Protocol):
    """What a blob store needs of the store it serves: its transactions and its clock."""

    def read(self, fn: Callable[[Any], T]) -> T: ...

    def write(self, fn: Callable[[Any], T], kind: Kind) -> T: ...

    def now(self) -> int: ...


class BlobStore(Protocol):
    """Content-addressed bytes: put once, read by hash, swept when nothing names them."""

    @property
    def description(self) -> str:
        """Where the contents are, for logs and `xclaw` banners (no credentials)."""

    @property
    def in_database(self) -> bool:
        """Whether the bytes are rows of the database (the `blobs` table)."""

    def missing(self, hashes: Sequence[str]) -> set[str]:
        """The hashes among `hashes` that must be put before a snapshot may name them."""

    def put(self, blobs: Mapping[str, bytes]) -> int:
        """Store contents (each checked against its hash); the bytes this added."""

    def put_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]:
        """A transaction body storing `blobs` with the caller's write (a tool step's
        images, committed with the step)."""

    def get(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """Contents by hash; MissingBlobs for any not held."""

    def stored_tx(self, d: Dialect, conn: Any, hashes: list[str]) -> set[str]:
        """Inside a snapshot's transaction (the dialect's blob lock held shared): the hashes
        among `hashes` that may be referenced now, and stay so until the commit."""

    def gc(self) -> int:
        """Delete what nothing references; how many contents went."""

    def close(self) -> None: ...


# --- the database -----------------------------------------------------------------------------

BlobRow = tuple[str, int, str, bytes]  # hash, raw size, encoding, stored payload
_INSERT_BLOB = (
    "INSERT INTO blobs (hash, size, encoding, data, created_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING"
)


def blob_rows(blobs: Mapping[str, bytes]) -> list[BlobRow]:
    """Contents checked against their hash and encoded for the blobs table (off the writer)."""
    rows = []
    for h, data in blobs.items():
        if content_hash(data) != h:
            raise ValueError(f"blob {h[:12]}... does not match its content")
        encoding, payload = encode_blob(data)
        rows.append((h, len(data), encoding, payload))
    return rows


def insert_blobs(d: Dialect, conn: Any, rows: Sequence[BlobRow], now: int) -> int:
    """In the caller's transaction: the contents not stored yet; the bytes this added."""
    sql = d.sql(_INSERT_BLOB)
    added = 0
    for h, size, encoding, payload in rows:
        if conn.execute(sql, (h, size, encoding, payload, now)).rowcount:
            added += len(payload)
    return added


def stored_hashes(d: Dialect, conn: Any, hashes: Iterable[str], cols: str = "hash") -> list[Any]:
    """Rows (`cols`) of the blobs among `hashes` that are in the `blobs` table."""
    rows: list[Any] = []
    for cond, params in d.any_of("hash", list(hashes)):
        rows.extend(conn.execute(d.sql(f"SELECT {cols} FROM blobs WHERE {cond}"), params))
    return rows


def sweep_blobs_tx(d: Dialect, conn: Any) -> int:
    """Delete every blob of the `blobs` table no snapshot, no pending restore and no tool
    step's image refers to; returns how many (mark and sweep in one statement)."""
    d.lock_blobs(conn, True)
    marked = d.referenced_hashes.format(snapshots="", restores="", steps="")
    rowcount: int = conn.execute(d.sql(f"DELETE FROM blobs WHERE hash NOT IN ({marked})")).rowcount
    return rowcount


class DatabaseBlobs:
    """The bytes in the `blobs` table, zlib-compressed where that saves ≥ 10 %."""

    description = "the database"
    in_database = True

    def __init__(self, dialect: Dialect, access: StoreAccess) -> None:
        self._d = dialect
        self._access = access

    def missing(self, hashes: Sequence[str]) -> set[str]:
        d = self._d
        rows = self._access.read(lambda conn: stored_hashes(d, conn, hashes))
        return set(hashes) - {r[0] for r in rows}

    def put(self, blobs: Mapping[str, bytes]) -> int:
        # Relaxed (writes.SYNC): the snapshot that names these blobs commits durably, and a
        # durable commit makes every earlier commit durable too (SQLite WAL, PostgreSQL WAL).
        return self._access.write(self.put_tx(blobs), Kind.BLOBS_PUT)

    def put_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]:
        rows = blob_rows(blobs)  # hashed and compressed now, in the caller's thread
        d, access = self._d, self._access
        return lambda conn: insert_blobs(d, conn, rows, access.now()) if rows else 0

    def get(self, hashes: Sequence[str]) -> dict[str, bytes]:
        d = self._d
        rows = self._access.read(
            lambda conn: stored_hashes(d, conn, hashes, "hash, encoding, data")
        )
        found = {h: decode_blob(enc, data) for h, enc, data in rows}
        missing = set(hashes) - set(found)
        if missing:
            raise MissingBlobs(missing)
        return found

    def stored_tx(self, d: Dialect, conn: Any, hashes: list[str]) -> set[str]:
        return {r[0] for r in stored_hashes(d, conn, hashes)}

    def gc(self) -> int:
        d = self._d
        return self._access.write(lambda conn: sweep_blobs_tx(d, conn), Kind.BLOBS_SWEPT)

    def close(self) -> None:
        return None
