"""Schedules benchmark: what 10,000 idle schedules cost a server (goal: ≤ 1 % of a core).

Every `xclaw serve` checks the schedules at most every `schedules.poll_s` (1 s): one indexed
query of the schedules whose next tick is due, one of the pending fires, one for the earliest
next tick (how long to sleep). Idle schedules — next tick an hour or a weekday morning away —
should cost nothing per schedule. This builds a database of `--schedules` schedules (half
`every 1h`, half `0 9 * * 1-5`, spread over 100 sessions, written straight in SQL as the
store's `AddSchedule` would), then runs the scheduler's loop alone on an event loop for
`--seconds`, side by side with the same loop over an empty schedules table, alternating, and
prints the process CPU each used as a percentage of one core (the loop, its store threads,
the driver; with PostgreSQL the server's own backend is not counted: its per-check query
time is printed from the client's side).

    .venv/bin/python bench/schedules_bench.py                     # SQLite, 10,000, 3 x 20 s
    .venv/bin/python bench/schedules_bench.py --db postgresql://postgres@127.0.0.1/test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from xclaw.runtime.inputs import Submitted
from xclaw.schedules.firing import Scheduler
from xclaw.schedules.making import new_schedule
from xclaw.schedules.spec import Kind
from xclaw.store import open_store
from xclaw.store.base import Store
from xclaw.store.steps.model import Session
from xclaw.store.steps.writes import Kind as WriteKind


class NoTarget:
    """Nothing is due: a call here would be a bug of the benchmark."""

    async def submit(self, *a: Any, **k: Any) -> Submitted:
        raise AssertionError("an idle schedule fired")

    async def fork(self, *a: Any, **k: Any) -> Session:
        raise AssertionError("an idle schedule forked")


def build(store: Store, n: int) -> None:
    sids = [store.record.create_session(title=f"s{i}").session_id for i in range(100)]
    now = int(time.time() * 1000)
    rows = []
    for i in range(n):
        cron = i % 2 == 1
        s = new_schedule(
            kind=Kind.CRON if cron else Kind.EVERY,
            when="0 9 * * 1-5" if cron else "1h",
            tz="UTC",
            session_id=sids[i % len(sids)],
            fork_of=None,
            message=f"check {i}",
            catch_up="skip",
            created_by=None,
            now_ms=now,
        )
        rows.append(s)
    # Written in batches through the store's own connection, as AddSchedule's SQL does.
    from xclaw.store.schedules.sql import _INSERT_SCHEDULE

    sql = store.db._dialect.sql(_INSERT_SCHEDULE)  # type: ignore[attr-defined]

    def tx(conn: Any) -> None:
        for s in rows:
            conn.execute(
                sql,
                (
                    s.schedule_id, s.kind, s.spec, s.tz, s.anchor, s.session_id, None,
                    s.message, s.catch_up, 0, None, now, now, s.next_fire, None, 0, 0, s.seed,
                ),
            )  # fmt: skip

    store.db._write(tx, WriteKind.IMPORTED)  # type: ignore[attr-defined]
    assert len(store.schedules.schedules()) == n


async def idle_cpu(store: Store, seconds: float) -> tuple[float, int, float]:
    """(CPU % of one core, checks made, mean ms of one check) while the loop runs alone."""
    sched = Scheduler(store, None, NoTarget(), "bench:1:x", poll_s=1.0)  # type: ignore[arg-type]
    checks = 0
    spent = 0.0
    real_check = sched.check

    async def counted() -> Any:
        nonlocal checks, spent
        t = time.perf_counter()
        got = await real_check()
        spent += time.perf_counter() - t
        checks += 1
        return got

    sched.check = counted  # type: ignore[method-assign]
    await sched.check()  # warm: connections, statements
    checks, spent = 0, 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sched.start()
    await asyncio.sleep(seconds)
    await sched.stop()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return 100 * cpu / wall, checks, 1000 * spent / max(checks, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=None, help="a postgresql:// URL (default: SQLite files)")
    ap.add_argument("--schedules", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="xclaw-sched-bench-"))

    def url(name: str) -> str:
        if args.db is None:
            return str(tmp / f"{name}.db")
        schema = f"xclaw_bench_{name}_{secrets.token_hex(4)}"
        return f"{args.db}{'&' if '?' in args.db else '?'}schema={schema}"

    full, empty = open_store(url("full")), open_store(url("empty"))
    t = time.perf_counter()
    build(full, args.schedules)
    print(f"built {args.schedules} schedules in {time.perf_counter() - t:.1f} s "
          f"({'PostgreSQL' if args.db else 'SQLite'}, {os.cpu_count()} CPUs)")  # fmt: skip
    figures: dict[str, list[tuple[float, int, float]]] = {"full": [], "empty": []}
    for r in range(args.rounds):
        for name, store in (("empty", empty), ("full", full)) if r % 2 else (
            ("full", full), ("empty", empty)
        ):  # fmt: skip
            figures[name].append(asyncio.run(idle_cpu(store, args.seconds)))
            pct, checks, ms = figures[name][-1]
            print(f"round {r + 1} {name:5}: {pct:.3f} % of a core, {checks} checks, "
                  f"{ms:.2f} ms a check")  # fmt: skip
    for name in ("empty", "full"):
        pcts = [f[0] for f in figures[name]]
        ms = [f[2] for f in figures[name]]
        label = f"{args.schedules} schedules" if name == "full" else "no schedules"
        print(f"{label:16}: median {statistics.median(pcts):.3f} % of a core "
              f"(range {min(pcts):.3f}-{max(pcts):.3f}), a check {statistics.median(ms):.2f} ms")  # fmt: skip
    for store in (full, empty):
        if args.db is not None:  # the benchmark's schemas go with it
            schema = store.url.split("schema=")[1].split("&")[0]  # type: ignore[attr-defined]
            store.db._write(  # type: ignore[attr-defined]
                lambda c, s=schema: c.execute(f"DROP SCHEMA {s} CASCADE"), WriteKind.REPAIRED
            )
        store.close()


if __name__ == "__main__":
    main()
