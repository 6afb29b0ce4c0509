"""`xclaw fsck`'s reads and repairs on SQLite (see fsck_rows.FsckAccess)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from xclaw.errors import StoreError
from xclaw.store.fsck_rows import BlobRow, Repair, SessionRow, SnapshotRow
from xclaw.store.model import INTERRUPTED
from xclaw.store.rows import load_json
from xclaw.store.sqlite import SQLiteStore
from xclaw.store.sqlite_leases import lease_now
from xclaw.store.sqlite_snapshots import sweep_blobs_tx

_SESSIONS_SQL = (
    "SELECT session_id, current_status, next_seq, awaiting_input, is_forked, "
    "parent_session_id, forked_from_seq, lease_owner, lease_expires_at, lease_token "
    "FROM sessions ORDER BY created_at, session_id"
)

# Each repair's SQL carries its own condition, so it only ever fixes what was found.
_REPAIR_SQL = {
    "interrupt_step": (
        "UPDATE traces SET status='failed', error_message=?, end_time=? "
        "WHERE session_id=? AND seq=? AND status='running'"
    ),
    "set_status": (
        "UPDATE sessions SET current_status=?, updated_at=? "
        "WHERE session_id=? AND current_status=?"
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


class SqliteFsck:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def sessions(self) -> list[SessionRow]:
        rows = self.store._read(lambda c: c.execute(_SESSIONS_SQL).fetchall(), snapshot=True)
        return [
            SessionRow(r[0], r[1], int(r[2]), bool(r[3]), bool(r[4]), r[5], r[6], r[7], r[8],
                       int(r[9] or 0))
            for r in rows
        ]

    def stray_steps(self) -> list[tuple[str, str]]:
        return self.store._read(
            lambda c: c.execute(
                "SELECT step_id, session_id FROM traces t WHERE NOT EXISTS "
                "(SELECT 1 FROM sessions s WHERE s.session_id=t.session_id) ORDER BY step_id"
            ).fetchall()
        )

    def snapshot_rows(self, session_id: str) -> list[SnapshotRow]:
        rows = self.store._read(
            lambda c: c.execute(
                "SELECT session_id, seq, base_seq, manifest, removed FROM snapshots "
                "WHERE session_id=? ORDER BY seq",
                (session_id,),
            ).fetchall()
        )
        return [SnapshotRow(r[0], r[1], r[2], load_json(r[3]), load_json(r[4])) for r in rows]

    def stray_snapshots(self) -> list[tuple[str, int]]:
        return self.store._read(
            lambda c: c.execute(
                "SELECT session_id, seq FROM snapshots p WHERE NOT EXISTS "
                "(SELECT 1 FROM sessions s WHERE s.session_id=p.session_id)"
            ).fetchall()
        )

    def blob_hashes(self) -> set[str]:
        return {r[0] for r in self.store._read(lambda c: c.execute("SELECT hash FROM blobs").fetchall())}

    def blobs(self, batch: int = 64) -> Iterator[BlobRow]:
        after = ""
        while True:
            rows = self._blob_page(after, batch)
            if not rows:
                return
            for r in rows:
                yield BlobRow(r[0], int(r[1]), r[2], bytes(r[3]))
            after = rows[-1][0]

    def _blob_page(self, after: str, batch: int) -> list[Any]:
        return self.store._read(
            lambda c: c.execute(
                "SELECT hash, size, encoding, data FROM blobs WHERE hash>? "
                "ORDER BY hash LIMIT ?",
                (after, batch),
            ).fetchall()
        )

    def now(self) -> int:
        return lease_now()

    def backup(self, stamp: str) -> str:
        """SQLite's online backup: a consistent copy even while a server writes the file."""
        dest = self.store.path.with_name(f"{self.store.path.name}.fsck-{stamp}.bak")
        if dest.exists():
            raise StoreError(f"backup file {dest} already exists")
        try:
            src = sqlite3.connect(self.store.path, timeout=60)
            try:
                out = sqlite3.connect(dest)
                try:
                    src.backup(out)
                finally:
                    out.close()
            finally:
                src.close()
        except sqlite3.Error as e:
            raise StoreError(f"cannot back up {self.store.path} to {dest}: {e}") from e
        return str(Path(dest))

    def repair(self, actions: Sequence[Repair]) -> list[int]:
        now = self.store._now()
        lease_clock = lease_now()

        def tx(conn: sqlite3.Connection) -> list[int]:
            changed: list[int] = []
            for a in actions:
                if a.kind == "sweep_blobs":
                    changed.append(sweep_blobs_tx(conn))
                    continue
                params: tuple[object, ...]
                if a.kind == "interrupt_step":
                    params = (INTERRUPTED, now, a.session_id, a.seq)
                elif a.kind == "set_status":
                    params = (a.status, now, a.session_id, a.expected)
                elif a.kind == "raise_next_seq":
                    params = (a.value, a.session_id, a.value)
                elif a.kind == "detach_parent":
                    params = (a.step_id,)
                elif a.kind == "clear_lease_expiry":
                    params = (a.session_id,)
                elif a.kind == "expire_lease":
                    params = (lease_clock, a.session_id, lease_clock)
                else:
                    raise ValueError(f"unknown repair {a.kind!r}")
                changed.append(conn.execute(_REPAIR_SQL[a.kind], params).rowcount)
            return changed

        return self.store._write(tx, durable=True)
