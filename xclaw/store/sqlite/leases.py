"""[store/sqlite] Session leases and worker presence for SQLiteStore (see xclaw/store/leases.py).

Several processes on one database file (two `xclaw serve`, a `xclaw run` beside a server) get
the same one-driver guarantee as PostgreSQL workers: the lease columns of the session row,
checked in the writer's transaction. Every writer shares one machine, so the host clock
measures expiry, and a worker's presence is an flock on a file beside the database
(`<db>.workers/<id>.lock`): the kernel drops it when the process dies, however it dies.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import SessionNotFound
from xclaw.security.private_files import private_dir
from xclaw.store.leases import (
    DrivenStore,
    Lease,
    LeaseInfo,
    SweepTargets,
    WorkerInfo,
    check_lease_for,
    lease_lost,
)
from xclaw.store.role import Role
from xclaw.store.steps.changes import ChangeMethods
from xclaw.store.steps.model import Status
from xclaw.store.steps.rows import STATUS_BY_VALUE, load_json
from xclaw.store.steps.writes import AcquireLease, Kind, ReleaseLease, RenewLease

if TYPE_CHECKING:
    from xclaw.store.base import StepWriter
    from xclaw.store.sqlite.store import SqliteDb

T = TypeVar("T")
R = TypeVar("R")

_STATUS = {s.value: s for s in Status}
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")


def lease_now() -> int:
    """The lease clock: the host's wall clock in ms (every writer shares the host)."""
    return time.time_ns() // 1_000_000


def check_fence(conn: sqlite3.Connection, session_id: str, lease: Lease | None) -> None:
    """Inside a write transaction: the lease's token is still the session's (else
    LeaseLost, and the whole write rolls back)."""
    if lease is None:
        return
    check_lease_for(lease, session_id)
    row = conn.execute(
        "SELECT lease_token, lease_owner FROM sessions WHERE session_id=?", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    if row[0] != lease.token:
        raise lease_lost(session_id, lease, row[0], row[1])


_FENCED_STATE = (
    "SELECT current_status, next_seq, awaiting_input, lease_token, lease_owner "
    "FROM sessions WHERE session_id=?"
)


def fenced_session_state(
    conn: sqlite3.Connection, session_id: str, lease: Lease | None
) -> tuple[Status, int, int]:
    """rows.session_state and check_fence in one statement (the write path of every step):
    (status, next_seq, awaiting_input), or SessionNotFound / LeaseLost."""
    check_lease_for(lease, session_id)
    row = conn.execute(_FENCED_STATE, (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    if lease is not None and row[3] != lease.token:
        raise lease_lost(session_id, lease, row[3], row[4])
    return STATUS_BY_VALUE[row[0]], row[1], row[2]


_NEXT_SEQ = "UPDATE sessions SET next_seq=next_seq+1, updated_at=? WHERE session_id=?"
_WHILE_RUNNING = f" AND current_status='{Status.RUNNING.value}'"
_FENCED = " AND lease_token IS ?"
_RETURNING_SEQ = " RETURNING next_seq-1"


def take_seq_unmoved(
    conn: sqlite3.Connection, session_id: str, lease: Lease | None, now: int, *, running: bool
) -> int | None:
    """The sequence number of a new step that leaves its session's status as it is, taken in
    one fenced statement instead of a read and a write (the write path of nearly every step;
    each statement is a round of the GIL between the writer and the event loop). `running`:
    only while the session is Running (a running LLM or tool call, whose event leaves a
    Running session Running). None: no row matched — not Running, fenced out or missing — and
    nothing was written: the caller takes the general path, which says which."""
    check_lease_for(lease, session_id)
    sql = _NEXT_SEQ + (_WHILE_RUNNING if running else "")
    params: tuple[Any, ...] = (now, session_id)
    if lease is not None:
        sql, params = sql + _FENCED, (*params, lease.token)
    row = conn.execute(sql + _RETURNING_SEQ, params).fetchone()
    return None if row is None else int(row[0])


_KNOWN_SEQ = " AND next_seq=?"


def take_known_seq(
    conn: sqlite3.Connection,
    session_id: str,
    lease: Lease | None,
    now: int,
    seq: int,
    *,
    running: bool,
) -> bool:
    """take_seq_unmoved for a number the writer expects (the one after the last it took for
    this session): the same fenced UPDATE, matched only if `seq` is still the session's
    next_seq, and without RETURNING — SQLite gathers a RETURNING statement's rows in a
    temporary table first (~30,000 CPU instructions, ~4 % of a step, by callgrind). False: no
    row matched (another connection or process moved next_seq, the transaction that took it
    was rolled back, or the session is not Running, fenced out or missing) and nothing was
    written: the caller takes the number as take_seq_unmoved does, which tells those apart."""
    check_lease_for(lease, session_id)
    if lease is None:
        return conn.execute(_TAKE_KNOWN[running, False], (now, session_id, seq)).rowcount == 1
    params = (now, session_id, seq, lease.token)
    return conn.execute(_TAKE_KNOWN[running, True], params).rowcount == 1


# take_known_seq's statement by (only while Running, fenced), made once.
_TAKE_KNOWN = {
    (running, fenced): _NEXT_SEQ
    + (_WHILE_RUNNING if running else "")
    + _KNOWN_SEQ
    + (_FENCED if fenced else "")
    for running in (False, True)
    for fenced in (False, True)
}


class SqliteLeases(ChangeMethods, Role):
    """The lease role of an SQLite store: leases, worker presence (a file lock each, beside
    the database) and the fenced view; the change log (ChangeMethods)."""

    def __init__(self, db: SqliteDb) -> None:
        super().__init__(db)
        self.path = db.path
        self._presence: dict[str, int] = {}  # worker id -> fd holding its flock
        self._presence_mutex = threading.Lock()
        self._driving: StepWriter | None = None

    def drive_with(self, record: StepWriter) -> None:
        """The record whose writes `driven(lease)` fences (set once, by the store)."""
        self._driving = record

    def close_presence(self) -> None:
        with self._presence_mutex:
            fds, self._presence = list(self._presence.values()), {}
        for fd in fds:
            os.close(fd)  # releases the flock

    def _presence_file(self, worker_id: str) -> Path:
        return self.path.with_name(self.path.name + ".workers") / (
            _UNSAFE.sub("_", worker_id) + ".lock"
        )

    def _alive(self, worker_id: str | None, registered: bool) -> bool | None:
        """True: its process holds the presence lock; False: registered, lock free (dead);
        None: never registered (only expiry counts)."""
        if worker_id is None or not registered:
            return None
        if worker_id in self._presence:
            return True
        try:
            fd = os.open(self._presence_file(worker_id), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing also drops a lock we just took
        return False

    # --- workers ----------------------------------------------------------------------------
    def register_worker(self, worker_id: str, info: dict[str, Any] | None = None) -> None:
        """Announce a live worker; its presence lasts until unregister, close or death."""
        with self._presence_mutex:
            if worker_id not in self._presence:
                path = self._presence_file(worker_id)
                private_dir(path.parent)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._presence[worker_id] = fd
        now = lease_now()
        data = json.dumps(info or {})

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO workers (worker_id, host, pid, started_at, seen_at, info) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (worker_id) "
                "DO UPDATE SET seen_at=excluded.seen_at, info=excluded.info",
                (worker_id, socket.gethostname(), os.getpid(), now, now, data),
            )

        self._write(tx, Kind.WORKER_SEEN)

    def heartbeat(self, worker_id: str) -> None:
        self._write(
            lambda c: c.execute(
                "UPDATE workers SET seen_at=? WHERE worker_id=?", (lease_now(), worker_id)
            ),
            Kind.WORKER_SEEN,
        )

    def unregister_worker(self, worker_id: str) -> None:
        self._write(
            lambda c: c.execute("DELETE FROM workers WHERE worker_id=?", (worker_id,)),
            Kind.WORKER_SEEN,
        )
        with self._presence_mutex:
            fd = self._presence.pop(worker_id, None)
        if fd is not None:
            self._presence_file(worker_id).unlink(missing_ok=True)
            os.close(fd)

    def workers(self) -> list[WorkerInfo]:
        rows = self._read(
            lambda c: c.execute(
                "SELECT worker_id, host, pid, started_at, seen_at, info FROM workers "
                "ORDER BY started_at, worker_id"
            ).fetchall()
        )
        return [
            WorkerInfo(r[0], r[1], r[2], r[3], r[4], load_json(r[5]) or {}, self._alive(r[0], True))
            for r in rows
        ]

    def forget_worker(self, worker_id: str) -> bool:
        """Drop a dead worker's row (its leases then count by expiry alone)."""
        if self._alive(worker_id, True):
            return False
        self._presence_file(worker_id).unlink(missing_ok=True)
        return bool(
            self._write(
                lambda c: c.execute("DELETE FROM workers WHERE worker_id=?", (worker_id,)).rowcount,
                Kind.WORKER_SEEN,
            )
        )

    # --- leases -----------------------------------------------------------------------------
    def _lease_row(self, conn: sqlite3.Connection, session_id: str) -> LeaseInfo | None:
        row = conn.execute(f"{_LEASE_SELECT} WHERE s.session_id=?", (session_id,)).fetchone()
        return None if row is None else self._info(row)

    def _info(self, r: tuple[Any, ...]) -> LeaseInfo:
        return LeaseInfo(
            r[0],
            _STATUS[r[1]],
            r[2],
            r[3],
            r[4],
            lease_now(),
            self._alive(r[2], bool(r[6])),
            bool(r[5]),
        )

    def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease | None:
        """Take the session's lease (token + 1) unless another owner's lease is live;
        None then. A dead registered owner's lease is taken at once."""
        return self.write(AcquireLease(session_id=session_id, owner=owner, ttl_s=ttl_s))

    def _acquire_lease_tx(
        self, session_id: str, owner: str, ttl_s: float
    ) -> Callable[[sqlite3.Connection], Lease | None]:
        ttl_ms = max(1, int(ttl_s * 1000))

        def tx(conn: sqlite3.Connection) -> Lease | None:
            info = self._lease_row(conn, session_id)
            if info is None:
                raise SessionNotFound(session_id)
            if info.live and info.owner != owner:
                return None
            token, expires = conn.execute(
                "UPDATE sessions SET lease_owner=?, lease_token=lease_token+1, "
                "lease_expires_at=? WHERE session_id=? RETURNING lease_token, lease_expires_at",
                (owner, lease_now() + ttl_ms, session_id),
            ).fetchone()
            return Lease(session_id, owner, token, expires)

        return tx

    def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease still ours (same token); LeaseLost once another worker took it."""
        return self.write(RenewLease(lease=lease, ttl_s=ttl_s))

    def _renew_lease_tx(self, lease: Lease, ttl_s: float) -> Callable[[sqlite3.Connection], Lease]:
        def tx(conn: sqlite3.Connection) -> Lease:
            expires = lease_now() + max(1, int(ttl_s * 1000))
            check_fence(conn, lease.session_id, lease)
            conn.execute(
                "UPDATE sessions SET lease_expires_at=? WHERE session_id=?",
                (expires, lease.session_id),
            )
            return Lease(lease.session_id, lease.owner, lease.token, expires)

        return tx

    def release_lease(self, lease: Lease) -> bool:
        """Expire the lease now (the owner stays on record); False if it was not ours."""
        return self.write(ReleaseLease(lease=lease))

    def _release_lease_tx(self, lease: Lease) -> Callable[[sqlite3.Connection], bool]:
        def tx(conn: sqlite3.Connection) -> bool:
            return bool(
                conn.execute(
                    "UPDATE sessions SET lease_expires_at=? "
                    "WHERE session_id=? AND lease_token=? AND lease_owner=?",
                    (lease_now(), lease.session_id, lease.token, lease.owner),
                ).rowcount
            )

        return tx

    def lease_info(self, session_id: str) -> LeaseInfo:
        info = self._read(lambda c: self._lease_row(c, session_id))
        if info is None:
            raise SessionNotFound(session_id)
        return info

    def leases(self, *, statuses: Iterable[Status] | None = None) -> list[LeaseInfo]:
        """Every session that has had a driver (of these statuses), latest expiry first."""
        query = f"{_LEASE_SELECT} WHERE s.lease_owner IS NOT NULL"
        words = [] if statuses is None else [Status(x).value for x in statuses]
        if statuses is not None:
            query += f" AND s.current_status IN ({','.join('?' * len(words)) or 'NULL'})"
        query += " ORDER BY s.lease_expires_at DESC, s.session_id"
        rows = self._read(lambda c: c.execute(query, words).fetchall())
        return [self._info(r) for r in rows]

    def sweep_targets(self, grace_ms: int) -> SweepTargets:
        now = lease_now()

        def q(c: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            due = c.execute(_SWEEP_DUE, (now - grace_ms,)).fetchall()
            return due, c.execute(_SWEEP_IDLE_OWNERS, (now,)).fetchall()

        due, idle = self._read(q, snapshot=True)
        # Presence is a file lock: asked once per registered owner, not once per session.
        dead = [owner for (owner,) in idle if self._alive(owner, True) is False]
        return SweepTargets([self._info(r) for r in due], dead)

    def driven(self, lease: Lease) -> StepWriter:
        assert self._driving is not None, "the store sets the record it drives"
        return DrivenStore(self._driving, lease)


_LEASE_SELECT = (
    "SELECT s.session_id, s.current_status, s.lease_owner, s.lease_token, "
    "s.lease_expires_at, s.awaiting_input, w.worker_id IS NOT NULL "
    "FROM sessions s LEFT JOIN workers w ON w.worker_id = s.lease_owner"
)
# The sweep's two reads (SweepTargets): what it may resume, and the registered owners of
# unfinished sessions none of whose leases is unexpired (dead ones among them may be forgotten).
_SWEEP_DUE = (
    f"{_LEASE_SELECT} WHERE s.lease_owner IS NOT NULL AND s.current_status = 'Running' "
    "AND s.awaiting_input = 0 AND coalesce(s.lease_expires_at, 0) <= ? "
    "ORDER BY s.lease_expires_at DESC, s.session_id"
)
_SWEEP_IDLE_OWNERS = (
    "SELECT s.lease_owner FROM sessions s JOIN workers w ON w.worker_id = s.lease_owner "
    "WHERE s.current_status IN ('Running', 'Paused') GROUP BY s.lease_owner "
    "HAVING max(coalesce(s.lease_expires_at, 0)) <= ? ORDER BY s.lease_owner"
)
