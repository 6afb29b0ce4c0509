"""Workspace snapshots in SQLite: content-addressed blobs, snapshot rows, the restore journal.

Mixed into SQLiteStore (which provides `_write`, `_read` and `_now`); each public method is one
transaction. The transaction bodies used by rollback, fork and delete_session live here too, so
the snapshot rules sit in one file:

- a snapshot row is stored whole, or as a delta against the session's previous snapshot (a
  changed file costs one entry, not the whole manifest); a whole one at least every
  FULL_EVERY snapshots keeps reconstruction short;
- rollback deletes the snapshots of the deleted steps, fork copies those up to the fork point;
  both may journal a restore (workspace_restores) in the same transaction;
- blobs referenced by no snapshot and no pending restore are swept (rollback, delete_session,
  gc_blobs). Saving a snapshot checks that every content it adds is stored, so a sweep that
  lands between storing blobs and saving the snapshot is caught (MissingBlobs), never a
  dangling reference.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import MissingBlobs, StoreError
from xclaw.store.common import (
    RESTORE_COLS,
    SNAPSHOT_COLS,
    check_blobs_stored,
    rebuild_state,
    row_to_restore,
    row_to_snapshot_info,
    snapshot_delta,
    store_whole,
)
from xclaw.store.model import display_id
from xclaw.store.rows import dump_json, require_session
from xclaw.store.snapshot_model import (
    Manifest,
    PendingRestore,
    SnapshotInfo,
    WorkspaceRestore,
    content_hash,
    decode_blob,
    encode_blob,
    manifest_stats,
)

T = TypeVar("T")

_IN_CHUNK = 500  # bound parameters per IN (...) list


# Mark and sweep in one statement: every hash named by a snapshot row (whole or delta: each
# content of a reconstructed state was added by some row of its chain) or by a pending restore.
_SWEEP_SQL = """
DELETE FROM blobs WHERE hash NOT IN (
    SELECT json_extract(j.value, '$.hash') FROM snapshots AS s, json_each(s.manifest) AS j
     WHERE json_extract(j.value, '$.hash') IS NOT NULL
    UNION
    SELECT json_extract(j.value, '$.hash') FROM workspace_restores AS r, json_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND json_extract(j.value, '$.hash') IS NOT NULL
    UNION
    -- images a tool returned (view_file): the step keeps their hashes (docs/storage.md)
    SELECT json_extract(j.value, '$.hash') FROM traces AS t, json_each(t.output_data, '$.images') AS j
     WHERE t.step_type = 'tool_call' AND t.output_data LIKE '{%"images"%'
       AND json_extract(j.value, '$.hash') IS NOT NULL
)
"""


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


# --- transaction bodies -----------------------------------------------------------------------


def state_tx(conn: sqlite3.Connection, session_id: str, seq: int) -> Manifest:
    """The whole manifest of snapshot (session_id, seq), following its delta chain."""
    return rebuild_state(
        lambda at: conn.execute(
            "SELECT base_seq, manifest, removed FROM snapshots WHERE session_id=? AND seq=?",
            (session_id, at),
        ).fetchone(),
        session_id,
        seq,
    )


def first_snapshot_from_tx(conn: sqlite3.Connection, session_id: str, seq: int) -> int | None:
    row = conn.execute(
        "SELECT min(seq) FROM snapshots WHERE session_id=? AND seq>=?", (session_id, seq)
    ).fetchone()
    first: int | None = row[0]
    return first


def sweep_blobs_tx(conn: sqlite3.Connection) -> int:
    """Delete every blob no snapshot, no pending restore and no tool step's image refers
    to; returns how many."""
    return conn.execute(_SWEEP_SQL).rowcount


def _journal_tx(
    conn: sqlite3.Connection,
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
    # A newer restore replaces one never completed: the newest target is the one that counts.
    conn.execute(
        f"INSERT OR REPLACE INTO workspace_restores ({RESTORE_COLS}) VALUES (?,?,?,?,?,?,?,?)",
        (
            session_id,
            restore_id,
            kind,
            source,
            snapshot_seq,
            dump_json(manifest, "manifest"),
            dump_json(list(ignore), "ignore"),
            now,
        ),
    )
    return PendingRestore(session_id, restore_id, kind, source, snapshot_seq, manifest, ignore, now)


def rollback_snapshots_tx(
    conn: sqlite3.Connection,
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
        target = first_snapshot_from_tx(conn, session_id, seq)
        if target is not None:
            state = state_tx(conn, session_id, target)
            restore = _journal_tx(conn, session_id, "rollback", None, target, state, request, now)
    dropped = conn.execute(
        "DELETE FROM snapshots WHERE session_id=? AND seq>=?", (session_id, seq)
    ).rowcount
    if dropped:
        sweep_blobs_tx(conn)
    return restore


def fork_snapshots_tx(
    conn: sqlite3.Connection,
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
        "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, files, "
        "bytes, new_bytes, skipped, created_at) SELECT ?, seq, base_seq, manifest, removed, "
        "depth, files, bytes, new_bytes, skipped, created_at FROM snapshots "
        "WHERE session_id=? AND seq<=?",
        (new_sid, session_id, seq),
    )
    if request is None:
        return None
    target = first_snapshot_from_tx(conn, session_id, seq + 1)
    state = None if target is None else state_tx(conn, session_id, target)
    return _journal_tx(conn, new_sid, "fork", session_id, target, state, request, now)


# --- the store methods ------------------------------------------------------------------------


class SnapshotStoreMixin:
    """The snapshot half of the Store protocol for SQLiteStore."""

    if TYPE_CHECKING:  # provided by the store this is mixed into

        def _write(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool) -> T: ...
        def _read(self, fn: Callable[[sqlite3.Connection], T], *, snapshot: bool = False) -> T: ...

    _now: Callable[[], int]

    # --- blobs ------------------------------------------------------------------------------
    def missing_blobs(self, hashes: Iterable[str]) -> set[str]:
        wanted = sorted(set(hashes))

        def q(conn: sqlite3.Connection) -> set[str]:
            have: set[str] = set()
            for part in _chunks(wanted):
                rows = conn.execute(
                    f"SELECT hash FROM blobs WHERE hash IN ({','.join('?' * len(part))})", part
                )
                have.update(r[0] for r in rows)
            return set(wanted) - have

        return self._read(q, snapshot=True)

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        """Store contents not stored yet; returns the bytes this added to the database.
        Hashing and compression happen here, in the caller's thread, not in the writer."""
        rows = []
        for h, data in blobs.items():
            if content_hash(data) != h:
                raise ValueError(f"blob {h[:12]}... does not match its content")
            encoding, payload = encode_blob(data)
            rows.append((h, len(data), encoding, payload))
        if not rows:
            return 0

        def tx(conn: sqlite3.Connection) -> int:
            now = self._now()
            added = 0
            for h, size, encoding, payload in rows:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO blobs (hash, size, encoding, data, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (h, size, encoding, payload, now),
                )
                if cur.rowcount:
                    added += len(payload)
            return added

        # Not durable on its own: the snapshot that names these blobs commits durably, and a
        # durable commit in WAL mode makes every earlier commit durable too.
        return self._write(tx, durable=False)

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        """Contents by hash; a hash the store does not hold raises MissingBlobs."""
        wanted = sorted(set(hashes))

        def q(conn: sqlite3.Connection) -> list[tuple[str, str, bytes]]:
            rows: list[tuple[str, str, bytes]] = []
            for part in _chunks(wanted):
                rows.extend(
                    conn.execute(
                        "SELECT hash, encoding, data FROM blobs "
                        f"WHERE hash IN ({','.join('?' * len(part))})",
                        part,
                    )
                )
            return rows

        found = {h: decode_blob(enc, data) for h, enc, data in self._read(q, snapshot=True)}
        missing = set(wanted) - set(found)
        if missing:
            raise MissingBlobs(missing)
        return found

    def gc_blobs(self) -> int:
        """Delete the blobs no snapshot, no pending restore and no tool step's image refers to."""
        return self._write(sweep_blobs_tx, durable=False)

    # --- snapshots --------------------------------------------------------------------------
    def save_snapshot(
        self, session_id: str, seq: int, manifest: Mapping[str, Any], *, new_bytes: int = 0
    ) -> SnapshotInfo:
        """Record the workspace as it is before step `seq` (one per step). Every content
        the snapshot adds must be stored already (put_blobs): else MissingBlobs."""
        state = dict(manifest)
        files, size, skipped = manifest_stats(state)

        def tx(conn: sqlite3.Connection) -> SnapshotInfo:
            require_session(conn, session_id)
            if conn.execute(
                "SELECT 1 FROM snapshots WHERE session_id=? AND seq=?", (session_id, seq)
            ).fetchone():
                raise StoreError(
                    f"session {session_id} already has a snapshot before {display_id(seq)}"
                )
            prev = conn.execute(
                "SELECT seq, depth FROM snapshots WHERE session_id=? AND seq<? "
                "ORDER BY seq DESC LIMIT 1",
                (session_id, seq),
            ).fetchone()
            base = {} if prev is None else state_tx(conn, session_id, prev[0])
            changed, removed, added = snapshot_delta(base, state)
            have: set[str] = set()
            for part in _chunks(added):
                have.update(
                    r[0]
                    for r in conn.execute(
                        f"SELECT hash FROM blobs WHERE hash IN ({','.join('?' * len(part))})",
                        part,
                    )
                )
            check_blobs_stored(added, have)
            whole = store_whole(prev, state, changed, removed)
            now = self._now()
            conn.execute(
                "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, "
                "files, bytes, new_bytes, skipped, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    session_id,
                    seq,
                    None if whole else prev[0],
                    dump_json(state if whole else changed, "manifest"),
                    None if whole else dump_json(removed, "removed"),
                    0 if whole else prev[1] + 1,
                    files,
                    size,
                    new_bytes,
                    skipped,
                    now,
                ),
            )
            return SnapshotInfo(session_id, seq, files, size, new_bytes, skipped, now, whole)

        # Durable like the write-ahead row it belongs to: the tool runs right after this, so
        # the state to roll back to must survive whatever the tool's writes survive.
        return self._write(tx, durable=True)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        def q(conn: sqlite3.Connection) -> list[SnapshotInfo]:
            require_session(conn, session_id)
            rows = conn.execute(
                f"SELECT {SNAPSHOT_COLS} FROM snapshots WHERE session_id=? ORDER BY seq",
                (session_id,),
            ).fetchall()
            return [row_to_snapshot_info(r) for r in rows]

        return self._read(q, snapshot=True)

    def get_snapshot(self, session_id: str, seq: int) -> Manifest | None:
        """The whole manifest of the snapshot before step `seq`, None if there is none."""

        def q(conn: sqlite3.Connection) -> Manifest | None:
            require_session(conn, session_id)
            if not conn.execute(
                "SELECT 1 FROM snapshots WHERE session_id=? AND seq=?", (session_id, seq)
            ).fetchone():
                return None
            return state_tx(conn, session_id, seq)

        return self._read(q, snapshot=True)

    def snapshot_from(self, session_id: str, seq: int) -> tuple[int, Manifest] | None:
        """The first snapshot at or after step `seq` with its manifest: the workspace as it
        was just before `seq` (steps without a snapshot changed no files)."""

        def q(conn: sqlite3.Connection) -> tuple[int, Manifest] | None:
            require_session(conn, session_id)
            found = first_snapshot_from_tx(conn, session_id, seq)
            return None if found is None else (found, state_tx(conn, session_id, found))

        return self._read(q, snapshot=True)

    # --- the restore journal ----------------------------------------------------------------
    def pending_restores(self, session_id: str | None = None) -> list[PendingRestore]:
        sql = f"SELECT {RESTORE_COLS} FROM workspace_restores"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id=?"
            params = (session_id,)
        rows = self._read(lambda c: c.execute(sql + " ORDER BY created_at", params).fetchall())
        return [row_to_restore(r) for r in rows]

    def finish_restore(self, session_id: str, restore_id: str) -> bool:
        """The files are in place: drop the journal row (only that restore's, not a newer
        one). Its blobs are not swept here: the workspace holds those contents now, and its
        next snapshot would store them again; the next sweep collects what stays unused."""

        def tx(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM workspace_restores WHERE session_id=? AND restore_id=?",
                (session_id, restore_id),
            ).rowcount
            return bool(gone)

        return self._write(tx, durable=True)
