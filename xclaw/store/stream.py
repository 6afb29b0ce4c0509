"""WriteStream: one run's writes, handed to the store's writer in event order.

This is the store call under the write-ahead rule (docs/architecture.md). `put(unit,
durable=...)` hands a unit — a callable that writes through the store, e.g. `lambda:
store.begin_step(...)` — to the backend's writer and returns a future that resolves once that
unit, and every unit put before it on the same stream, is committed; synced to disk when
`durable` (a synced commit makes every earlier commit of the log durable too). The caller
never blocks: it awaits the future (`asyncio.wrap_future`) only when it must know — before a
tool starts, before a client hears of a result — and lets the other writes go.

How the units become transactions is the backend's business, invisible here: SQLite's one
writer thread commits whatever is queued as one transaction (store/sqlite_writer.py);
PostgreSQL runs each stream's queued units as one transaction of its pool, on a worker thread
(`SerialBatches`). Either way the order on disk is the order of `put`, and a unit that fails
breaks the stream: the units after it fail with the same error, unrun, since each may depend
on the ones before (the step an answer completes, the parent a step hangs under).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

Unit = Callable[[], Any]


class Send(Protocol):
    """A backend's writer: commit `unit` after every unit sent before it with the same
    `chain`; the future resolves after the commit (synced if `durable`) and cannot be
    cancelled. `lazy`: nobody waits for it yet, it may wait a moment for company."""

    def __call__(self, unit: Unit, *, durable: bool, lazy: bool, chain: object) -> Future[Any]: ...


class WriteStream:
    """Ordered writes of one run (a main agent and its sub-agents share one)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._broken: BaseException | None = None
        self._last: Future[Any] | None = None

    def put(self, unit: Callable[[], T], *, durable: bool, lazy: bool = False) -> Future[T]:
        """Hand `unit` to the writer; the future resolves once it and every earlier unit of
        this stream are committed (and synced, if `durable`). Never blocks."""
        if self._broken is not None:
            failed: Future[T] = Future()
            failed.set_exception(self._broken)
            return failed

        def guarded() -> T:
            # Put before an earlier unit's failure was known: it depended on that unit.
            if self._broken is not None:
                raise self._broken
            return unit()

        future: Future[T] = self._send(guarded, durable=durable, lazy=lazy, chain=self)
        future.add_done_callback(self._settled)
        self._last = future
        return future

    def last(self) -> Future[Any] | None:
        """The future of the latest unit put: once it resolves, every unit is settled."""
        return self._last

    def _settled(self, future: Future[Any]) -> None:
        # Runs on the writer's thread before it starts the next transaction.
        error = future.exception()
        if error is not None and self._broken is None:
            self._broken = error


class SerialBatches:
    """A stream's writer on a backend with many connections (PostgreSQL): the units queued
    when a worker thread gets to them go as one transaction (`run_units`: in order, stopping
    at the first failure), one batch at a time, so the stream's order is kept while other
    streams commit in parallel."""

    def __init__(
        self,
        run_units: Callable[[Sequence[Unit], bool], list[tuple[bool, Any]]],
        executor: Executor,
    ) -> None:
        self._run_units = run_units
        self._executor = executor
        self._lock = threading.Lock()
        self._queue: list[tuple[Unit, bool, Future[Any]]] = []
        self._running = False

    def __call__(self, unit: Unit, *, durable: bool, lazy: bool, chain: object) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()  # handed over is written
        with self._lock:
            self._queue.append((unit, durable, future))
            start = not self._running
            self._running = True
        if start:
            self._executor.submit(self._drain)
        return future

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                batch, self._queue = self._queue, []
            try:
                out = self._run_units([u for u, _, _ in batch], any(d for _, d, _ in batch))
            except BaseException as e:  # noqa: BLE001 - the commit failed: the whole batch with it
                out = [(False, e)]
            error: BaseException | None = None
            for i, (_, _, future) in enumerate(batch):
                if error is None and i < len(out) and out[i][0]:
                    future.set_result(out[i][1])
                    continue
                if error is None:
                    error = out[i][1] if i < len(out) else RuntimeError("a unit was not run")
                future.set_exception(error)
