"""[store/snapshots] Workspace snapshots, one text for both backends: content-addressed blobs,
snapshot rows, the restore journal, and the transaction bodies rollback, fork and delete use. Each
public method of `SnapshotMethods` is one transaction; its SQL runs through the store's dialect
(dialect.py), so the snapshot rules sit in one file:

- a snapshot row is stored whole, or as a delta against the session's previous snapshot (a
  changed file costs one entry, not the whole manifest); a whole one at least every
  FULL_EVERY snapshots keeps reconstruction short;
- rollback deletes the snapshots of the deleted steps, fork copies those up to the fork point;
  both may journal a restore (workspace_restores) in the same transaction;
- blobs referenced by no snapshot, no pending restore and no tool step's images are swept
  (rollback, delete_session, gc_blobs). Saving a snapshot checks that every content it adds
  is stored, so a sweep that lands between storing blobs and saving the snapshot is caught
  (MissingBlobs), never a dangling reference.

What PostgreSQL adds is concurrency: several workers save snapshots while another sweeps.
Savers hold the dialect's blob lock shared, sweepers exclusive (an advisory lock there; on
SQLite the single writer is the lock), so a sweep never runs between a save's "every content
is stored" check and its commit, and its DELETE sees every snapshot committed before it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from xclaw.errors import MissingBlobs, StoreError
from xclaw.store.blobs.store import BlobStore, DatabaseBlobs, sweep_blobs_tx
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.role import Role
from xclaw.store.snapshots.memo import PREVIOUS_SQL, Saved, SavedStates
from xclaw.store.snapshots.model import (
    Manifest,
    PendingRestore,
    SnapshotInfo,
    WorkspaceRestore,
    apply_delta,
    check_entry,
    check_path,
    diff_manifests,
    manifest_stats,
)
from xclaw.store.steps.model import display_id
from xclaw.store.steps.rows import load_json
from xclaw.store.steps.writes import Kind

T = TypeVar("T")

# --- workspace snapshots: the rules, whatever the SQL ------------------------------------------

# At most this many deltas in a row: reconstructing a snapshot reads at most FULL_EVERY rows.
FULL_EVERY = 64

SNAPSHOT_COLS = "session_id, seq, files, bytes, new_bytes, skipped, created_at, base_seq IS NULL"
RESTORE_COLS = (
    "session_id, restore_id, kind, source_session_id, snapshot_seq, manifest, ignore, created_at"
)


def row_to_snapshot_info(r: tuple[Any, ...]) -> SnapshotInfo:
    return SnapshotInfo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]))


def row_to_restore(r: tuple[Any, ...]) -> PendingRestore:
    return PendingRestore(
        r[0], r[1], r[2], r[3], r[4], load_json(r[5]), tuple(load_json(r[6]) or ()), r[7]
    )


def rebuild_state(
    fetch: Callable[[int], tuple[Any, ...] | None], session_id: str, seq: int
) -> Manifest:
    """The whole manifest of snapshot (session_id, seq), following its delta chain;
    `fetch(at)` gives the (base_seq, manifest, removed) row of snapshot `at`, None if absent."""
    chain: list[tuple[Any, ...]] = []
    at: int | None = seq
    while at is not None:
        row = fetch(at)
        if row is None:
            raise StoreError(
                f"snapshot {display_id(at)} of session {session_id} is missing (needed to "
                f"rebuild the snapshot before {display_id(seq)}); the database is damaged"
            )
        chain.append(row)
        at = row[0]
    state: Manifest = load_json(chain[-1][1])
    for _, changed, removed in reversed(chain[:-1]):
        state = apply_delta(state, load_json(changed), load_json(removed) or ())
    return state


def snapshot_delta(base: Manifest, state: Manifest) -> tuple[Manifest, list[str], list[str]]:
    """(changed, removed, added hashes) of a new snapshot against its base, every entry
    checked. The base's contents are held by the base's rows; only `added` need checking."""
    changed, removed = diff_manifests(base, state)
    for path, entry in changed.items():
        check_entry(path, entry)
    for path in removed:
        check_path(path)
    added = sorted({e["hash"] for e in changed.values() if "hash" in e})
    return changed, removed, added


def check_blobs_stored(added: list[str], have: set[str]) -> None:
    """Every content the snapshot adds must be stored already (put_blobs): else MissingBlobs."""
    if len(have) < len(added):
        raise MissingBlobs(set(added) - have)


def store_whole(
    prev: tuple[Any, ...] | None, state: Manifest, changed: Manifest, removed: list[str]
) -> bool:
    """Whether the snapshot is stored whole rather than as a delta on `prev` (seq, depth):
    the first one, every FULL_EVERY-th, or when half the files changed."""
    return (
        prev is None
        or prev[1] + 1 >= FULL_EVERY
        or len(changed) + len(removed) >= max(len(state) // 2, 1)
    )


_SNAPSHOT_COPY_COLS = (
    "seq, base_seq, manifest, removed, depth, files, bytes, new_bytes, skipped, created_at"
)
_HAS_SNAPSHOT_SQL = "SELECT 1 FROM snapshots WHERE session_id=? AND seq=?"
# A newer restore replaces one never completed: the newest target is the one that counts.
_JOURNAL_SQL = (
    f"INSERT INTO workspace_restores ({RESTORE_COLS}) "
    "VALUES (?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?) ON CONFLICT (session_id) DO "
    "UPDATE SET restore_id=excluded.restore_id, kind=excluded.kind, "
    "source_session_id=excluded.source_session_id, snapshot_seq=excluded.snapshot_seq, "
    "manifest=excluded.manifest, ignore=excluded.ignore, created_at=excluded.created_at"
)


# --- transaction bodies -----------------------------------------------------------------------


def state_tx(d: Dialect, conn: Any, session_id: str, seq: int) -> Manifest:
    """The whole manifest of snapshot (session_id, seq), following its delta chain."""
    sql = d.sql("SELECT base_seq, manifest, removed FROM snapshots WHERE session_id=? AND seq=?")
    return rebuild_state(lambda at: conn.execute(sql, (session_id, at)).fetchone(), session_id, seq)


def first_snapshot_from_tx(d: Dialect, conn: Any, session_id: str, seq: int) -> int | None:
    row = conn.execute(
        d.sql("SELECT min(seq) FROM snapshots WHERE session_id=? AND seq>=?"), (session_id, seq)
    ).fetchone()
    return None if row is None else row[0]


def _journal_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    kind: str,
    source: str | None,
    snapshot_seq: int | None,
    manifest: Manifest | None,
    request: WorkspaceRestore,
    now: int,
) -> PendingRestore:
    restore_id = secrets.token_hex(8)
    ignore = tuple(request.ignore)
    conn.execute(
        d.sql(_JOURNAL_SQL),
        (
            session_id,
            restore_id,
            kind,
            source,
            snapshot_seq,
            d.json(manifest, "manifest"),
            d.json(list(ignore), "ignore"),
            now,
        ),
    )
    return PendingRestore(session_id, restore_id, kind, source, snapshot_seq, manifest, ignore, now)


def rollback_snapshots_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    seq: int,
    request: WorkspaceRestore | None,
    now: int,
) -> PendingRestore | None:
    """Inside the rollback transaction: journal the state before step `seq` (the first
    snapshot at or after it: nothing between changed files otherwise; none means the
    workspace is already right), drop the snapshots of the deleted steps, sweep blobs."""
    restore = None
    if request is not None:
        target = first_snapshot_from_tx(d, conn, session_id, seq)
        if target is not None:
            state = state_tx(d, conn, session_id, target)
            restore = _journal_tx(
                d, conn, session_id, "rollback", None, target, state, request, now
            )
    keep = -1  # no snapshot has this seq
    if restore is not None and request is not None and request.keep_state:
        keep = restore.snapshot_seq if restore.snapshot_seq is not None else -1
    dropped = conn.execute(
        d.sql("DELETE FROM snapshots WHERE session_id=? AND seq>=? AND seq<>?"),
        (session_id, seq, keep),
    ).rowcount
    if dropped:
        sweep_blobs_tx(d, conn)
    return restore


def fork_snapshots_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    seq: int,
    new_sid: str,
    request: WorkspaceRestore | None,
    now: int,
) -> PendingRestore | None:
    """Inside the fork transaction: copy the snapshots up to the fork point (their delta
    chains only reach back, so the prefix is complete) and journal the new workspace: the
    state just after step `seq` = the first snapshot after it, or the source's current files."""
    conn.execute(
        d.sql(
            f"INSERT INTO snapshots (session_id, {_SNAPSHOT_COPY_COLS}) "
            f"SELECT ?, {_SNAPSHOT_COPY_COLS} FROM snapshots WHERE session_id=? AND seq<=?"
        ),
        (new_sid, session_id, seq),
    )
    if request is None:
        return None
    target = first_snapshot_from_tx(d, conn, session_id, seq + 1)
    state = None if target is None else state_tx(d, conn, session_id, target)
    if target is not None and request.keep_state:
        # The state just after the fork point, as the new session's state before its next
        # step (seq + 1): its base is at or before the fork point, copied above.
        conn.execute(
            d.sql(
                "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, "
                "files, bytes, new_bytes, skipped, created_at) SELECT ?, ?, base_seq, manifest, "
                "removed, depth, files, bytes, new_bytes, skipped, created_at FROM snapshots "
                "WHERE session_id=? AND seq=?"
            ),
            (new_sid, seq + 1, session_id, target),
        )
    return _journal_tx(d, conn, new_sid, "fork", session_id, target, state, request, now)


# --- the store methods ------------------------------------------------------------------------


class _Access:
    """The store's transactions and clock as a blob store sees them (blob_store.StoreAccess)."""

    def __init__(self, store: SnapshotMethods) -> None:
        self._store = store

    def read(self, fn: Callable[[Any], T]) -> T:
        return self._store._read(fn, snapshot=self._store._dialect.free_read_snapshots)

    def write(self, fn: Callable[[Any], T], kind: Kind) -> T:
        return self._store._write(fn, kind)

    def now(self) -> int:
        return self._store._now()


class SnapshotMethods(Role):
    """`store.snapshots` (base.SnapshotStore), for both backends: a role over the connection
    layer's `_dialect`, `_write`, `_read` and `_now` (store/role.py)."""

    # --- blobs: through the blob store (store/blobs/store.py) ------------------------------
    _blob_store: BlobStore | None = None

    @property
    def blobs(self) -> BlobStore:
        """Where file contents live: the database unless `use_blob_store` said otherwise."""
        if self._blob_store is None:
            self._blob_store = DatabaseBlobs(self._dialect, _Access(self))
        return self._blob_store

    def use_blob_store(self, url: str | None, *, grace_s: float | None = None) -> None:
        """Keep file contents in the object store at `url` (s3://BUCKET/PREFIX; None: the
        database). Called once, right after opening."""
        if not url:
            return
        from xclaw.store.blobs.objects import DEFAULT_GRACE_S, open_object_blobs

        self._blob_store = open_object_blobs(
            url,
            self._dialect,
            _Access(self),
            grace_s=DEFAULT_GRACE_S if grace_s is None else grace_s,
        )

    def close_blobs(self) -> None:
        if self._blob_store is not None:
            self._blob_store.close()

    def missing_blobs(self, hashes: Iterable[str]) -> set[str]:
        wanted = sorted(set(hashes))
        return self.blobs.missing(wanted) if wanted else set()

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        """Store contents not stored yet; returns the bytes this added. Hashing and
        compression happen here, in the caller's thread, not in the writer."""
        return self.blobs.put(blobs) if blobs else 0

    def _put_blobs_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]:
        """The storing of `blobs` inside a step's transaction (its images)."""
        return self.blobs.put_tx(blobs)

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        """Contents by hash; a hash the store does not hold raises MissingBlobs."""
        return self.blobs.get(sorted(set(hashes)))

    def gc_blobs(self) -> int:
        """Delete the blobs no snapshot, no pending restore and no tool step's image refers to."""
        return self.blobs.gc()

    # --- snapshots --------------------------------------------------------------------------
    __saved_states: SavedStates | None = None

    @property
    def _saved_states(self) -> SavedStates:
        """The snapshots this store saved last (store/snapshots/memo.py)."""
        if self.__saved_states is None:
            self.__saved_states = SavedStates()
        return self.__saved_states

    def save_snapshot(
        self,
        session_id: str,
        seq: int,
        manifest: Mapping[str, Any],
        *,
        new_bytes: int = 0,
        lease: Lease | None = None,
        replace: bool = False,
    ) -> SnapshotInfo:
        """Record the workspace as it is before step `seq` (one per step). Every content
        the snapshot adds must be stored already (put_blobs): else MissingBlobs. With a
        lease, the snapshot is fenced like a step: a worker that lost it gets LeaseLost and
        nothing it uploaded is referenced. `replace`: a snapshot already saved before `seq`
        (the state recorded after the previous step, docs/workspace.md "The workspace follows
        the session") gives way to this one, if it is the session's latest."""
        d = self._dialect
        blobs = self.blobs
        state = dict(manifest)
        files, size, skipped = manifest_stats(state)

        def duplicate() -> StoreError:
            return StoreError(
                f"session {session_id} already has a snapshot before {display_id(seq)}"
            )

        def tx(conn: Any) -> SnapshotInfo:
            # The session row before the blobs lock: the order rollback and delete take too.
            if lease is None:
                d.share_session(conn, session_id)
            else:
                d.lock_session(conn, session_id, lease)  # the fence (LeaseLost)
            if conn.execute(d.sql(_HAS_SNAPSHOT_SQL), (session_id, seq)).fetchone():
                later = conn.execute(
                    d.sql("SELECT 1 FROM snapshots WHERE session_id=? AND seq>? LIMIT 1"),
                    (session_id, seq),
                ).fetchone()
                if not replace or later:
                    raise duplicate()
                conn.execute(
                    d.sql("DELETE FROM snapshots WHERE session_id=? AND seq=?"), (session_id, seq)
                )
            d.lock_blobs(conn, False)
            prev = conn.execute(d.sql(PREVIOUS_SQL), (session_id, seq)).fetchone()
            base = self._saved_states.state_of(session_id, prev)
            if base is None:
                base = {} if prev is None else state_tx(d, conn, session_id, prev[0])
            changed, removed, added = snapshot_delta(base, state)
            check_blobs_stored(added, blobs.stored_tx(d, conn, added))
            whole = store_whole(prev, state, changed, removed)
            now = self._now()
            try:
                # A save of the same step racing this one (PostgreSQL) fails here, in words.
                with d.savepoint(conn):
                    conn.execute(
                        d.sql(
                            "INSERT INTO snapshots (session_id, seq, base_seq, manifest, "
                            "removed, depth, files, bytes, new_bytes, skipped, created_at) "
                            "VALUES (?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?)"
                        ),
                        (
                            session_id,
                            seq,
                            None if whole else prev[0],
                            d.json(state if whole else changed, "manifest"),
                            None if whole else d.json(removed, "removed"),
                            0 if whole else prev[1] + 1,
                            files,
                            size,
                            new_bytes,
                            skipped,
                            now,
                        ),
                    )
            except d.unique_violation:
                raise duplicate() from None
            written.append(Saved(seq, None if whole else prev[0], now, changed, removed, state))
            return SnapshotInfo(session_id, seq, files, size, new_bytes, skipped, now, whole)

        # Durable like the write-ahead row it belongs to: the tool runs right after this, so
        # the state to roll back to must survive whatever the tool's writes survive.
        written: list[Saved] = []
        info = self._write(tx, Kind.SNAPSHOT_SAVED)
        self._saved_states.remember(session_id, written[-1])  # committed: the next save's base
        return info

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        d = self._dialect

        def q(conn: Any) -> list[SnapshotInfo]:
            d.require_session(conn, session_id)
            rows = conn.execute(
                d.sql(f"SELECT {SNAPSHOT_COLS} FROM snapshots WHERE session_id=? ORDER BY seq"),
                (session_id,),
            ).fetchall()
            return [row_to_snapshot_info(r) for r in rows]

        return self._read(q, snapshot=d.free_read_snapshots)

    def get_snapshot(self, session_id: str, seq: int) -> Manifest | None:
        """The whole manifest of the snapshot before step `seq`, None if there is none."""
        d = self._dialect

        def q(conn: Any) -> Manifest | None:
            d.require_session(conn, session_id)
            if not conn.execute(d.sql(_HAS_SNAPSHOT_SQL), (session_id, seq)).fetchone():
                return None
            return state_tx(d, conn, session_id, seq)

        return self._read(q, snapshot=True)

    def snapshot_from(self, session_id: str, seq: int) -> tuple[int, Manifest] | None:
        """The first snapshot at or after step `seq` with its manifest: the workspace as it
        was just before `seq` (steps without a snapshot changed no files)."""
        d = self._dialect

        def q(conn: Any) -> tuple[int, Manifest] | None:
            d.require_session(conn, session_id)
            found = first_snapshot_from_tx(d, conn, session_id, seq)
            return None if found is None else (found, state_tx(d, conn, session_id, found))

        return self._read(q, snapshot=True)

    # --- the restore journal ----------------------------------------------------------------
    def pending_restores(self, session_id: str | None = None) -> list[PendingRestore]:
        sql = f"SELECT {RESTORE_COLS} FROM workspace_restores"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id=?"
            params = (session_id,)
        sql = self._dialect.sql(sql + " ORDER BY created_at")
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return [row_to_restore(r) for r in rows]

    def finish_restore(self, session_id: str, restore_id: str) -> bool:
        """The files are in place: drop the journal row (only that restore's, not a newer
        one). Its blobs are not swept here: the workspace holds those contents now, and its
        next snapshot would store them again; the next sweep collects what stays unused."""
        sql = self._dialect.sql(
            "DELETE FROM workspace_restores WHERE session_id=? AND restore_id=?"
        )

        def tx(conn: Any) -> bool:
            return bool(conn.execute(sql, (session_id, restore_id)).rowcount)

        return self._write(tx, Kind.RESTORE_DONE)
