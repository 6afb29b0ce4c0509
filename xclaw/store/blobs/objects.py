"""[store/blobs] File contents in an S3-compatible object store; the database keeps where and marks
only.

`blob_store: s3://BUCKET/PREFIX` (docs/storage.md, "Contents in an object store"). Contents
are uploaded in *packs*: one object of up to PACK_BYTES holding several contents end to end,
named by the sha256 of its bytes and written once (If-None-Match). A row of `object_blobs`
(hash, pack, pos, size, marked_at) says where a content is; no bytes. Packs make a takeover a
few large GETs instead of one per file (ranged where only part of a pack is wanted), and an
edit of one small file a pack of that file alone.

The rule that makes the sweep safe against a snapshot being saved at the same moment:

1. a saver uploads its pack first, then writes its rows (`marked_at` = now) in one
   transaction holding the dialect's blob lock shared, and only if the upload began less
   than half the grace period ago; until then nothing in the database names the pack;
2. a snapshot may add a content only if its row was marked within the grace period (checked
   in the snapshot's transaction, the blob lock shared);
3. the sweep (blob lock exclusive) deletes the rows older than the grace period that nothing
   references, then the packs no row names any more, and packs no row has ever named (an
   upload whose rows never came: a killed worker) once they are older than the grace period,
   deleting the objects before its transaction commits.

So a pack a committed snapshot depends on is never deleted (its rows are referenced), one a
snapshot is about to depend on is not either (fresh rows, or too young to be an orphan), and a
sweep that died between deleting objects and committing leaves expired rows, which rule 2
refuses: the saver uploads them again in a new pack. Uploads from a worker that lost its
lease, or that was killed mid-upload, are never referenced (the snapshot row is written in the
fenced transaction) and are swept once their rows or their pack expire.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xclaw.errors import BlobStoreLost, MissingBlobs, StoreError
from xclaw.store.blobs.s3 import Bucket, Location
from xclaw.store.blobs.store import StoreAccess
from xclaw.store.dialect import Dialect
from xclaw.store.snapshots.model import content_hash
from xclaw.store.steps.writes import Kind

DEFAULT_GRACE_S = 3600.0
# A pack holds contents up to this size (a larger content is a pack of its own): large enough
# that a takeover is a few dozen GETs, small enough that the packs of one batch upload in
# parallel.
PACK_BYTES = 8 * 1024 * 1024
# Ranges of one pack closer than this are read in one GET.
_RANGE_GAP = 1024 * 1024

_MARK = (
    "INSERT INTO object_blobs (hash, pack, pos, size, marked_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (hash) DO UPDATE SET pack = excluded.pack, pos = excluded.pos, "
    "size = excluded.size, marked_at = excluded.marked_at"
)

Pack = tuple[str, bytes, list[tuple[str, int, int]]]  # name, bytes, (hash, pos, size)


def make_packs(blobs: Mapping[str, bytes]) -> list[Pack]:
    """The contents laid end to end in packs of up to PACK_BYTES, in hash order (the same
    contents make the same packs, so a repeated upload meets a 412)."""
    packs: list[Pack] = []
    parts: list[bytes] = []
    rows: list[tuple[str, int, int]] = []
    size = 0

    def close() -> None:
        data = b"".join(parts)
        packs.append((hashlib.sha256(data).hexdigest(), data, list(rows)))

    for h in sorted(blobs):
        data = blobs[h]
        if rows and size + len(data) > PACK_BYTES:
            close()
            parts, rows, size = [], [], 0
        rows.append((h, size, len(data)))
        parts.append(data)
        size += len(data)
    if rows:
        close()
    return packs


class ObjectBlobs:
    """The BlobStore of an object store: packs in the bucket, where and marks in the database."""

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

    def _rows(self, conn: Any, hashes: Sequence[str], cols: str, cutoff: int) -> list[Any]:
        d = self._d
        found: list[Any] = []
        for cond, params in d.any_of("hash", list(hashes)):
            sql = d.sql(f"SELECT {cols} FROM object_blobs WHERE {cond} AND marked_at>=?")
            found.extend(conn.execute(sql, (*params, cutoff)))
        return found

    # --- reads --------------------------------------------------------------------------------
    def missing(self, hashes: Sequence[str]) -> set[str]:
        """Hashes without a mark with at least half the grace period left: the save that
        follows must find them fresh (rule 2), so an older mark is renewed by putting."""
        cutoff = self._access.now() - self.grace_ms // 2
        rows = self._access.read(lambda conn: self._rows(conn, hashes, "hash", cutoff))
        return set(hashes) - {r[0] for r in rows}

    def get(self, hashes: Sequence[str]) -> dict[str, bytes]:
        """Contents by hash: their packs' ranges fetched in parallel, each content checked."""
        rows = self._access.read(lambda conn: self._rows(conn, hashes, "hash, pack, pos, size", 0))
        absent = set(hashes) - {r[0] for r in rows}
        by_pack: dict[str, list[tuple[str, int, int]]] = {}
        for h, pack, pos, size in rows:
            by_pack.setdefault(pack, []).append((h, int(pos), int(size)))
        ranges: list[tuple[str, int, int]] = []
        members: dict[tuple[str, int], list[tuple[str, int, int]]] = {}
        for pack, items in by_pack.items():
            items.sort(key=lambda x: x[1])
            first, last = items[0][1], -1
            group: list[tuple[str, int, int]] = []
            for h, pos, size in items:
                if group and pos - last > _RANGE_GAP:
                    ranges.append((pack, first, last))
                    members[(pack, first)] = group
                    first, group = pos, []
                group.append((h, pos, size))
                last = max(last, pos + size - 1)
            ranges.append((pack, first, last))
            members[(pack, first)] = group
        found: dict[str, bytes] = {}
        lost: set[str] = set()  # marked here, but their pack is gone from the bucket
        for pack, first, data in self.bucket.get_ranges(
            [(p, a, b) for p, a, b in ranges if b >= a]
        ):
            for h, pos, size in members[(pack, first)]:
                if data is None:
                    lost.add(h)
                    continue
                content = data[pos - first : pos - first + size]
                if content_hash(content) != h:
                    raise StoreError(
                        f"the object store {self.bucket.location} returned other bytes for "
                        f"{h[:12]}... than were stored (damaged pack {pack[:12]}...)"
                    )
                found[h] = content
        for pack, first, last in ranges:
            if last < first:  # empty contents only: nothing to fetch
                for h, _, _ in members[(pack, first)]:
                    found[h] = b""
        if lost:
            raise BlobStoreLost(lost | absent, self.description)
        if absent:
            raise MissingBlobs(absent)
        return found

    # --- writes -------------------------------------------------------------------------------
    def _mark_tx(self, packs: list[Pack], started: float | None) -> Callable[[Any], None]:
        d = self._d

        def tx(conn: Any) -> None:
            d.lock_blobs(conn, False)
            if started is not None and time.monotonic() - started > self.grace_ms / 2000:
                # Rule 1: a sweep may have taken this pack for an orphan meanwhile.
                raise StoreError(
                    f"uploading to {self.description} took longer than half of blob_grace_s; "
                    "the upload is not used (raise blob_grace_s for stores this slow)"
                )
            now = self._access.now()
            rows = [(h, name, pos, size, now) for name, _, items in packs for h, pos, size in items]
            d.executemany(conn, d.sql(_MARK), rows)

        return tx

    def put(self, blobs: Mapping[str, bytes]) -> int:
        """Upload the packs (in parallel, conditionally), then mark their contents (rule 1)."""
        packs = make_packs(_checked(blobs))
        if not packs:
            return 0
        started = time.monotonic()
        sent = self.bucket.put_many({name: data for name, data, _ in packs})
        self._access.write(self._mark_tx(packs, started), Kind.BLOBS_PUT)
        return sent

    def put_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]:
        """A tool step's images, uploaded inside the step's own transaction (the blob lock
        held shared meanwhile, so no sweep can pass between the upload and the commit)."""
        packs = make_packs(_checked(blobs))
        mark = self._mark_tx(packs, None)

        def tx(conn: Any) -> int:
            if not packs:
                return 0
            self._d.lock_blobs(conn, False)
            sent = self.bucket.put_many({name: data for name, data, _ in packs})
            mark(conn)
            return sent

        return tx

    def stored_tx(self, d: Dialect, conn: Any, hashes: list[str]) -> set[str]:
        """Rule 2: marked within the grace period."""
        return {r[0] for r in self._rows(conn, hashes, "hash", self._access.now() - self.grace_ms)}

    def gc(self) -> int:
        """Rule 3: the expired unreferenced rows, the packs nobody names, expired orphans."""
        d = self._d

        def tx(conn: Any) -> int:
            d.lock_blobs(conn, True)
            marked = d.referenced_hashes.format(snapshots="", restores="", steps="")
            now = self._access.now()
            cutoff = now - self.grace_ms
            dead = conn.execute(
                d.sql(
                    f"SELECT hash, pack FROM object_blobs WHERE marked_at < ? "
                    f"AND hash NOT IN ({marked})"
                ),
                (cutoff,),
            ).fetchall()
            for cond, params in d.any_of("hash", [h for h, _ in dead]):
                conn.execute(d.sql(f"DELETE FROM object_blobs WHERE {cond}"), params)
            named = {r[0] for r in conn.execute(d.sql("SELECT DISTINCT pack FROM object_blobs"))}
            doomed = {p for _, p in dead} - named
            # An object's time is the store's, in whole seconds: one more second of margin.
            doomed |= {
                name
                for name, modified in self.bucket.listing()
                if name not in named and modified * 1000 < cutoff - 1000
            }
            if doomed:
                self.bucket.delete_many(sorted(doomed))  # before the commit: see rule 3
            return len(dead)

        return self._access.write(tx, Kind.BLOBS_SWEPT)

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
