"""SQLite connections and the single writer (group commit) behind SQLiteStore.

Why one writer: SQLite allows one writer at a time anyway; funnelling every write of the
process through one queue and one write connection means no two of our own threads ever fight
over the write lock, and lets whoever holds the connection batch everything pending into one
transaction and one disk sync (group commit across sessions). Each operation runs inside its
own SAVEPOINT, so a failing operation rolls back alone and only its caller sees the exception.

Who runs the batch: the calling threads themselves, one at a time ("leader/follower" group
commit, as in LevelDB's write queue). A caller that finds no leader becomes the leader, runs
batches until its own operation is committed, then hands the lead to the oldest waiting caller.
A dedicated writer thread was measured first: each call then pays two cross-thread wake-ups
(~90-110 us per round trip on the benchmark VM), which is more than the whole SQL work of a
step; with a leader, an uncontended call runs with no hand-off at all, and contended calls
still share one commit. A waiting caller blocks on a per-operation Event.

Durability is chosen per commit (see docs/storage.md): a batch containing any operation marked
`durable` commits with synchronous=FULL (the WAL is fsynced, which also makes every earlier
commit durable); any other batch commits with synchronous=NORMAL (in the OS page cache before
the commit returns: survives a process kill, not necessarily a power loss).

Units (`run_units`): a caller with several dependent writes in hand (the recorder's queue of
one run) queues them as one operation of *units*, each unit in its own savepoint, instead of
one operation per write; several callers' units share the leader's batch like any other
operations (group commit across sessions). A batch starts at NORMAL unless an operation is
known to be durable; the first unit write that must be durable ends the transaction there and
the batch continues in a FULL one, so a batch costs at most two commits and one sync. (The
callers of a batch so split hear of its outcome once both are committed; should the second
fail, all of them get the error, including those whose writes the first one kept.)

With `wait=False` (called on an event loop) the units run only if the writer is free at once,
and stop before the first write that must be durable: the loop never waits for a lock, a disk
sync or a checkpoint, and the caller sends what is left to a store thread.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from xclaw.errors import DiskFull, StoreError, XclawError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
# Another process (e.g. a CLI `xclaw rollback` while a server runs) may hold the write lock;
# busy_timeout waits up to 10 s per attempt, and we retry up to this long in total before
# telling the user, in words, what is going on.
BUSY_GIVE_UP_S = 60.0
MAX_BATCH = 256
WAL_AUTOCHECKPOINT_PAGES = 1000  # SQLite's default


def is_busy(e: BaseException) -> bool:
    return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))


def busy_error(where: str) -> StoreError:
    return StoreError(
        f"{where} stayed locked by another process for more than {BUSY_GIVE_UP_S:.0f} s; "
        "is another xclaw writing a very large change to it? Try again."
    )


def retry_while_busy(fn: Callable[[], T], where: str) -> T:
    """fn(), tried again while the database is locked, for up to BUSY_GIVE_UP_S.

    busy_timeout alone is not enough: SQLite answers some lock conflicts with SQLITE_BUSY at
    once, without calling the busy handler, when waiting could deadlock (two connections of a
    rollback-journal file both upgrading from SHARED, as when several processes open a new
    database and switch it to WAL at the same moment). Those are resolved by trying again.
    """
    deadline = time.monotonic() + BUSY_GIVE_UP_S
    pause = 0.001
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
        pause = min(pause * 2, 0.05)


def connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN/COMMIT ourselves) with foreign keys on
    and a busy timeout, usable from any thread: the write connection passes from leader to
    leader, and close() closes every reader's connection from its own thread."""
    try:
        conn = sqlite3.connect(
            path,
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


Outcome = tuple[bool, Any]  # (True, value) or (False, the exception), one per unit run


class _NeedsDurable(Exception):
    """Inside units run at NORMAL: this write must be durable (the unit is rolled back)."""


class _Tx:
    """The leader's open transaction: whether it will commit with FULL, how many operations
    it holds. While units run, nested writes of the leading thread join it."""

    __slots__ = ("durable", "written")

    def __init__(self, durable: bool) -> None:
        self.durable = durable
        self.written = 0


class _Op:
    """One queued operation and, once run, its outcome: fn(conn), or a list of units (whose
    outcome is the list of their outcomes)."""

    __slots__ = ("done", "durable", "error", "event", "fn", "result", "units")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any] | None,
        durable: bool,
        units: Sequence[Callable[[], Any]] | None = None,
    ) -> None:
        self.fn = fn
        self.durable = durable
        self.units = units
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        # Only a waiting caller needs one (created under the mutex before any leader can see
        # the op): set when the op is done, or to ask the caller to take the lead.
        self.event: threading.Event | None = None

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


# A waiting caller re-checks on this period whether the lead is free (a safety net: the
# normal path is an explicit wake-up).
_FOLLOWER_POLL_S = 0.25


class Writer:
    """One write connection, one queue; the thread holding the lead runs batched transactions."""

    def __init__(self, conn: sqlite3.Connection, *, where: str) -> None:
        self._conn = conn
        self._where = where
        self._mutex = threading.Lock()
        self._idle = threading.Condition(self._mutex)
        self._queue: deque[_Op] = deque()
        self._leading = False
        self._closed = False
        self._sync: str | None = None
        self._local = threading.local()  # .tx: the transaction this thread leads, while units run
        self.commits = 0  # for tests and the benchmark: how many transactions were committed

    def submit(self, fn: Callable[[sqlite3.Connection], T], *, durable: bool) -> T:
        """Run fn(conn) in the next transaction; return once that is committed (durable
        against power loss too when `durable`). Called from inside a unit, it joins the
        units' transaction instead."""
        tx: _Tx | None = getattr(self._local, "tx", None)
        if tx is not None:
            return self._nested(tx, fn, durable)
        return cast(T, self._queued(_Op(fn, durable)))  # the op's result is what fn returned

    def run_units(
        self, units: Sequence[Callable[[], Any]], *, wait: bool = True, durable: bool = False
    ) -> list[Outcome]:
        """Run callables that write through this writer, in order, in as few transactions as
        their durability allows (see the module docstring); one outcome per unit run. Each
        unit depends on the ones before: the first that fails is the last one run. A unit
        may be rolled back and run again, so it must only write through the store.

        wait=False: run now on the calling thread only if the writer is free, never waiting
        for a lock or a disk sync; it stops before the first unit that needs a durable
        commit, so it may run fewer units than given (none if the writer is busy).

        durable=True: the caller knows a unit needs a durable commit; one FULL transaction
        from the start instead of a NORMAL one and then a FULL one (runs nothing if not wait).
        """
        if wait:
            result: list[Outcome] = self._queued(_Op(None, durable, units))
            return result
        if durable:
            return []
        with self._mutex:
            if self._closed:
                raise StoreError(f"the store for {self._where} is closed")
            if self._leading or self._queue:
                return []
            self._leading = True
        try:
            return self._run_units_now(units)
        finally:
            self._release_lead()

    def _queued(self, op: _Op) -> Any:
        with self._mutex:
            if self._closed:
                raise StoreError(f"the store for {self._where} is closed")
            self._queue.append(op)
            lead = not self._leading
            if lead:
                self._leading = True
            else:
                event = op.event = threading.Event()
        while not lead:
            event.wait(_FOLLOWER_POLL_S)
            event.clear()
            if op.done:  # written before the event is set: no lost wake-up
                return op.outcome()
            with self._mutex:
                if not self._leading:  # handed to us, or the leader left: take the lead
                    self._leading = lead = True
        self._lead(op)
        return op.outcome()

    def close(self) -> None:
        """Refuse new writes, finish every queued one, close the connection."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        while True:
            with self._mutex:
                while self._leading:
                    self._idle.wait()
                if not self._queue:
                    break
                self._leading = True
            self._lead(None)
        self._conn.close()

    # --- the leader ----------------------------------------------------------------------
    def _lead(self, own: _Op | None) -> None:
        """Run batches until `own` is committed (None: until the queue is empty), then pass
        the lead to the oldest waiting caller."""
        try:
            while True:
                with self._mutex:
                    if not self._queue or (own is not None and own.done):
                        return
                    n = min(len(self._queue), MAX_BATCH)
                    batch = [self._queue.popleft() for _ in range(n)]
                try:
                    self._run_batch(batch)
                finally:
                    for op in batch:
                        if op.event is not None:
                            op.event.set()
        finally:
            self._release_lead()

    def _release_lead(self) -> None:
        with self._mutex:
            self._leading = False
            nxt = next((op for op in self._queue if op.event is not None), None)
            self._idle.notify_all()
        if nxt is not None:
            nxt.event.set()  # type: ignore[union-attr]  # its caller takes the lead

    # --- units -----------------------------------------------------------------------------
    def _run_units_now(self, units: Sequence[Callable[[], Any]]) -> list[Outcome]:
        """run_units(wait=False), on the calling thread which holds the lead: at NORMAL,
        without waiting for another process's lock, up to the first unit needing a sync."""
        conn = self._conn
        tx = _Tx(durable=False)
        out: list[Outcome] = []
        self._set_sync("NORMAL")
        # On an event loop: never wait for another process's lock, and leave WAL checkpoints
        # (which sync) to the next commit made on a store thread.
        conn.execute("PRAGMA busy_timeout=0")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if is_busy(e):
                    return out
                raise
            try:
                out = self._units_in_tx(units, tx, stop_at_durable=True)
                self._end_tx(tx)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        return out

    def _units_in_tx(
        self, units: Sequence[Callable[[], Any]], tx: _Tx, *, stop_at_durable: bool
    ) -> list[Outcome]:
        """Each unit in a savepoint of the open transaction, until the first failure. A unit
        whose write needs a sync in a NORMAL transaction is undone, then either ends the run
        (stop_at_durable) or runs again after the transaction is committed and a FULL one
        begun."""
        out: list[Outcome] = []
        self._local.tx = tx
        try:
            i = 0
            while i < len(units):
                try:
                    value = self._in_savepoint("xclaw_unit", units[i])
                except _NeedsDurable:
                    if stop_at_durable:
                        break
                    self._end_tx(tx)
                    tx.durable = True
                    self._set_sync("FULL")
                    self._begin()
                    continue
                except Exception as e:  # noqa: BLE001 - this unit's outcome; the later ones depend on it
                    out.append((False, e))
                    break
                out.append((True, value))
                tx.written += 1
                i += 1
        finally:
            self._local.tx = None
        return out

    def _end_tx(self, tx: _Tx) -> None:
        """Commit the open transaction (an empty one is just ended)."""
        self._conn.execute("COMMIT" if tx.written else "ROLLBACK")
        self.commits += tx.written > 0
        tx.written = 0

    def _nested(self, tx: _Tx, fn: Callable[[sqlite3.Connection], T], durable: bool) -> T:
        """A store write made by a unit: a savepoint in the leader's open transaction."""
        if durable and not tx.durable:
            raise _NeedsDurable
        try:
            return self._in_savepoint("xclaw_write", lambda: fn(self._conn))
        except Exception as e:  # noqa: BLE001 - this write alone is undone; its caller hears why
            raise _wrap(e, self._where) from None

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

    def _set_sync(self, level: str) -> None:
        # Outside any transaction: the level applies to the next commit.
        if level != self._sync:
            self._conn.execute(f"PRAGMA synchronous={level}")
            self._sync = level

    def _begin(self) -> None:
        retry_while_busy(lambda: self._conn.execute("BEGIN IMMEDIATE"), self._where)

    def _run_batch(self, batch: list[_Op]) -> None:
        """One transaction for the whole batch — two if a NORMAL batch meets a unit that
        needs a sync; every op ends finished (result or error)."""
        conn = self._conn
        done: list[tuple[_Op, Any]] = []
        failed: list[tuple[_Op, Exception]] = []
        tx = _Tx(durable=any(op.durable for op in batch))
        try:
            self._set_sync("FULL" if tx.durable else "NORMAL")
            self._begin()
            if len(batch) == 1 and batch[0].fn is not None:
                # One operation: the transaction itself is its savepoint.
                done.append((batch[0], batch[0].fn(conn)))
                tx.written += 1
            else:
                for op in batch:
                    if op.units is not None:
                        done.append((op, self._units_in_tx(op.units, tx, stop_at_durable=False)))
                        continue
                    fn = op.fn
                    assert fn is not None
                    try:
                        result = self._in_savepoint("op", lambda: fn(conn))  # noqa: B023 - called at once
                    except Exception as e:  # noqa: BLE001 - it is this op's caller's error
                        failed.append((op, e))
                        continue
                    done.append((op, result))
                    tx.written += 1
            self._end_tx(tx)
        except BaseException as e:  # every caller of the batch hears of it
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            err = _wrap(e, self._where)
            own_errors = {id(op) for op, _ in failed}
            for op in batch:
                if id(op) not in own_errors:
                    op.finish(error=err)
            for op, exc in failed:
                op.finish(error=_wrap(exc, self._where))
            if not isinstance(e, Exception):
                raise  # KeyboardInterrupt and friends still stop the leader's own thread
            return
        for op, result in done:
            op.finish(result)
        for op, exc in failed:
            op.finish(error=_wrap(exc, self._where))


def _wrap(e: BaseException, where: str) -> BaseException:
    """Our own errors pass through; raw database errors become a StoreError with words."""
    if isinstance(e, XclawError) or not isinstance(e, sqlite3.Error):
        return e
    if is_busy(e):
        return busy_error(where)
    if isinstance(e, sqlite3.OperationalError) and "full" in str(e):
        err = DiskFull(
            f"the disk holding {where} is full: the write was refused and rolled back, nothing "
            "committed is lost; free some space, then resume the session"
        )
        err.__cause__ = e
        return err
    failed = StoreError(f"database error on {where}: {e}")
    failed.__cause__ = e
    return failed
