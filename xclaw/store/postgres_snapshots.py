"""Workspace snapshots in PostgreSQL: content-addressed blobs (bytea), snapshot rows (jsonb
manifests, mostly deltas), the restore journal. The rules are SQLite's (sqlite_snapshots.py)
and the values the same (blob encoding and manifests are pure code in snapshot_model).

What PostgreSQL adds is concurrency: several workers save snapshots while another sweeps
unreferenced blobs. Savers hold a shared advisory lock, sweepers an exclusive one, so a sweep
never runs between a save's "every content is stored" check and its commit, and its DELETE
sees every snapshot committed before it; a content swept before a save is reported as
MissingBlobs and stored again by the caller (the same protocol as SQLite).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pgerr

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
from xclaw.store.postgres_rows import pg_json, require_session
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

LOCK_BLOBS = 0x78636C03  # advisory lock: shared by savers, exclusive for sweeps

_SWEEP_SQL = """
DELETE FROM blobs WHERE hash NOT IN (
    SELECT j.value->>'hash' FROM snapshots AS s, jsonb_each(s.manifest) AS j
     WHERE j.value->>'hash' IS NOT NULL
    UNION
    SELECT j.value->>'hash' FROM workspace_restores AS r, jsonb_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND j.value->>'hash' IS NOT NULL
    UNION
    -- images a tool returned (view_file): the step keeps their hashes (docs/storage.md)
    SELECT i.value->>'hash' FROM traces AS t, jsonb_array_elements(t.output_data->'images') AS i
     WHERE t.step_type = 'tool_call' AND jsonb_typeof(t.output_data) = 'object'
       AND jsonb_typeof(t.output_data->'images') = 'array' AND i.value->>'hash' IS NOT NULL
)
"""


# --- transaction bodies -----------------------------------------------------------------------


def state_tx(conn: psycopg.Connection, session_id: str, seq: int) -> Manifest:
    """The whole manifest of snapshot (session_id, seq), following its delta chain."""
    return rebuild_state(
        lambda at: conn.execute(
            "SELECT base_seq, manifest, removed FROM snapshots WHERE session_id=%s AND seq=%s",
            (session_id, at),
        ).fetchone(),
        session_id,
        seq,
    )


def first_snapshot_from_tx(conn: psycopg.Connection, session_id: str, seq: int) -> int | None:
    row = conn.execute(
        "SELECT min(seq) FROM snapshots WHERE session_id=%s AND seq>=%s", (session_id, seq)
    ).fetchone()
    return None if row is None else row[0]


def sweep_blobs_tx(conn: psycopg.Connection) -> int:
    """Delete every blob no snapshot, no pending restore and no tool step's image refers
    to; returns how many."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_BLOBS,))
    return conn.execute(_SWEEP_SQL).rowcount


def _journal_tx(
    conn: psycopg.Connection,
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
        f"INSERT INTO workspace_restores ({RESTORE_COLS}) "
        "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s) ON CONFLICT (session_id) DO "
        "UPDATE SET restore_id=excluded.restore_id, kind=excluded.kind, "
        "source_session_id=excluded.source_session_id, snapshot_seq=excluded.snapshot_seq, "
        "manifest=excluded.manifest, ignore=excluded.ignore, created_at=excluded.created_at",
        (
            session_id,
            restore_id,
            kind,
            source,
            snapshot_seq,
            pg_json(manifest, "manifest"),
            pg_json(list(ignore), "ignore"),
            now,
        ),
    )
    return PendingRestore(session_id, restore_id, kind, source, snapshot_seq, manifest, ignore, now)


def rollback_snapshots_tx(
    conn: psycopg.Connection,
    session_id: str,
    seq: int,
    request: WorkspaceRestore | None,
    now: int,
) -> PendingRestore | None:
    """Inside the rollback transaction: journal the state before step `seq`, drop the
    snapshots of the deleted steps, sweep blobs."""
    restore = None
    if request is not None:
        target = first_snapshot_from_tx(conn, session_id, seq)
        if target is not None:
            state = state_tx(conn, session_id, target)
            restore = _journal_tx(conn, session_id, "rollback", None, target, state, request, now)
    dropped = conn.execute(
        "DELETE FROM snapshots WHERE session_id=%s AND seq>=%s", (session_id, seq)
    ).rowcount
    if dropped:
        sweep_blobs_tx(conn)
    return restore


def fork_snapshots_tx(
    conn: psycopg.Connection,
    session_id: str,
    seq: int,
    new_sid: str,
    request: WorkspaceRestore | None,
    now: int,
) -> PendingRestore | None:
    """Inside the fork transaction: copy the snapshots up to the fork point and journal the
    new workspace (the first snapshot after the fork point, or the source's current files)."""
    conn.execute(
        "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, files, "
        "bytes, new_bytes, skipped, created_at) SELECT %s, seq, base_seq, manifest, removed, "
        "depth, files, bytes, new_bytes, skipped, created_at FROM snapshots "
        "WHERE session_id=%s AND seq<=%s",
        (new_sid, session_id, seq),
    )
    if request is None:
        return None
    target = first_snapshot_from_tx(conn, session_id, seq + 1)
    state = None if target is None else state_tx(conn, session_id, target)
    return _journal_tx(conn, new_sid, "fork", session_id, target, state, request, now)


# --- the store methods ------------------------------------------------------------------------


T = TypeVar("T")


class PgSnapshots:
    """The snapshot half of the Store protocol for PostgresStore."""

    if TYPE_CHECKING:  # provided by the store this is mixed into

        def _write(self, fn: Callable[[psycopg.Connection], T], *, durable: bool) -> T: ...
        def _read(self, fn: Callable[[psycopg.Connection], T], *, snapshot: bool = False) -> T: ...

    _now: Callable[[], int]

    def missing_blobs(self, hashes: Iterable[str]) -> set[str]:
        wanted = sorted(set(hashes))
        if not wanted:
            return set()
        rows = self._read(
            lambda c: c.execute("SELECT hash FROM blobs WHERE hash = ANY(%s)", (wanted,)).fetchall()
        )
        return set(wanted) - {r[0] for r in rows}

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        """Store contents not stored yet; returns the bytes this added to the database."""
        rows = []
        for h, data in blobs.items():
            if content_hash(data) != h:
                raise ValueError(f"blob {h[:12]}... does not match its content")
            encoding, payload = encode_blob(data)
            rows.append((h, len(data), encoding, payload))
        if not rows:
            return 0

        def tx(conn: psycopg.Connection) -> int:
            now = self._now()
            added = 0
            for h, size, encoding, payload in rows:
                cur = conn.execute(
                    "INSERT INTO blobs (hash, size, encoding, data, created_at) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (hash) DO NOTHING",
                    (h, size, encoding, payload, now),
                )
                if cur.rowcount:
                    added += len(payload)
            return added

        # Not durable on its own: the snapshot naming these blobs commits durably after it.
        return self._write(tx, durable=False)

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = sorted(set(hashes))
        rows = self._read(
            lambda c: c.execute(
                "SELECT hash, encoding, data FROM blobs WHERE hash = ANY(%s)", (wanted,)
            ).fetchall()
        )
        found = {h: decode_blob(enc, data) for h, enc, data in rows}
        missing = set(wanted) - set(found)
        if missing:
            raise MissingBlobs(missing)
        return found

    def gc_blobs(self) -> int:
        return self._write(sweep_blobs_tx, durable=False)

    def save_snapshot(
        self, session_id: str, seq: int, manifest: Mapping[str, Any], *, new_bytes: int = 0
    ) -> SnapshotInfo:
        """Record the workspace as it is before step `seq`. Every content the snapshot adds
        must be stored already (put_blobs): else MissingBlobs."""
        state = dict(manifest)
        files, size, skipped = manifest_stats(state)

        def tx(conn: psycopg.Connection) -> SnapshotInfo:
            # The session row before the blobs lock: the order rollback and delete take too.
            if (
                conn.execute(
                    "SELECT 1 FROM sessions WHERE session_id=%s FOR SHARE", (session_id,)
                ).fetchone()
                is None
            ):
                require_session(conn, session_id)
            conn.execute("SELECT pg_advisory_xact_lock_shared(%s, 0)", (LOCK_BLOBS,))
            prev = conn.execute(
                "SELECT seq, depth FROM snapshots WHERE session_id=%s AND seq<%s "
                "ORDER BY seq DESC LIMIT 1",
                (session_id, seq),
            ).fetchone()
            base = {} if prev is None else state_tx(conn, session_id, prev[0])
            changed, removed, added = snapshot_delta(base, state)
            if added:
                have = {
                    r[0]
                    for r in conn.execute(
                        "SELECT hash FROM blobs WHERE hash = ANY(%s)", (added,)
                    ).fetchall()
                }
                check_blobs_stored(added, have)
            whole = store_whole(prev, state, changed, removed)
            now = self._now()
            try:
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, "
                        "depth, files, bytes, new_bytes, skipped, created_at) VALUES "
                        "(%s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s)",
                        (
                            session_id,
                            seq,
                            None if whole else prev[0],  # type: ignore[index]
                            pg_json(state if whole else changed, "manifest"),
                            None if whole else pg_json(removed, "removed"),
                            0 if whole else prev[1] + 1,  # type: ignore[index]
                            files,
                            size,
                            new_bytes,
                            skipped,
                            now,
                        ),
                    )
            except pgerr.UniqueViolation:
                raise StoreError(
                    f"session {session_id} already has a snapshot before {display_id(seq)}"
                ) from None
            return SnapshotInfo(session_id, seq, files, size, new_bytes, skipped, now, whole)

        # Durable like the write-ahead row it belongs to (the tool runs right after this).
        return self._write(tx, durable=True)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        def q(conn: psycopg.Connection) -> list[SnapshotInfo]:
            require_session(conn, session_id)
            rows = conn.execute(
                f"SELECT {SNAPSHOT_COLS} FROM snapshots WHERE session_id=%s ORDER BY seq",
                (session_id,),
            ).fetchall()
            return [row_to_snapshot_info(r) for r in rows]

        return self._read(q)

    def get_snapshot(self, session_id: str, seq: int) -> Manifest | None:
        def q(conn: psycopg.Connection) -> Manifest | None:
            require_session(conn, session_id)
            if not conn.execute(
                "SELECT 1 FROM snapshots WHERE session_id=%s AND seq=%s", (session_id, seq)
            ).fetchone():
                return None
            return state_tx(conn, session_id, seq)

        return self._read(q, snapshot=True)

    def snapshot_from(self, session_id: str, seq: int) -> tuple[int, Manifest] | None:
        def q(conn: psycopg.Connection) -> tuple[int, Manifest] | None:
            require_session(conn, session_id)
            found = first_snapshot_from_tx(conn, session_id, seq)
            return None if found is None else (found, state_tx(conn, session_id, found))

        return self._read(q, snapshot=True)

    def pending_restores(self, session_id: str | None = None) -> list[PendingRestore]:
        query = f"SELECT {RESTORE_COLS} FROM workspace_restores"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            query += " WHERE session_id=%s"
            params = (session_id,)
        rows = self._read(lambda c: c.execute(query + " ORDER BY created_at", params).fetchall())
        return [row_to_restore(r) for r in rows]

    def finish_restore(self, session_id: str, restore_id: str) -> bool:
        return bool(
            self._write(
                lambda c: (
                    c.execute(
                        "DELETE FROM workspace_restores WHERE session_id=%s AND restore_id=%s",
                        (session_id, restore_id),
                    ).rowcount
                ),
                durable=True,
            )
        )
