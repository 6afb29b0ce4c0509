"""xclaw.threads: blocking calls from event loops on a few threads, results as asyncio futures."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from xclaw.threads import BlockingCalls, run_blocking


async def test_results_and_errors_come_back_to_the_caller() -> None:
    pool = BlockingCalls(4, name="t")
    try:
        assert await pool.call(lambda a, b=0: a + b, 2, b=3) == 5
        with pytest.raises(ZeroDivisionError):
            await pool.call(lambda: 1 / 0)

        def stop() -> None:
            raise StopIteration("done")

        # An asyncio future cannot hold a StopIteration: it comes back as a RuntimeError.
        with pytest.raises(RuntimeError, match="StopIteration"):
            await pool.call(stop)
    finally:
        pool.shutdown()


async def test_calls_run_off_the_loop_thread_and_in_parallel() -> None:
    pool = BlockingCalls(8, name="t")
    loop_thread = threading.current_thread()
    barrier = threading.Barrier(4, timeout=5)

    def meet() -> threading.Thread:
        barrier.wait()  # only returns once four calls run at the same time
        return threading.current_thread()

    try:
        threads = await asyncio.gather(*(pool.call(meet) for _ in range(4)))
    finally:
        pool.shutdown()
    assert loop_thread not in threads and len(set(threads)) == 4


async def test_threads_are_capped_and_queued_calls_still_run() -> None:
    pool = BlockingCalls(2, name="t")
    running = 0
    most = 0
    lock = threading.Lock()

    def work(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01)
        with lock:
            running -= 1
        return i

    try:
        assert await asyncio.gather(*(pool.call(work, i) for i in range(10))) == list(range(10))
    finally:
        pool.shutdown()
    assert most <= 2


async def test_a_caller_that_stops_waiting_does_not_break_the_pool() -> None:
    pool = BlockingCalls(1, name="t")
    release = threading.Event()
    try:
        waiting = asyncio.ensure_future(pool.call(release.wait, 5))
        await asyncio.sleep(0.01)
        waiting.cancel()  # the call goes on; its outcome is dropped
        release.set()
        assert await pool.call(lambda: "next") == "next"
    finally:
        pool.shutdown()


async def test_a_shut_down_pool_refuses_new_calls() -> None:
    pool = BlockingCalls(2, name="t")
    assert await pool.call(lambda: 1) == 1
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        await pool.call(lambda: 2)


async def test_the_shared_pool() -> None:
    assert await run_blocking(threading.current_thread) is not threading.current_thread()


def test_mypy_checks_the_arguments_of_a_call_handed_to_a_thread(tmp_path) -> None:
    """The thread hops (BlockingCalls.call, run_blocking, the store's StoreCaller) are typed
    with ParamSpec: a call into the store's threads with a wrong argument fails the type check,
    as the direct call would."""
    import subprocess
    import sys

    from tests.caches import mypy_lock

    planted = tmp_path / "planted.py"
    planted.write_text(
        "from xclaw.recorder.caller import StoreCaller\n"
        "from xclaw.threads import BlockingCalls, run_blocking\n\n\n"
        "def f(a: int, *, b: str = '') -> int:\n    return a\n\n\n"
        "async def g(pool: BlockingCalls, db: StoreCaller[object]) -> None:\n"
        "    await pool.call(f, 'one')\n"
        "    await run_blocking(f, 1, b=2)\n"
        "    await db(f)\n"
        "    await db(f, 1, b='fine')\n"
    )
    with mypy_lock("threads") as cache:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, str(planted)],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    found = [line for line in done.stdout.splitlines() if "planted.py:" in line]
    assert [line.split(":")[1] for line in found] == ["10", "11", "12"], done.stdout
