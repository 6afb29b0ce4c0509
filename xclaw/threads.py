"""[xclaw] Blocking calls off the event loop: a few threads, and results back as asyncio futures.

What `loop.run_in_executor` and `asyncio.to_thread` do, minus concurrent.futures: their Future
carries a Condition and an RLock, and `wrap_future` chains it to an asyncio future both ways (a
reference cycle left to the garbage collector). A hop through them measured ~11-14 µs of CPU
on this project's 2-CPU VM, a hop through `BlockingCalls` ~2 µs (bench/HISTORY.md, "1,000
paced sessions: where the time went"); the store is called this way several times per step.

Threads start on demand, up to `max_threads`, and stay. The call's context variables are not
carried over (as with run_in_executor): store and file-system calls do not read any.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

_Item = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class BlockingCalls:
    """A pool of threads for blocking calls made from event loops."""

    def __init__(self, max_threads: int = 64, name: str = "xclaw-blocking") -> None:
        self._max = max_threads
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # starting and stopping threads only
        self._threads: list[threading.Thread] = []
        self._closed = False
        # Calls handed in and calls finished, counted without a lock (itertools.count is
        # atomic): a lock shared with the workers convoys behind the GIL under load.
        self._handed = itertools.count(1)
        self._finished_counter = itertools.count(1)
        self._finished = 0

    async def call(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """fn(*args, **kwargs) on one of the pool's threads. Cancelling the caller stops
        the waiting, not the call (as with run_in_executor)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.submit(loop, future, partial(fn, *args, **kwargs) if args or kwargs else fn)
        return await future

    def submit(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], fn: Callable[[], Any]
    ) -> None:
        """Run fn() on a pool thread; its outcome resolves `future` on `loop`."""
        if self._closed:
            raise RuntimeError(f"{self._name}: the pool is shut down")
        unfinished = next(self._handed) - self._finished  # this one included
        self._queue.put((loop, future, fn))
        if unfinished > len(self._threads) and len(self._threads) < self._max:
            self._start_thread()

    def _start_thread(self) -> None:
        with self._lock:
            if self._closed or len(self._threads) >= self._max:
                return
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def shutdown(self, wait: bool = True) -> None:
        """Let queued calls finish, then stop the threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, future, fn = item
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as e:  # noqa: BLE001 - the caller's to see
                outcome = (False, e)
            del fn, item
            # A late store of an older count only makes the pool look busier for a moment.
            self._finished = next(self._finished_counter)
            # A closed loop: nobody waits for it any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():  # the caller stopped waiting
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    elif isinstance(value, StopIteration):  # an asyncio future refuses to hold one
        future.set_exception(RuntimeError(f"blocking call raised StopIteration: {value}"))
    else:
        future.set_exception(value)


_default: BlockingCalls | None = None
_default_lock = threading.Lock()


async def run_blocking(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """fn(*args, **kwargs) on the process's shared pool (made on first use)."""
    global _default
    pool = _default
    if pool is None:
        with _default_lock:
            if _default is None:
                # As asyncio's default executor: more threads than this only fight over the GIL.
                _default = BlockingCalls(min(32, (os.cpu_count() or 1) + 4), name="xclaw-io")
            pool = _default
    return await pool.call(fn, *args, **kwargs)
