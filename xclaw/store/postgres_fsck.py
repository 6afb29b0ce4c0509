"""`xclaw fsck`'s reads and repairs on PostgreSQL (see fsck_rows.FsckAccess)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import psycopg
from psycopg import sql

from xclaw.errors import StoreError
from xclaw.store.fsck_rows import FsckReader, Repair
from xclaw.store.model import INTERRUPTED, Status, event_for_target
from xclaw.store.postgres import PostgresStore
from xclaw.store.postgres_rows import NOW_MS, write_status
from xclaw.store.postgres_snapshots import sweep_blobs_tx

# The tables a backup copies: the whole record (bus_payloads are transient frames).
BACKUP_TABLES = (
    "schema_version",
    "sessions",
    "traces",
    "blobs",
    "snapshots",
    "workspace_restores",
    "workers",
)

_REPAIR_SQL = {
    "interrupt_step": (
        "UPDATE traces SET status='failed', error_message=%s, end_time=%s "
        "WHERE session_id=%s AND seq=%s AND status='running' AND session_id IN "
        "(SELECT session_id FROM sessions WHERE current_status IN ('Success', 'Failed'))"
    ),
    "raise_next_seq": "UPDATE sessions SET next_seq=%s WHERE session_id=%s AND next_seq<%s",
    "detach_parent": "UPDATE traces SET parent_step_id=NULL WHERE step_id=%s",
    "clear_lease_expiry": (
        "UPDATE sessions SET lease_expires_at=NULL WHERE session_id=%s AND lease_owner IS NULL"
    ),
    "expire_lease": (
        f"UPDATE sessions SET lease_expires_at={NOW_MS} WHERE session_id=%s "
        f"AND lease_owner IS NOT NULL AND (lease_expires_at IS NULL OR lease_expires_at>{NOW_MS})"
    ),
}

T = TypeVar("T")


class PgReader(FsckReader):
    ph = "%s"
    text_cast = "::text"  # jsonb read back as its text, decoded like SQLite's


class PgFsck:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def read(self, fn: Callable[[FsckReader], T]) -> T:
        return self.store._read(lambda conn: fn(PgReader(conn)), snapshot=True)

    def now(self) -> int:
        row = self.store._read(lambda c: c.execute(f"SELECT {NOW_MS}").fetchone())
        assert row is not None
        return int(row[0])

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
            self.store._write(tx, durable=True)
        except psycopg.Error as e:
            raise StoreError(f"cannot back up {self.store.url} to schema {target}: {e}") from e
        return f"schema {target} of {self.store.url}"

    def repair(self, actions: Sequence[Repair]) -> list[int]:
        now = self.store._now()

        def tx(conn: psycopg.Connection) -> list[int]:
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
                elif a.kind in ("clear_lease_expiry", "expire_lease"):
                    params = (a.session_id,)
                else:
                    raise ValueError(f"unknown repair {a.kind!r}")
                changed.append(conn.execute(_REPAIR_SQL[a.kind], params).rowcount)
            return changed

        return self.store._write(tx, durable=True)


def _set_status(conn: psycopg.Connection, a: Repair, now: int) -> int:
    """Move a session found in the wrong status, through the one status write (so along the
    state machine), and only if it is still in the status the check saw."""
    row = conn.execute(
        "SELECT current_status FROM sessions WHERE session_id=%s", (a.session_id,)
    ).fetchone()
    if row is None or a.expected is None or row[0] != a.expected:
        return 0
    current, target = Status(a.expected), Status(str(a.status))
    write_status(conn, str(a.session_id), current, event_for_target(current, target), now)
    return 1
