"""One way for a test to wait for something: ask until it holds, fail at a deadline saying
what was awaited.

A fixed sleep before looking is either longer than needed or, on a loaded machine, too
short; so a test waits for the condition itself. (A sleep stays where time passing is what
is tested — a grace period, a cache's second — or where an absence is checked: nothing more
comes within a while.)

    wait_until(lambda: path.exists(), "the pid file")                # in a thread or a test
    await until(lambda: run.done, "the run ends")                     # in the event loop
    await until(path.exists, "the pid file", in_thread=True)          # a blocking check
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

# How long a wait lasts before it fails (seconds): far beyond what the condition needs on a
# loaded CI machine, so a failure means it never came.
TIMEOUT_S = 30.0
# How often the condition is asked (seconds): at first every EVERY_S, then less often, each
# interval BACKOFF times the last, up to EVERY_MAX_S. A condition that holds soon is seen
# soon; a long wait (a server starting, a command running for seconds on a loaded machine)
# does not cost the test and the process it asks (an HTTP request, a query, a scan of /proc)
# fifty checks a second: the suite is CPU-bound, and those checks took CPU from the processes
# being waited for. A caller that passes `every` is asked at that fixed interval.
EVERY_S = 0.02
EVERY_MAX_S = 0.1
BACKOFF = 1.5


# What was awaited, for the failure's message: words, or a function giving them when the wait
# fails (a server's log at that moment, say).
What = str | Callable[[], str]


def _failed(what: What, timeout: float) -> AssertionError:
    return AssertionError(f"not within {timeout:g} s: {what() if callable(what) else what}")


def _intervals(every: float | None) -> Iterator[float]:
    """The pauses between checks: `every` each time when given, else the back-off."""
    if every is not None:
        yield from itertools.repeat(every)
    pause = EVERY_S
    while True:
        yield pause
        pause = min(pause * BACKOFF, EVERY_MAX_S)


def wait_until(
    check: Callable[[], T],
    what: What = "the condition",
    timeout: float = TIMEOUT_S,
    every: float | None = None,
) -> T:
    """Call `check` until it returns something true, and return that; AssertionError naming
    `what` when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    pauses = _intervals(every)
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise _failed(what, timeout)
        time.sleep(next(pauses))


async def until(
    check: Callable[[], T | Awaitable[T]],
    what: What = "the condition",
    timeout: float = TIMEOUT_S,
    every: float | None = None,
    *,
    in_thread: bool = False,
) -> T:
    """`wait_until` for the event loop: `check` may be a coroutine function; `in_thread`:
    a blocking one (a store read, a process's output), called in a worker thread."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pauses = _intervals(every)
    while True:
        got = await asyncio.to_thread(check) if in_thread else check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return got  # type: ignore[return-value]
        if loop.time() > deadline:
            raise _failed(what, timeout)
        await asyncio.sleep(next(pauses))
