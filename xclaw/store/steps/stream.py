"""[store/steps] WriteStream: one run's writes, handed to the store's writer in event order.

This is the store call under the write-ahead rule (docs/architecture.md). `put(write)`,
called on the run's event loop, hands a write — a value of store/steps/writes.py (`BeginStep`,
`FinishStep`, ...), never code — to the backend's writer and returns an asyncio future that
resolves once that write, and every write put before it on the same stream, is committed;
synced to disk when the table of store/steps/writes.py (`SYNC`) says its kind must be (a synced
commit makes every earlier commit of the log durable too). The caller never blocks: it
awaits the future only when it must know — before a tool starts, before a client hears of a
result — and lets the other writes go. A stream opened with a lease (`write_stream(lease)`)
fences every step write put on it with that lease's token.

How writes become transactions is the backend's business, invisible here: SQLite's one writer
thread commits whatever is queued as one transaction (store/sqlite/writer.py); PostgreSQL runs
each stream's queued writes as one transaction of its pool, on a worker thread
(`SerialBatches`). Either way the order on disk is the order of `put`, and a write that fails
breaks the stream: the writes after it fail with the same error, unrun, since each may depend
on the ones before (the step an answer completes, the parent a step hangs under).

Outcomes come back through `deliver`, once per transaction, on the writer's thread: each
stream hears of a failure at once (before the writer starts its next transaction), and each
event loop gets one callback that resolves all of that transaction's futures, in order. No
concurrent.futures.Future per write: its Condition, RLock and the two-way chain that
`asyncio.wrap_future` builds (a reference cycle left to the garbage collector) cost more than
a step's SQL on a busy server (bench/HISTORY.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

from xclaw.store.leases import Lease
from xclaw.store.steps.writes import Sync, TxBodies, Write, apply, sync_of

# What a writer runs for one write: a function of its open transaction's connection.
Unit = Callable[[Any], Any]


class Ticket:
    """Where one unit's outcome goes: the future its caller awaits, on the loop that put it,
    and the stream, which a failure breaks."""

    __slots__ = ("future", "loop", "stream")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], stream: WriteStream
    ) -> None:
        self.loop = loop
        self.future = future
        self.stream = stream


def deliver(outcomes: Sequence[tuple[Ticket, bool, Any]]) -> None:
    """Called by a writer thread once per transaction with (ticket, ok, value) of each unit
    in queue order: streams learn of failures now; each loop resolves its futures in one
    callback (call_soon_threadsafe is a wake-up of the loop: one per transaction, not per write)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    for ticket, ok, value in outcomes:
        if not ok:
            ticket.stream._break(value)
        items = by_loop.get(ticket.loop)
        if items is None:
            items = by_loop[ticket.loop] = []
        items.append((ticket.future, ok, value))
    for loop, items in by_loop.items():
        # A closed loop: nobody waits for these any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, items)


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in items:
        if future.done():  # the caller stopped waiting (cancelled): the write stands anyway
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class Send(Protocol):
    """A backend's writer: commit `unit` after every unit sent before it with the same
    `chain`, then `deliver` its outcome to `ticket` (after the commit, synced if `sync` is
    DURABLE; LAZY: nobody waits for it yet, it may wait a moment for company). Never blocks."""

    def __call__(self, unit: Unit, sync: Sync, /, *, chain: object, ticket: Ticket) -> None: ...


class WriteStream:
    """Ordered writes of one run (a main agent and its sub-agents share one)."""

    def __init__(self, send: Send, bodies: TxBodies, lease: Lease | None = None) -> None:
        self._send = send
        self._bodies = bodies
        self.lease = lease
        self._broken: BaseException | None = None
        self._last: asyncio.Future[Any] | None = None

    def put(self, write: Write) -> asyncio.Future[Any]:
        """Hand `write` to the writer; the future resolves once it and every earlier write of
        this stream are committed (and synced, if its kind must be: writes.SYNC). Call it on
        the run's event loop; never blocks. The write is handed over for good: cancelling the
        future only stops the waiting."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._last = future
        if self._broken is not None:
            future.set_exception(self._broken)
            return future
        bodies, lease = self._bodies, self.lease

        def unit(conn: Any) -> Any:
            # Put before an earlier write's failure was known: it depended on that write.
            if self._broken is not None:
                raise self._broken
            return apply(bodies, conn, write, lease)

        self._send(unit, sync_of(write), chain=self, ticket=Ticket(loop, future, self))
        return future

    def last(self) -> asyncio.Future[Any] | None:
        """The future of the latest unit put: once it resolves, every unit is settled."""
        return self._last

    def _break(self, error: BaseException) -> None:
        # On the writer's thread, before it starts the next transaction.
        if self._broken is None:
            self._broken = error


class SerialBatches:
    """A stream's writer on a backend with many connections (PostgreSQL): the units queued
    when a worker thread gets to them go as one transaction (`run_units`: in order, stopping
    at the first failure), one batch at a time, so the stream's order is kept while other
    streams commit in parallel."""

    def __init__(
        self,
        run_units: Callable[[Sequence[Unit], Sync], list[tuple[bool, Any]]],
        executor: Executor,
    ) -> None:
        self._run_units = run_units
        self._executor = executor
        self._lock = threading.Lock()
        self._queue: list[tuple[Unit, bool, Ticket]] = []  # (unit, synced, ticket)
        self._running = False

    def __call__(self, unit: Unit, sync: Sync, /, *, chain: object, ticket: Ticket) -> None:
        with self._lock:
            self._queue.append((unit, sync is Sync.DURABLE, ticket))
            start = not self._running
            self._running = True
        if start:
            self._executor.submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                batch, self._queue = self._queue, []
            try:
                synced = any(d for _, d, _ in batch)
                out = self._run_units(
                    [u for u, _, _ in batch], Sync.DURABLE if synced else Sync.RELAXED
                )
            except BaseException as e:  # noqa: BLE001 - the commit failed: the whole batch with it
                out = [(False, e)]
            outcomes: list[tuple[Ticket, bool, Any]] = []
            error: BaseException | None = None
            for i, (_, _, ticket) in enumerate(batch):
                if error is None and i < len(out) and out[i][0]:
                    outcomes.append((ticket, True, out[i][1]))
                    continue
                if error is None:
                    error = out[i][1] if i < len(out) else RuntimeError("a unit was not run")
                outcomes.append((ticket, False, error))
            deliver(outcomes)
