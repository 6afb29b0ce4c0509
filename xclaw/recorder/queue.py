"""Ordered store writes of one run, with one thread hop per batch instead of one per write.

A hop from the event loop to a store thread and back costs ~0.1 ms on a small VM — as much as
a commit. The recorder queues its writes here in event order; whatever is queued when the
drainer runs goes to the store thread together, each write still its own transaction, in
order. Writes that nothing waits for (an LLM call starting, its answer when tool calls follow)
ride along with the next one that is awaited (the write-ahead row of a tool, invariant 1), so
the order on disk is the order of events and the write-ahead rule is untouched: a tool starts
only after its own row *and every earlier write* are committed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from xclaw.recorder.caller import StoreCaller
from xclaw.store.model import Step

log = logging.getLogger("xclaw.recorder")


class Pending:
    """A queued write. `step` is set in the store thread the moment the write commits, so a
    later write of the same batch can refer to it (e.g. complete the step this one began)."""

    __slots__ = ("error", "fn", "future", "step")

    def __init__(self, fn: Callable[[], Step], future: asyncio.Future[Step]) -> None:
        self.fn = fn
        self.step: Step | None = None
        self.error: BaseException | None = None
        self.future = future

    def resolved(self) -> Step:
        """The committed step (called in the store thread, after this write ran)."""
        if self.step is None:
            raise RuntimeError("a write was used before it was committed")
        return self.step


def step_id_of(ref: str | Pending | None) -> str | None:
    """A parent reference that may still be queued: resolved in the store thread."""
    return ref.resolved().step_id if isinstance(ref, Pending) else ref


def _apply(batch: list[Pending]) -> None:
    """In the store thread: run the writes in order; after a failure the rest fail with it
    (each depends on the ones before)."""
    failed: BaseException | None = None
    for p in batch:
        if failed is not None:
            p.error = failed
            continue
        try:
            p.step = p.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting coroutine
            p.error = failed = e


class WriteQueue:
    def __init__(self, db: StoreCaller) -> None:
        self.db = db
        self._queue: list[Pending] = []
        self._drainer: asyncio.Task[None] | None = None
        self._broken: BaseException | None = None

    def submit(self, fn: Callable[[], Step], on_done: Callable[[Step], Any] | None = None) -> Pending:
        """Queue a write; `on_done` runs on the loop once it is committed (live frames)."""
        future: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        if on_done is not None:
            future.add_done_callback(lambda f: f.cancelled() or f.exception() or on_done(f.result()))
        pending = Pending(fn, future)
        if self._broken is not None:
            future.set_exception(self._broken)
            return pending
        self._queue.append(pending)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.ensure_future(self._drain())
        return pending

    async def write(self, fn: Callable[[], Step], on_done: Callable[[Step], Any] | None = None) -> Step:
        """Queue a write and wait until it — and everything queued before it — is committed."""
        return await self.submit(fn, on_done).future

    async def settle(self) -> None:
        """Wait for every queued write (errors are the waiters' business, not ours)."""
        while self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await self.db(_apply, batch)
            except asyncio.CancelledError:
                for p in batch:
                    if not p.future.done():
                        p.future.cancel()
                raise
            except Exception as e:  # noqa: BLE001 - the hop itself failed (executor gone): every waiter hears it
                for p in batch:
                    if p.step is None and p.error is None:
                        p.error = e
            self._resolve(batch)

    def _resolve(self, batch: list[Pending]) -> None:
        for p in batch:
            if p.future.done():
                continue
            if p.error is not None:
                self._broken = self._broken or p.error
                p.future.set_exception(p.error)
            else:
                p.future.set_result(p.resolved())
        if self._broken is not None:  # later writes depended on the failed one
            for p in self._queue:
                if not p.future.done():
                    p.future.set_exception(self._broken)
            self._queue = []


def _retrieve(f: asyncio.Future[Step]) -> None:
    """Queued writes nobody awaits still have their failure logged, never silently dropped."""
    if not f.cancelled() and f.exception() is not None:
        log.debug("queued store write failed: %r", f.exception())
