"""File contents in an S3-compatible object store; the database keeps marks only.

`blob_store: s3://BUCKET/PREFIX` (docs/storage.md, "Contents in an object store"). One object
per content, key = its sha256, written once (If-None-Match). The `object_blobs` table holds
no bytes: a row (hash, size, marked_at, stored) is the mark that keeps the sweep off an object.

The rule that makes the sweep safe against a snapshot being saved at the same moment:

1. before uploading, a saver marks the hashes (marked_at = now; `stored` reset if the old mark
   had expired), under the dialect's blob lock held shared; after every upload is confirmed it
   sets `stored`;
2. a snapshot may add a content only if its mark is `stored` and younger than the grace period
   (checked in the snapshot's transaction, the blob lock shared);
3. the sweep (blob lock exclusive) deletes only objects that nothing references AND whose mark
   is older than the grace period, deleting the objects before its transaction commits.

So an object a committed snapshot names is never deleted (referenced), an object a snapshot
is about to name is never deleted (its mark is fresh), and a sweep that died between deleting
objects and committing leaves expired marks, which no snapshot accepts (rule 2): the saver
uploads again. Uploads from a worker that lost its lease, or that was killed mid-upload, are
never referenced (the snapshot row is written in the fenced transaction) and are swept once
their mark expires.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xclaw.errors import MissingBlobs, StoreError
from xclaw.store.blob_store import StoreAccess
from xclaw.store.dialect import Dialect
from xclaw.store.s3 import Bucket, Location
from xclaw.store.snapshot_model import content_hash

DEFAULT_GRACE_S = 3600.0

_MARK = (
    "INSERT INTO object_blobs (hash, size, marked_at, stored) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (hash) DO UPDATE SET marked_at = excluded.marked_at, "
    "stored = CASE WHEN object_blobs.marked_at >= ? THEN object_blobs.stored "
    "ELSE excluded.stored END"
)


class ObjectBlobs:
    """The BlobStore of an object store: bytes in the bucket, marks in the database."""

    in_database = False

    def __init__(
        self,
        dialect: Dialect,
        access: StoreAccess,
        bucket: Bucket,
        *,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        self._d = dialect
        self._access = access
        self.bucket = bucket
        self.grace_ms = int(grace_s * 1000)

    @property
    def description(self) -> str:
        return f"the object store {self.bucket.location}"

    def _fresh_rows(self, conn: Any, hashes: Sequence[str], cutoff: int) -> set[str]:
        d = self._d
        found: set[str] = set()
        for cond, params in d.any_of("hash", list(hashes)):
            sql = d.sql(f"SELECT hash FROM object_blobs WHERE {cond} AND stored=1 AND marked_at>=?")
            found.update(r[0] for r in conn.execute(sql, (*params, cutoff)))
        return found

    # --- reads --------------------------------------------------------------------------------
    def missing(self, hashes: Sequence[str]) -> set[str]:
        """Hashes without a stored mark with at least half the grace period left: the save
        that follows must find them fresh (rule 2), so an older mark is renewed by putting."""
        cutoff = self._access.now() - self.grace_ms // 2
        fresh = self._access.read(lambda conn: self._fresh_rows(conn, hashes, cutoff))
        return set(hashes) - fresh

    def get(self, hashes: Sequence[str]) -> dict[str, bytes]:
        got = self.bucket.get_many(hashes)
        absent = {h for h, data in got.items() if data is None}
        if absent:
            raise MissingBlobs(absent)
        found: dict[str, bytes] = {}
        for h, data in got.items():
            assert data is not None
            if content_hash(data) != h:
                raise StoreError(
                    f"the object store {self.bucket.location} returned other bytes for "
                    f"{h[:12]}... than were stored (damaged object)"
                )
            found[h] = data
        return found

    # --- writes -------------------------------------------------------------------------------
    def _mark_tx(self, rows: list[tuple[str, int]], stored: int) -> Callable[[Any], None]:
        d = self._d

        def tx(conn: Any) -> None:
            d.lock_blobs(conn, False)
            now = self._access.now()
            cutoff = now - self.grace_ms
            d.executemany(conn, d.sql(_MARK), [(h, size, now, stored, cutoff) for h, size in rows])

        return tx

    def put(self, blobs: Mapping[str, bytes]) -> int:
        """Mark, upload (in parallel, conditionally), then set `stored` (rule 1)."""
        checked = _checked(blobs)
        if not checked:
            return 0
        rows = [(h, len(b)) for h, b in checked.items()]
        self._access.write(self._mark_tx(rows, 0), durable=False)
        sent = self.bucket.put_many(checked)
        d = self._d
        hashes = list(checked)

        def confirm(conn: Any) -> None:
            for cond, params in d.any_of("hash", hashes):
                conn.execute(d.sql(f"UPDATE object_blobs SET stored=1 WHERE {cond}"), params)

        self._access.write(confirm, durable=False)
        return sent

    def put_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]:
        """A tool step's images, uploaded inside the step's own transaction (the blob lock
        held shared meanwhile, so no sweep can pass between the upload and the commit)."""
        checked = _checked(blobs)
        rows = [(h, len(b)) for h, b in checked.items()]
        mark = self._mark_tx(rows, 1)

        def tx(conn: Any) -> int:
            if not checked:
                return 0
            sent = self.bucket.put_many(checked)
            mark(conn)
            return sent

        return tx

    def stored_tx(self, d: Dialect, conn: Any, hashes: list[str]) -> set[str]:
        """Rule 2: stored and younger than the grace period."""
        return self._fresh_rows(conn, hashes, self._access.now() - self.grace_ms)

    def gc(self) -> int:
        """Rule 3: delete the objects of expired, unreferenced marks, then the marks."""
        d = self._d

        def tx(conn: Any) -> int:
            d.lock_blobs(conn, True)
            marked = d.referenced_hashes.format(snapshots="", restores="", steps="")
            cutoff = self._access.now() - self.grace_ms
            dead = [
                r[0]
                for r in conn.execute(
                    d.sql(
                        f"SELECT hash FROM object_blobs WHERE marked_at < ? "
                        f"AND hash NOT IN ({marked})"
                    ),
                    (cutoff,),
                )
            ]
            if not dead:
                return 0
            self.bucket.delete_many(dead)  # before the commit: see rule 3
            for cond, params in d.any_of("hash", dead):
                conn.execute(d.sql(f"DELETE FROM object_blobs WHERE {cond}"), params)
            return len(dead)

        return self._access.write(tx, durable=False)

    def close(self) -> None:
        self.bucket.close()


def _checked(blobs: Mapping[str, bytes]) -> dict[str, bytes]:
    for h, data in blobs.items():
        if content_hash(data) != h:
            raise ValueError(f"blob {h[:12]}... does not match its content")
    return dict(blobs)


def open_object_blobs(
    url: str, dialect: Dialect, access: StoreAccess, *, grace_s: float = DEFAULT_GRACE_S
) -> ObjectBlobs:
    """The object store named by `url` (s3://BUCKET/PREFIX), for a store's contents."""
    return ObjectBlobs(dialect, access, Bucket(Location.parse(url)), grace_s=grace_s)
