"""[store/sqlite] SQLite connections and the single writer thread (group commit) behind SQLiteStore.

One thread per database writes: SQLite allows one writer at a time anyway, so every write of
the process is a unit in one queue, and the writer thread takes whatever is queued into one
transaction (group commit across sessions). A unit is a transaction body of the store: a store
method's own, or a stream write applied by store/steps/writes.py `apply`; none calls the store
again. A unit that fails rolls back alone and only its caller sees the exception: the batch
runs first without savepoints (the common case, two statements fewer per unit) and, if any
unit failed, the whole transaction is rolled back and the batch runs again with each unit in
its own SAVEPOINT (running a unit twice is running it once: store/steps/writes.py, point 6). No
SQLite write ever runs on an event loop's thread. (One shortcut, for
synchronous callers off any event loop: one that finds the writer idle and nothing queued runs
its own transaction, sparing two thread wake-ups; the connection is still used by one thread at
a time, and nothing queued is overtaken.)

Durability is chosen per commit (see docs/storage.md): the connection commits with
synchronous=NORMAL (in the OS page cache before COMMIT returns: survives a process kill, not
necessarily a power loss), and a transaction holding any unit marked `durable` is then made
durable by the writer itself: it fsyncs the WAL file (`_sync_wal`) before any outcome is
delivered — what synchronous=FULL does inside COMMIT in WAL mode (sqlite3WalFrames syncs the WAL
at a commit only under FULL; the WAL's header is synced at every restart of the log under
NORMAL too), without two `PRAGMA synchronous` switches around every durable commit. Syncing
the WAL also makes every earlier commit durable.

Every unit's outcome is delivered once its transaction is committed, in queue order, so a
caller awaiting one unit knows every unit queued before it is committed too. Stream units
(xclaw/store/steps/stream.py) get theirs through `stream.deliver`: one callback per event loop per
transaction. Units nobody waits for (`lazy`: an LLM call starting, its answer when tool calls
follow) are held at most COALESCE_S so that they share a commit with the write that follows
them (as PostgreSQL's commit_delay does); a unit someone waits for is taken at once, with
everything before it. Units of one `chain` (one run's stream) depend on each other: once one
fails, the later ones of its batch fail with it, unrun.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from xclaw.errors import DiskFull, StoreError, XclawError
from xclaw.store.steps.stream import Ticket, deliver
from xclaw.store.steps.writes import Sync

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
# Another process (e.g. a CLI `xclaw rollback` while a server runs) may hold the write lock;
# busy_timeout waits up to 10 s per attempt, and we retry up to this long in total before
# telling the user, in words, what is going on.
BUSY_GIVE_UP_S = 60.0
MAX_BATCH = 256
# How long units nobody waits for are held for company (one commit instead of several).
COALESCE_S = 0.002


# None bound as a statement's parameter is NULL either way; an adapter registered for it only
# makes the binding cheap. Without one, Python's sqlite3 module looks for an adapter for each
# None it binds (None is not among the types it binds as they are), then for `__adapt__` and
# `__conform__` attributes, each a failed lookup that formats an AttributeError: ~1,000 CPU
# instructions per None, and a step binds a dozen (a running step's output, error, end time,
# parent, ...). `{}.get` is a C function that answers None for None.
_NONE_IS_NULL: dict[object, None] = {}
sqlite3.register_adapter(type(None), _NONE_IS_NULL.get)


def read_only_uri(path: Path) -> str:
    """A `file:` URI SQLite opens read-only, never creating the file."""
    return f"file:{quote(str(Path(path).absolute()))}?mode=ro"


def is_busy(e: BaseException) -> bool:
    return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))


def busy_error(where: str) -> StoreError:
    return StoreError(
        f"{where} stayed locked by another process for more than {BUSY_GIVE_UP_S:.0f} s; "
        "is another xclaw writing a very large change to it? Try again."
    )


# The writer's own connection does not wait inside SQLite (busy_timeout 0 once it is open):
# SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20, 25 ... ms between its tries, so a writer
# finding the lock held by another process for one millisecond (another worker's commit) would
# sleep several. The writer tries BEGIN IMMEDIATE again itself, from 0.1 ms up to 5 ms apart.
WRITE_LOCK_FIRST_PAUSE_S = 0.0001
WRITE_LOCK_MAX_PAUSE_S = 0.005


def retry_while_busy(
    fn: Callable[[], T], where: str, *, first_pause: float = 0.001, max_pause: float = 0.05
) -> T:
    """fn(), tried again while the database is locked, for up to BUSY_GIVE_UP_S, the pause
    between tries doubling from first_pause to max_pause.

    busy_timeout alone is not enough: SQLite answers some lock conflicts with SQLITE_BUSY at
    once, without calling the busy handler, when waiting could deadlock (two connections of a
    rollback-journal file both upgrading from SHARED, as when several processes open a new
    database and switch it to WAL at the same moment). Those are resolved by trying again.
    """
    deadline = time.monotonic() + BUSY_GIVE_UP_S
    pause = first_pause
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            if time.monotonic() > deadline:
                raise busy_error(where) from e
        # Jittered so that openers that collided once do not collide again in lock step.
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, max_pause)


def connect(path: str, *, read_only: bool = False, existing: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN/COMMIT ourselves) with foreign keys on
    and a busy timeout, usable from any thread: the write connection is opened before the writer thread
    starts, and close() closes every reader's connection from the closing thread. `existing`
    (a reading command's store): SQLite opens the file read-only and never creates it."""
    try:
        conn = sqlite3.connect(
            read_only_uri(Path(path)) if existing else path,
            uri=existing,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
            cached_statements=256,
        )
    except sqlite3.Error as e:
        raise StoreError(f"cannot open database {path}: {e}") from e
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        if read_only:
            # Readers never write: a guard against a write slipping past the writer thread.
            conn.execute("PRAGMA query_only=ON")
    except sqlite3.Error as e:
        conn.close()
        raise StoreError(f"cannot open database {path}: {e}") from e
    return conn


class _Op:
    """One unit: fn(conn), whether its commit must be synced, whether anyone waits for it,
    the chain of units it depends on, and where its outcome goes: a stream's ticket, a
    concurrent future (`put`), or neither (a caller running its own batch takes it back)."""

    __slots__ = ("chain", "durable", "fn", "future", "lazy", "ticket")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        durable: bool,
        lazy: bool,
        chain: object | None,
        ticket: Ticket | None = None,
        future: Future[Any] | None = None,
    ) -> None:
        self.fn = fn
        self.durable = durable
        self.lazy = lazy
        self.chain = chain
        self.ticket = ticket
        self.future = future


class _Undo(Exception):
    """In a batch run without savepoints: a unit failed (the batch runs again, each unit in
    its own savepoint, so the failure is undone alone)."""


class Writer:
    """One write connection, one queue, one thread that commits whatever is queued."""

    def __init__(self, conn: sqlite3.Connection, *, where: str) -> None:
        conn.execute("PRAGMA busy_timeout=0")  # the writer waits for the lock itself
        # Every commit NORMAL; a durable one is synced by `_sync_wal` after it.
        conn.execute("PRAGMA synchronous=NORMAL")
        # The WAL is the database's file name (as SQLite resolved it) and "-wal".
        main = next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")
        self._wal_path = f"{main}-wal"
        self._wal_fd: int | None = None
        self._conn = conn
        self._where = where
        # A plain lock under the condition: the inline path takes it as a C context manager
        # (a Condition's own __enter__/__exit__ are Python calls, two a write).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[_Op] = deque()
        self._eager = 0  # queued units someone waits for
        self._running = False  # a transaction is open (on the writer thread or inline)
        self._sleeping = False  # the writer thread waits on the condition
        self._closed = False
        self.commits = 0  # for tests and the benchmark: how many transactions were committed
        self.syncs = 0  # of them, how many were synced to disk (durable commits)
        # Seconds spent running batches (SQL, commits, syncs, and waiting for the GIL between
        # statements): over wall time, how close the one writer is to saturation.
        self.busy_s = 0.0
        self._thread = threading.Thread(target=self._run, name=f"xclaw-writer {where}", daemon=True)
        self._thread.start()
        self._thread_id = self._thread.ident

    @property
    def thread(self) -> threading.Thread:
        """The one thread every write of this database runs on (tests check it)."""
        return self._thread

    def send(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        sync: Sync,
        /,
        *,
        chain: object | None,
        ticket: Ticket,
    ) -> None:
        """Queue fn(conn) for a stream: its outcome is delivered to `ticket` once fn's
        transaction — and so every unit queued before it — is committed (and synced, when
        `sync` is DURABLE; a LAZY one may wait a moment for company). Never blocks."""
        self._enqueue(_Op(fn, sync is Sync.DURABLE, sync is Sync.LAZY, chain, ticket))

    def put(self, fn: Callable[[sqlite3.Connection], T], sync: Sync) -> Future[T]:
        """Queue fn(conn); the future resolves once it is committed (synced when `sync` is
        DURABLE). Never blocks."""
        future: Future[T] = Future()
        # Handed over is written: a caller that stops waiting cannot withdraw it.
        future.set_running_or_notify_cancel()
        self._enqueue(_Op(fn, sync is Sync.DURABLE, False, None, future=future))
        return future

    def _enqueue(self, op: _Op) -> None:
        with self._cond:
            if self._closed:
                raise StoreError(f"the store for {self._where} is closed")
            self._queue.append(op)
            if not op.lazy:
                self._eager += 1
            # A busy writer takes the queue when its transaction ends; a lazy unit behind
            # others wakes nobody.
            if self._sleeping and (not op.lazy or len(self._queue) == 1):
                self._cond.notify()

    def submit(self, fn: Callable[[sqlite3.Connection], T], sync: Sync) -> T:
        """Run fn(conn) in the writer's next transaction and wait for its commit.

        A synchronous caller that finds the writer idle and nothing queued — and is not an
        event loop's thread — runs its transaction itself: nothing is waiting to go before
        it, and it saves the two thread wake-ups of a round trip through the writer thread
        (~0.1 ms each on a small VM, as much as the SQL of a step)."""
        if threading.get_ident() == self._thread_id:
            # A unit is a transaction body: it writes through its connection, never the store.
            raise RuntimeError("a store write from inside a write transaction")
        # Off any event loop; the non-raising form of the look: a write off any loop is the
        # common case, and a raised and caught RuntimeError costs more than the look itself.
        if asyncio._get_running_loop() is None:
            with self._lock:
                free = not (self._queue or self._running or self._closed)
                self._running = self._running or free
            if free:
                try:
                    return self._alone(fn, sync is Sync.DURABLE)
                finally:
                    with self._lock:
                        self._running = False
                        if self._queue or self._closed:
                            self._cond.notify()
        return self.put(fn, sync).result()

    def close(self) -> None:
        """Refuse new writes, commit every queued one, stop the thread, close the connection."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._conn.close()
        if self._wal_fd is not None:
            os.close(self._wal_fd)
            self._wal_fd = None

    # --- the writer thread ---------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self._queue or self._closed) or self._running:
                    self._sleeping = True
                    self._cond.wait()
                    self._sleeping = False
                if not self._queue:
                    return  # closed, and nothing left
                if not self._eager and not self._closed:
                    # Only units nobody waits for: give the next write a moment to join them.
                    self._sleeping = True
                    self._cond.wait_for(lambda: self._eager > 0 or self._closed, COALESCE_S)
                    self._sleeping = False
                n = min(len(self._queue), MAX_BATCH)
                batch = [self._queue.popleft() for _ in range(n)]
                self._eager -= sum(not op.lazy for op in batch)
                self._running = True
            try:
                self._run_batch(batch)
            finally:
                with self._cond:
                    self._running = False

    def _run_batch(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        """One transaction for the whole batch; then every unit's outcome, in queue order
        (delivered, and returned)."""
        started = time.perf_counter()
        try:
            return self._commit_batch(batch)
        finally:
            self.busy_s += time.perf_counter() - started

    def _alone(self, fn: Callable[[sqlite3.Connection], T], durable: bool) -> T:
        """One unit as its own transaction, run by the caller that found the writer idle
        (`submit`): what `_run_batch` does with a batch of one, without the batch. The
        transaction is the unit's savepoint, so a failing unit runs once (a batch runs it
        again in a savepoint) and is rolled back; its caller gets the error `_wrap` gives."""
        started = time.perf_counter()
        conn = self._conn
        try:
            self._begin(conn)
            try:
                value = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self.commits += 1
            if durable:  # before the caller hears of it: nobody hears of it unsynced
                self._sync_wal()
            return value
        except Exception as e:  # noqa: BLE001 - the caller's error, in words
            err = _wrap(e, self._where)
        finally:
            self.busy_s += time.perf_counter() - started
        raise err

    def _commit_batch(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        # Whether to sync comes from the queued units (writes.SYNC for a stream's): a batch
        # holding one durable unit is synced.
        durable = any(op.durable for op in batch)
        try:
            try:
                outcomes = self._transaction(batch, durable, safe=False)
            except _Undo:  # a unit failed: again, each one undone alone if it fails
                outcomes = self._transaction(batch, durable, safe=True)
        except BaseException as e:  # nothing committed (or its sync failed): every caller hears why
            err = _wrap(e, self._where)
            outcomes = [(False, err)] * len(batch)
            _resolve(batch, outcomes)
            if not isinstance(e, Exception):
                raise
            return outcomes
        _resolve(batch, outcomes)
        return outcomes

    def _transaction(self, batch: list[_Op], durable: bool, safe: bool) -> list[tuple[bool, Any]]:
        conn = self._conn
        self._begin(conn)
        try:
            outcomes = self._units(batch) if safe else self._units_at_once(batch)
            if not safe or any(ok for ok, _ in outcomes):  # at once: every unit succeeded
                conn.execute("COMMIT")
                self.commits += 1
            else:
                conn.execute("ROLLBACK")
                return outcomes
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if durable:  # before any outcome is delivered: nobody hears of it unsynced
            self._sync_wal()
        return outcomes

    def _begin(self, conn: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE, tried straight; the busy loop only once it meets a lock."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:  # another process's transaction: wait for it
            if not is_busy(e):
                raise
            retry_while_busy(
                lambda: conn.execute("BEGIN IMMEDIATE"),
                self._where,
                first_pause=WRITE_LOCK_FIRST_PAUSE_S,
                max_pause=WRITE_LOCK_MAX_PAUSE_S,
            )

    def _units_at_once(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        """Every unit straight in the transaction; the first failure undoes the attempt."""
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        for op in batch:
            try:
                outcomes.append((True, op.fn(conn)))
            except Exception:  # noqa: BLE001 - run again in savepoints, where it fails alone
                raise _Undo from None
        return outcomes

    def _units(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        """Each unit in its own savepoint; a chain that failed runs no further units."""
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        failed: dict[int, BaseException] = {}
        for op in batch:
            if op.chain is not None and id(op.chain) in failed:
                outcomes.append((False, failed[id(op.chain)]))
                continue
            try:
                if len(batch) == 1:  # alone: the transaction is its savepoint
                    value = op.fn(conn)
                else:
                    value = self._in_savepoint("xclaw_unit", lambda: op.fn(conn))  # noqa: B023 - called at once
            except Exception as e:  # noqa: BLE001 - this unit's caller's error
                err = _wrap(e, self._where)
                outcomes.append((False, err))
                if op.chain is not None:
                    failed[id(op.chain)] = err
                continue
            outcomes.append((True, value))
        return outcomes

    def _in_savepoint(self, name: str, fn: Callable[[], T]) -> T:
        """fn() inside SAVEPOINT `name` of the open transaction: undone alone if it raises
        (the exception goes on to the caller)."""
        conn = self._conn
        conn.execute(f"SAVEPOINT {name}")
        try:
            result = fn()
        except Exception:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return result

    def _sync_wal(self) -> None:
        """The WAL file, and so every commit in it, on disk: what synchronous=FULL does at a
        commit in WAL mode (fdatasync on Linux, as SQLite's unix VFS does).

        Through a descriptor of our own, kept open: SQLite holds no lock on the WAL file (its
        locks are on the database and -shm files, where closing a second descriptor would drop
        them), and a sync flushes the file whichever descriptor names it. A WAL deleted
        meanwhile (no link left) is opened again by name; one that is gone was checkpointed
        into the database file, synced, by whoever removed it. A failed sync fails the
        batch's units: their commit is made but the disk did not confirm it."""
        try:
            fd = self._wal_fd
            if fd is None or os.fstat(fd).st_nlink == 0:
                if fd is not None:
                    self._wal_fd = None
                    os.close(fd)
                try:
                    fd = self._wal_fd = os.open(self._wal_path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:
                    return
            _datasync(fd)
        except OSError as e:
            raise StoreError(
                f"{self._where}: the commit was written but the disk did not confirm it "
                f"(syncing {self._wal_path} failed: {e}); it may be lost in a power loss"
            ) from e
        self.syncs += 1


# What SQLite's unix VFS syncs with where it exists (Linux); fsync elsewhere (macOS, where
# SQLite too calls plain fsync unless `PRAGMA fullfsync` is on).
_datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


def _resolve(batch: list[_Op], outcomes: list[tuple[bool, Any]]) -> None:
    streamed: list[tuple[Ticket, bool, Any]] = []
    for op, (ok, value) in zip(batch, outcomes, strict=True):
        if op.ticket is not None:
            streamed.append((op.ticket, ok, value))
        elif op.future is not None:
            if ok:
                op.future.set_result(value)
            else:
                op.future.set_exception(value)
    if streamed:
        deliver(streamed)


def disk_full(e: BaseException, where: str) -> DiskFull | None:
    """The words for a write the full disk refused (at any write, opening included)."""
    if not (isinstance(e, sqlite3.OperationalError) and "full" in str(e)):
        return None
    err = DiskFull(
        f"the disk holding {where} is full: the write was refused and rolled back, nothing "
        "committed is lost; free some space, then resume the session"
    )
    err.__cause__ = e
    return err


def _wrap(e: BaseException, where: str) -> BaseException:
    """Our own errors pass through; raw database errors become a StoreError with words."""
    if isinstance(e, XclawError) or not isinstance(e, sqlite3.Error):
        return e
    if is_busy(e):
        return busy_error(where)
    if (full := disk_full(e, where)) is not None:
        return full
    failed = StoreError(f"database error on {where}: {e}")
    failed.__cause__ = e
    return failed
