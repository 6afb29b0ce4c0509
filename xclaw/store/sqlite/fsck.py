"""[store/sqlite] `xclaw fsck` on SQLite (see fsck_rows.FsckAccess): its reads, clock and backup;
the repairs are fsck_rows.repair_tx through the SQLite dialect, in one writer transaction."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from xclaw.errors import StoreError
from xclaw.store.dialect import SQLITE
from xclaw.store.fsck_rows import FsckReader, Repair, repair_tx
from xclaw.store.sqlite.leases import lease_now
from xclaw.store.sqlite.store import SqliteDb
from xclaw.store.sqlite.wal import wal_problem
from xclaw.store.steps.writes import Kind

T = TypeVar("T")


class SqliteFsck:
    def __init__(self, store: SqliteDb) -> None:
        self.store = store

    def read(self, fn: Callable[[FsckReader], T]) -> T:
        return self.store._read(lambda conn: fn(FsckReader(conn, SQLITE)), snapshot=True)

    def now(self) -> int:
        return lease_now()

    def storage(self) -> list[tuple[str, str]]:
        """The WAL file as SQLite would read it (sqlite.wal), then SQLite's own integrity
        check of every page, index and constraint of the file."""
        found: list[tuple[str, str]] = []
        wal = wal_problem(self.store.path)
        if wal is not None:
            found.append(wal)
        rows = self.store._read(lambda conn: conn.execute("PRAGMA integrity_check").fetchall())
        said = [str(r[0]) for r in rows]
        if said != ["ok"]:
            more = f" (and {len(said) - 1} more)" if len(said) > 1 else ""
            found.append(("sqlite_integrity", f"SQLite's integrity check: {said[0]}{more}"))
        return found

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
        lease_clock = lease_now()  # the host's wall clock, read once for the whole repair
        return self.store._write(
            lambda conn: repair_tx(SQLITE, conn, actions, now, lambda _: lease_clock),
            Kind.REPAIRED,
        )
