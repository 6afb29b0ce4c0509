"""`xclaw fsck`'s reads and repairs on SQLite (see fsck_rows.FsckAccess)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from xclaw.errors import StoreError
from xclaw.store.fsck_rows import FsckReader, Repair
from xclaw.store.model import INTERRUPTED, Status, event_for_target
from xclaw.store.rows import write_status
from xclaw.store.sqlite import SQLiteStore
from xclaw.store.sqlite_leases import lease_now
from xclaw.store.sqlite_snapshots import sweep_blobs_tx

T = TypeVar("T")


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


class SqliteFsck:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def read(self, fn: Callable[[FsckReader], T]) -> T:
        return self.store._read(lambda conn: fn(FsckReader(conn)), snapshot=True)

    def now(self) -> int:
        return lease_now()

    def backup(self, stamp: str) -> str:
        """SQLite's online backup: a consistent copy even while a server writes the file."""
        dest = self.store.path.with_name(f"{self.store.path.name}.fsck-{stamp}.bak")
        try:
            # Made first, private, then given the database's own mode: the copy holds the whole
            # record and must be no more readable than the file it copies.
            os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.chmod(dest, self.store.path.stat().st_mode & 0o777)
        except FileExistsError:
            raise StoreError(f"backup file {dest} already exists") from None
        except OSError as e:
            raise StoreError(f"cannot back up {self.store.path} to {dest}: {e}") from e
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
                if a.kind == "set_status":
                    changed.append(_set_status(conn, a, now))
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
                    params = (lease_clock, a.session_id, lease_clock)
                else:
                    raise ValueError(f"unknown repair {a.kind!r}")
                changed.append(conn.execute(_REPAIR_SQL[a.kind], params).rowcount)
            return changed

        return self.store._write(tx, durable=True)


def _set_status(conn: sqlite3.Connection, a: Repair, now: int) -> int:
    """Move a session found in the wrong status, through the one status write (so along the
    state machine), and only if it is still in the status the check saw."""
    row = conn.execute(
        "SELECT current_status FROM sessions WHERE session_id=?", (a.session_id,)
    ).fetchone()
    if row is None or a.expected is None or row[0] != a.expected:
        return 0
    current, target = Status(a.expected), Status(str(a.status))
    write_status(conn, str(a.session_id), current, event_for_target(current, target), now)
    return 1
