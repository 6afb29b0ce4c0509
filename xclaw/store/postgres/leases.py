"""[store/postgres] Session leases and worker presence for PostgresStore (see
xclaw/store/leases.py).

Expiry is measured by the database server's clock, so workers on several hosts agree. A
worker's presence is a session-level advisory lock held on a connection of its own: the
database drops it the moment that connection goes (process killed, host gone once TCP
notices), which is how other workers tell a dead owner from a slow one.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from xclaw.errors import SessionNotFound
from xclaw.store.leases import (
    DrivenStore,
    Lease,
    LeaseInfo,
    SweepTargets,
    WorkerInfo,
    lease_lost,
)
from xclaw.store.postgres.conn import LOCK_WORKER, connect, wrap
from xclaw.store.postgres.rows import NOW_MS
from xclaw.store.role import Role
from xclaw.store.steps.changes import ChangeMethods
from xclaw.store.steps.model import Status
from xclaw.store.steps.rows import load_json
from xclaw.store.steps.writes import AcquireLease, Kind, ReleaseLease, RenewLease, sync_for

if TYPE_CHECKING:
    from xclaw.store.base import StepWriter
    from xclaw.store.postgres.store import PgDb

R = TypeVar("R")

_STATUS = {s.value: s for s in Status}

# The presence locks held right now, read once per statement (pg_locks copies the lock
# table on every scan: never per row).
_PRESENT = f"""WITH present AS (
    SELECT objid FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = {LOCK_WORKER}::int4::oid)
"""
# Whether a registered worker still holds its presence lock (NULL: never registered).
_ALIVE = (
    "CASE WHEN w.worker_id IS NULL THEN NULL "
    "ELSE hashtext(w.worker_id)::oid IN (SELECT objid FROM present) END"
)

_LEASE_SELECT = f"""{_PRESENT}
SELECT s.session_id, s.current_status, s.lease_owner, s.lease_token, s.lease_expires_at,
       {NOW_MS}, {_ALIVE}, s.awaiting_input, s.next_seq
FROM sessions s LEFT JOIN workers w ON w.worker_id = s.lease_owner
"""
# The session's lease and row, locked until commit: what taking its lease decides from (the
# write that opens a turn also reads its status and next step number here).
LEASE_FOR_UPDATE = _LEASE_SELECT + "WHERE s.session_id = %s FOR UPDATE OF s"
# The lease taken (token + 1): owner, ttl in ms, session id.
TAKE_LEASE = (
    "UPDATE sessions SET lease_owner = %s, lease_token = lease_token + 1, "
    f"lease_expires_at = {NOW_MS} + %s WHERE session_id = %s "
    "RETURNING lease_token, lease_expires_at"
)


def _info(row: tuple[Any, ...]) -> LeaseInfo:
    return LeaseInfo(row[0], _STATUS[row[1]], row[2], row[3], row[4], row[5], row[6], bool(row[7]))


def free_for(row: tuple[Any, ...], owner: str) -> bool:
    """A row of LEASE_FOR_UPDATE: `owner` may take the lease (no other live owner holds it)."""
    info = _info(row)
    return not (info.live and info.owner != owner)


class PgLeases(ChangeMethods, Role):
    """The lease role of a PostgreSQL store: leases, worker presence (an advisory lock on a
    connection of its own each) and the fenced view; the change log (ChangeMethods)."""

    def __init__(self, db: PgDb) -> None:
        super().__init__(db)
        self.target = db.target
        self._pool = db._pool
        self._presence: dict[str, psycopg.Connection] = {}
        self._presence_mutex = threading.Lock()
        self._driving: StepWriter | None = None

    def drive_with(self, record: StepWriter) -> None:
        """The record whose writes `driven(lease)` fences (set once, by the store)."""
        self._driving = record

    def close_presence(self) -> None:
        with self._presence_mutex:
            conns, self._presence = list(self._presence.values()), {}
        for conn in conns:
            conn.close()  # the database drops the presence lock with the connection

    # --- workers ----------------------------------------------------------------------------
    def _hold_presence(self, worker_id: str) -> None:
        with self._presence_mutex:
            old = self._presence.get(worker_id)
            if old is not None and not old.closed and not old.broken:
                return
            conn = connect(self.target)
            try:
                conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOCK_WORKER, worker_id))
            except psycopg.Error as e:
                conn.close()
                raise wrap(e, self.url) from e
            self._presence[worker_id] = conn
        if old is not None:
            old.close()

    def register_worker(self, worker_id: str, info: dict[str, Any] | None = None) -> None:
        """Announce a live worker; its presence lasts until unregister, close or death."""
        self._hold_presence(worker_id)
        data = json.dumps(info or {})

        def tx(conn: psycopg.Connection) -> None:
            conn.execute(
                "INSERT INTO workers (worker_id, host, pid, started_at, seen_at, info) "
                f"VALUES (%s, %s, %s, {NOW_MS}, {NOW_MS}, %s::jsonb) ON CONFLICT (worker_id) "
                f"DO UPDATE SET seen_at = {NOW_MS}, info = excluded.info",
                (worker_id, socket.gethostname(), os.getpid(), data),
            )

        self._pool.run(tx, sync_for(Kind.WORKER_SEEN))

    def heartbeat(self, worker_id: str) -> None:
        """Refresh seen_at; take presence again if its connection broke."""
        self._hold_presence(worker_id)
        self._pool.run(
            lambda c: c.execute(
                f"UPDATE workers SET seen_at = {NOW_MS} WHERE worker_id = %s", (worker_id,)
            ),
            sync_for(Kind.WORKER_SEEN),
        )

    def unregister_worker(self, worker_id: str) -> None:
        self._pool.run(
            lambda c: c.execute("DELETE FROM workers WHERE worker_id = %s", (worker_id,)),
            sync_for(Kind.WORKER_SEEN),
        )
        with self._presence_mutex:
            conn = self._presence.pop(worker_id, None)
        if conn is not None:
            conn.close()

    def workers(self) -> list[WorkerInfo]:
        rows = self._pool.read(
            lambda c: c.execute(
                f"{_PRESENT} SELECT w.worker_id, w.host, w.pid, w.started_at, w.seen_at, "
                f"w.info, {_ALIVE} FROM workers w ORDER BY w.started_at, w.worker_id"
            ).fetchall(),
        )
        return [WorkerInfo(r[0], r[1], r[2], r[3], r[4], load_json(r[5]) or {}, r[6]) for r in rows]

    def forget_worker(self, worker_id: str) -> bool:
        """Drop a dead worker's row (its leases then count by expiry alone)."""
        return bool(
            self._pool.run(
                lambda c: (
                    c.execute(
                        f"{_PRESENT} DELETE FROM workers w WHERE w.worker_id = %s AND NOT {_ALIVE}",
                        (worker_id,),
                    ).rowcount
                ),
                sync_for(Kind.WORKER_SEEN),
            )
        )

    # --- leases -----------------------------------------------------------------------------
    def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease | None:
        """Take the session's lease (token + 1) unless another owner's lease is live;
        None then. A dead registered owner's lease is taken at once."""
        # Durable (writes.SYNC): a takeover is on disk before the new driver acts on it.
        return self.write(AcquireLease(session_id=session_id, owner=owner, ttl_s=ttl_s))

    def _acquire_lease_tx(
        self, session_id: str, owner: str, ttl_s: float
    ) -> Callable[[psycopg.Connection], Lease | None]:
        ttl_ms = max(1, int(ttl_s * 1000))

        def tx(conn: psycopg.Connection) -> Lease | None:
            row = conn.execute(LEASE_FOR_UPDATE, (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            if not free_for(row, owner):
                return None
            token, expires = conn.execute(TAKE_LEASE, (owner, ttl_ms, session_id)).fetchone()  # type: ignore[misc]
            return Lease(session_id, owner, token, expires)

        return tx

    def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease still ours (same token); LeaseLost once another worker took it."""
        return self.write(RenewLease(lease=lease, ttl_s=ttl_s))

    def _renew_lease_tx(self, lease: Lease, ttl_s: float) -> Callable[[psycopg.Connection], Lease]:
        ttl_ms = max(1, int(ttl_s * 1000))

        def tx(conn: psycopg.Connection) -> Lease:
            row = conn.execute(
                f"UPDATE sessions SET lease_expires_at = {NOW_MS} + %s "
                "WHERE session_id = %s AND lease_token = %s AND lease_owner = %s "
                "RETURNING lease_expires_at",
                (ttl_ms, lease.session_id, lease.token, lease.owner),
            ).fetchone()
            if row is None:
                now = conn.execute(
                    "SELECT lease_token, lease_owner FROM sessions WHERE session_id = %s",
                    (lease.session_id,),
                ).fetchone()
                if now is None:
                    raise SessionNotFound(lease.session_id)
                raise lease_lost(lease.session_id, lease, now[0], now[1])
            return Lease(lease.session_id, lease.owner, lease.token, row[0])

        return tx

    def release_lease(self, lease: Lease) -> bool:
        """Expire the lease now (the owner stays on record); False if it was not ours."""
        return self.write(ReleaseLease(lease=lease))

    def _release_lease_tx(self, lease: Lease) -> Callable[[psycopg.Connection], bool]:
        def tx(conn: psycopg.Connection) -> bool:
            cur = conn.execute(
                f"UPDATE sessions SET lease_expires_at = {NOW_MS} "
                "WHERE session_id = %s AND lease_token = %s AND lease_owner = %s",
                (lease.session_id, lease.token, lease.owner),
            )
            return cur.rowcount == 1

        return tx

    def lease_info(self, session_id: str) -> LeaseInfo:
        row = self._pool.read(
            lambda c: c.execute(
                _LEASE_SELECT + "WHERE s.session_id = %s", (session_id,)
            ).fetchone(),
        )
        if row is None:
            raise SessionNotFound(session_id)
        return _info(row)

    def leases(self, *, statuses: Iterable[Status] | None = None) -> list[LeaseInfo]:
        """Every session that has had a driver (of these statuses), latest expiry first."""
        query = _LEASE_SELECT + "WHERE s.lease_owner IS NOT NULL"
        params: tuple[Any, ...] = ()
        if statuses is not None:
            query += " AND s.current_status = ANY(%s)"
            params = ([Status(x).value for x in statuses],)
        query += " ORDER BY s.lease_expires_at DESC NULLS LAST, s.session_id"
        rows = self._pool.read(
            lambda c: c.execute(query, params).fetchall(),
        )
        return [_info(r) for r in rows]

    def sweep_targets(self, grace_ms: int) -> SweepTargets:
        def q(c: psycopg.Connection) -> tuple[list[Any], list[Any]]:
            due = c.execute(_SWEEP_DUE, (grace_ms,)).fetchall()
            return due, c.execute(_SWEEP_DEAD_OWNERS).fetchall()

        # Two reads, not one snapshot: a lease renewed between them only waits a round.
        due, dead = self._pool.read(q)
        return SweepTargets([_info(r) for r in due], [owner for (owner,) in dead])

    def driven(self, lease: Lease) -> StepWriter:
        assert self._driving is not None, "the store sets the record it drives"
        return DrivenStore(self._driving, lease)


# The sweep's two reads (SweepTargets), by the database's clock: what it may resume, and the
# dead registered owners of unfinished sessions none of whose leases is unexpired.
_SWEEP_DUE = (
    f"{_LEASE_SELECT} WHERE s.lease_owner IS NOT NULL AND s.current_status = 'Running' "
    f"AND s.awaiting_input = 0 AND coalesce(s.lease_expires_at, 0) <= {NOW_MS} - %s "
    "ORDER BY s.lease_expires_at DESC NULLS LAST, s.session_id"
)
_SWEEP_DEAD_OWNERS = (
    f"{_PRESENT} SELECT s.lease_owner FROM sessions s JOIN workers w "
    "ON w.worker_id = s.lease_owner WHERE s.current_status IN ('Running', 'Paused') "
    "GROUP BY s.lease_owner, w.worker_id "
    f"HAVING max(coalesce(s.lease_expires_at, 0)) <= {NOW_MS} AND NOT {_ALIVE} "
    "ORDER BY s.lease_owner"
)
