"""[store/postgres] `xclaw fsck` on PostgreSQL (see fsck_rows.FsckAccess): its reads, the server's
clock and the backup (a schema copy); the repairs are fsck_rows.repair_tx through the PostgreSQL
dialect, in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import psycopg
from psycopg import sql

from xclaw.errors import StoreError
from xclaw.store.fsck_rows import FsckReader, Repair, repair_tx
from xclaw.store.postgres.rows import NOW_MS, POSTGRES
from xclaw.store.postgres.store import PgDb
from xclaw.store.steps.writes import Kind

# The tables a backup copies: the whole record (bus_payloads are transient frames, and
# session_changes a ten-minute log of news for running servers).
BACKUP_TABLES = (
    "schema_version",
    "sessions",
    "traces",
    "blobs",
    "snapshots",
    "workspace_restores",
    "workers",
)

T = TypeVar("T")


class PgFsck:
    def __init__(self, store: PgDb) -> None:
        self.store = store

    def read(self, fn: Callable[[FsckReader], T]) -> T:
        return self.store._read(lambda conn: fn(FsckReader(conn, POSTGRES)), snapshot=True)

    def now(self) -> int:
        return self.store._read(_server_clock)

    def storage(self) -> list[tuple[str, str]]:
        """The server keeps its own files whole (its WAL, checksums where enabled): nothing
        fsck can check from a client's connection beyond the rows."""
        return []

    def backup(self, stamp: str) -> str:
        """Every table copied into a new schema `<schema>_fsck_<stamp>` of the same database
        (restore: copy the rows back, or point --db at it with ?schema=)."""
        target = f"{self.store.schema}_fsck_{stamp}"

        def tx(conn: psycopg.Connection) -> None:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target)))
            for table in BACKUP_TABLES:
                conn.execute(
                    sql.SQL("CREATE TABLE {}.{} AS TABLE {}.{}").format(
                        sql.Identifier(target),
                        sql.Identifier(table),
                        sql.Identifier(self.store.schema),
                        sql.Identifier(table),
                    )
                )

        try:
            self.store._write(tx, Kind.REPAIRED)
        except psycopg.Error as e:
            raise StoreError(f"cannot back up {self.store.url} to schema {target}: {e}") from e
        return f"schema {target} of {self.store.url}"

    def repair(self, actions: Sequence[Repair]) -> list[int]:
        now = self.store._now()
        return self.store._write(
            lambda conn: repair_tx(POSTGRES, conn, actions, now, _server_clock), Kind.REPAIRED
        )


def _server_clock(conn: psycopg.Connection) -> int:
    """The lease clock: the database server's, read inside the repair transaction."""
    row = conn.execute(f"SELECT {NOW_MS}").fetchone()
    assert row is not None
    return int(row[0])
