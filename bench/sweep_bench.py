"""Sweep benchmark: what one lease sweep costs a server as its sessions at rest pile up.

Every worker sweeps once per lease TTL (15 s by default) for sessions a dead worker left
Running. A server a few weeks old holds thousands of sessions waiting for their next
instruction, each with its last owner on record. The sweep used to read every one of those
leases (`Store.leases(statuses=[Running, Paused])`, a row object each on a store thread, then a
filter on the event loop); it now asks the store for what it acts on (`Store.sweep_targets`,
the filter in SQL). This benchmark times both side by side, alternating, on one SQLite
database of `--sessions` sessions at rest (and as many finished ones), while an event loop
ticks every millisecond: the figure that matters is how long the loop — every client's steps —
stalls during a sweep.

    .venv/bin/python bench/sweep_bench.py                      # 10,000 and 100,000 sessions
    .venv/bin/python bench/sweep_bench.py --sessions 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xclaw.store.leases import new_worker_id
from xclaw.store.sqlite.leases import lease_now
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Status
from xclaw.threads import BlockingCalls

GRACE_MS = 15_000


def build(path: Path, sessions: int, worker: str) -> None:
    """`sessions` Running sessions waiting for input and as many finished ones, all last
    driven by `worker`, written straight in SQL (the store would take minutes)."""
    conn = sqlite3.connect(path)
    now = lease_now()
    conn.executemany(
        "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, "
        "metadata, is_forked, lease_owner, lease_token, lease_expires_at, awaiting_input) "
        "VALUES (?, '', ?, ?, ?, '{}', 0, ?, 1, ?, ?)",
        (
            (f"rest{i:07d}{status[0]}", status, now, now, worker, now - 60_000, waiting)
            for i in range(sessions)
            for status, waiting in (("Running", 1), ("Success", 0))
        ),
    )
    conn.commit()
    conn.close()


async def timed(
    calls: BlockingCalls, read: Callable[[], Any], filter_on_loop: bool
) -> tuple[float, float]:
    """(seconds the sweep took, the event loop's longest stall meanwhile, seconds)."""
    stall = 0.0
    done = False

    async def ticker() -> None:
        nonlocal stall
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            stall = max(stall, time.perf_counter() - t - 0.001)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    result = await calls.call(read)
    if filter_on_loop:  # what the sweep then did with every lease, on the loop
        grace = GRACE_MS
        _ = [
            i
            for i in result
            if not i.live
            and i.status is Status.RUNNING
            and not i.awaiting_input
            and i.now - (i.expires_at or 0) >= grace
        ]
    took = time.perf_counter() - start
    done = True
    await tick
    return took, stall


async def run(sessions: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="xclaw-sweep-bench-") as d:
        path = Path(d) / "xclaw.db"
        store = SQLiteStore(path)
        worker = new_worker_id()
        store.leases.register_worker(worker)
        build(path, sessions, worker)
        calls = BlockingCalls(2, "xclaw-bench")
        try:
            old: list[tuple[float, float]] = []
            new: list[tuple[float, float]] = []
            unfinished = [Status.RUNNING, Status.PAUSED]
            for _ in range(rounds):
                old.append(
                    await timed(calls, lambda: store.leases.leases(statuses=unfinished), True)
                )
                new.append(await timed(calls, lambda: store.leases.sweep_targets(GRACE_MS), False))
        finally:
            calls.shutdown()
            store.close()
    o_took, o_stall = (statistics.median(x[i] for x in old) * 1000 for i in (0, 1))
    n_took, n_stall = (statistics.median(x[i] for x in new) * 1000 for i in (0, 1))
    print(
        f"{sessions:>8} at rest  leases()+filter {o_took:8.1f} ms (loop stall {o_stall:6.1f} ms)"
        f"   sweep_targets {n_took:7.1f} ms (loop stall {n_stall:5.1f} ms)"
        f"   time {n_took / o_took:5.3f}x  stall {n_stall / max(o_stall, 1e-9):5.3f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds (median)")
    args = parser.parse_args()
    print(
        f"sweep benchmark: SQLite, sessions at rest = Running and waiting for input (and as "
        f"many finished), medians of {args.rounds} alternated rounds"
    )
    for n in args.sessions:
        asyncio.run(run(n, args.rounds))


if __name__ == "__main__":
    main()
