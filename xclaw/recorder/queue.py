"""Ordered store writes of one run, sharing commits and thread hops instead of paying one each.

A hop from the event loop to a store thread and back costs ~0.1-0.2 ms on a small VM — as much
as a commit. The recorder queues its writes here in event order; whatever is queued when the
drainer runs goes to the store together as dependent units (`Store.write_together`): in order,
each all-or-nothing, in one transaction where their durability allows. The leading writes
that need no disk sync are written at once on the loop when the writer is free (no hop at
all); the rest — from the first write that must be durable, such as a tool's write-ahead row
(write-ahead) — go to a store thread in one hop. Writes that nothing waits for (an LLM call
starting, its answer when tool calls follow) ride along with the next one
that is awaited, so the order on disk is the order of events and the write-ahead rule is
untouched: a tool starts only after its own row *and every earlier write* are committed.

A write nobody waits for is held at most COALESCE_S before the drainer starts (as
PostgreSQL's commit_delay does), so that it shares its commit with the writes around it: a
fast model's answer and the next tool's write-ahead row take one commit, not three. (A tool's
result is awaited and durable: clients are told of it only once it is on disk.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from xclaw.recorder.caller import StoreCaller
from xclaw.store.model import Step

log = logging.getLogger("xclaw.recorder")

COALESCE_S = 0.002


class Pending:
    """A queued write. `step` is set in the store thread the moment the write commits, so a
    later write of the same batch can refer to it (e.g. complete the step this one began)."""

    __slots__ = ("error", "fn", "future", "step", "urgent")

    def __init__(
        self, fn: Callable[[], Step], future: asyncio.Future[Step], urgent: bool = False
    ) -> None:
        self.fn = fn
        self.urgent = urgent  # someone awaits it: drain now, and expect a durable commit
        self.step: Step | None = None
        self.error: BaseException | None = None
        self.future = future

    def run(self) -> Step:
        """The unit given to the store (in whichever thread writes it)."""
        self.step = self.fn()
        return self.step

    def resolved(self) -> Step:
        """The committed step (called in the store thread, after this write ran)."""
        if self.step is None:
            raise RuntimeError("a write was used before it was committed")
        return self.step


def step_id_of(ref: str | Pending | None) -> str | None:
    """A parent reference that may still be queued: resolved in the store thread."""
    return ref.resolved().step_id if isinstance(ref, Pending) else ref


class WriteQueue:
    def __init__(self, db: StoreCaller) -> None:
        self.db = db
        self._queue: list[Pending] = []
        self._drainer: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._broken: BaseException | None = None

    def submit(
        self,
        fn: Callable[[], Step],
        on_done: Callable[[Step], Any] | None = None,
        *,
        urgent: bool = False,
    ) -> Pending:
        """Queue a write; `on_done` runs on the loop once it is committed (live events).
        `urgent`: the caller will await it (drain now, not after COALESCE_S)."""
        future: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)
        if on_done is not None:
            future.add_done_callback(
                lambda f: f.cancelled() or f.exception() or on_done(f.result())
            )
        pending = Pending(fn, future, urgent)
        if self._broken is not None:
            future.set_exception(self._broken)
            return pending
        self._queue.append(pending)
        if urgent:
            self._start_drain()
        elif self._timer is None and not self._draining:
            self._timer = asyncio.get_running_loop().call_later(COALESCE_S, self._start_drain)
        return pending

    async def write(
        self, fn: Callable[[], Step], on_done: Callable[[Step], Any] | None = None
    ) -> Step:
        """Queue a write and wait until it — and everything queued before it — is committed."""
        return await self.submit(fn, on_done, urgent=True).future

    async def settle(self) -> None:
        """Write everything queued now and wait for it (errors are the waiters' business)."""
        if self._queue:
            self._start_drain()
        while self._draining:
            await asyncio.shield(self._drainer)  # type: ignore[arg-type]

    @property
    def _draining(self) -> bool:
        return self._drainer is not None and not self._drainer.done()

    def _start_drain(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._draining:  # a running drainer takes whatever is queued next
            self._drainer = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        store = self.db.store
        while self._queue:
            batch, self._queue = self._queue, []
            units = [p.run for p in batch]
            # Someone awaits this batch: a write-ahead row, an approval, the final answer.
            durable = any(p.urgent for p in batch)
            done: list[tuple[bool, Any]] = []
            try:
                # On the loop, if the writer is free: the leading writes that need no sync.
                done = store.write_together(units, wait=False, durable=durable)
                if len(done) < len(batch) and (not done or done[-1][0]):
                    done += await self.db(store.write_together, units[len(done) :], durable=durable)
            except asyncio.CancelledError:
                for p in batch:
                    if not p.future.done():
                        p.future.cancel()
                raise
            except Exception as e:  # noqa: BLE001 - a commit or the hop failed: what came before it stays written
                done = [*done, (False, e)]
            self._settle_batch(batch, done)
            self._resolve(batch)

    @staticmethod
    def _settle_batch(batch: list[Pending], done: list[tuple[bool, Any]]) -> None:
        """Outcomes onto the writes; the ones after a failure fail with it (not run)."""
        failed: BaseException | None = None
        for i, p in enumerate(batch):
            if failed is None and i < len(done) and not done[i][0]:
                failed = done[i][1]
            if failed is not None:
                p.step = None
                p.error = failed

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
