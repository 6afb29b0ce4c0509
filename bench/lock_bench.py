"""Lock benchmark: several processes writing one SQLite file, waiting for each other's write
lock in SQLite's busy handler or in the writer's own short pauses, side by side in one run.

Every process opens its own SQLiteStore on one file (as `xclaw serve` workers sharing a
database do, or a CLI `xclaw rollback` beside a server) and drives a few sessions from threads:
each thread writes one step (begin a tool call, durable, then complete it), sleeps a moment,
and again, for a few seconds. Only one connection can hold the write lock at a time, so every
write that finds it taken waits. "busy handler" is the writer as it was: busy_timeout 10 s,
SQLite's own handler sleeping 1, 2, 5, 10, 15, 20, 25 ... ms between its tries; "own pauses"
is the writer today: busy_timeout 0 and BEGIN IMMEDIATE tried again from 0.1 ms up to 5 ms
apart (xclaw/store/sqlite/writer.py). The rounds alternate (busy handler, own pauses, ...)
and the last rows are medians and ratios. "fair" is the fewest steps one process wrote over
the most: near 0, one process was starved of the lock (`--pause-ms 0` shows it).

    .venv/bin/python bench/lock_bench.py
    .venv/bin/python bench/lock_bench.py --processes 3 --threads 4 --seconds 3 --rounds 5
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_bench import pct

from xclaw.store.sqlite import writer as sqlite_writer
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import BeginStep, FinishStep

MODES = ("busy handler", "own pauses")


def _as_before(store: SQLiteStore) -> None:
    """The writer of before this change: wait inside SQLite, retry from 1 ms up to 50 ms."""
    store.db._writer._conn.execute(f"PRAGMA busy_timeout={sqlite_writer.BUSY_TIMEOUT_MS}")
    sqlite_writer.WRITE_LOCK_FIRST_PAUSE_S = 0.001
    sqlite_writer.WRITE_LOCK_MAX_PAUSE_S = 0.05


def child(
    path: str,
    mode: str,
    threads: int,
    seconds: float,
    pause_s: float,
    own: tuple[float | None, float | None],
    out: Any,
) -> None:
    store = SQLiteStore(path)
    if mode == MODES[0]:
        _as_before(store)
    else:  # --first-ms / --max-ms: try another schedule of the writer's own pauses
        if own[0] is not None:
            sqlite_writer.WRITE_LOCK_FIRST_PAUSE_S = own[0] / 1000
        if own[1] is not None:
            sqlite_writer.WRITE_LOCK_MAX_PAUSE_S = own[1] / 1000
    sessions = [store.record.create_session().session_id for _ in range(threads)]
    latencies: list[list[float]] = [[] for _ in range(threads)]
    go = threading.Barrier(threads)

    def drive(i: int) -> None:
        sid, lat = sessions[i], latencies[i]
        go.wait()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            step = store.record.write(
                BeginStep(
                    session_id=sid, step=NewStep(step_type=StepType.TOOL_CALL, name="list_dir")
                )
            )
            store.record.write(
                FinishStep(
                    session_id=sid,
                    step=step.seq,
                    done=Completion(status=StepStatus.COMPLETED, output_data="ok"),
                )
            )
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(pause_s)

    cpu0 = time.process_time()
    ts = [threading.Thread(target=drive, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    cpu = time.process_time() - cpu0
    store.close()
    out.put(([x for lat in latencies for x in lat], cpu))


def one_round(mode: str, args: argparse.Namespace, tmp: Path, n: int) -> dict[str, float]:
    path = str(tmp / f"round{n}.db")
    SQLiteStore(path).close()  # created and migrated before the processes race
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=child,
            args=(
                path,
                mode,
                args.threads,
                args.seconds,
                args.pause_ms / 1000,
                (args.first_ms, args.max_ms),
                out,
            ),
        )
        for _ in range(args.processes)
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    lat = [x for xs, _ in results for x in xs]
    per_process = [len(xs) for xs, _ in results]
    cpu = sum(c for _, c in results)
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)
    return {
        "steps": len(lat),
        "steps_s": len(lat) / args.seconds,
        "p50": statistics.median(lat),
        "p99": pct(lat, 99),
        "max": max(lat),
        "cpu_ms": cpu * 1000 / len(lat),
        # 1.0: every process wrote as many steps; near 0: one was starved of the lock
        "fair": min(per_process) / max(per_process),
    }


def row(label: str, r: dict[str, float]) -> str:
    return (
        f"{label:<14} {r['steps']:>7.0f} {r['steps_s']:>8.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} "
        f"{r['max']:>8.1f} {r['cpu_ms']:>11.3f} {r['fair']:>6.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4, help="sessions (threads) per process")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round")
    parser.add_argument("--pause-ms", type=float, default=2.0, help="between a thread's steps")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode, alternated")
    parser.add_argument(
        "--first-ms", type=float, help="own pauses: the first one (default: the writer's 0.1)"
    )
    parser.add_argument(
        "--max-ms", type=float, help="own pauses: the longest one (default: the writer's 5)"
    )
    args = parser.parse_args()
    print(
        f"lock benchmark: {args.processes} processes x {args.threads} sessions on one SQLite "
        f"file, a step (durable begin + complete) then {args.pause_ms:g} ms of pause, "
        f"{args.seconds:g} s a round, {args.rounds} rounds a mode, alternated; "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"{'writer waits':<14} {'steps':>7} {'steps/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'cpu ms/step':>11} {'fair':>6}"
    )
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="xclaw-lock-bench-") as d:
        for n in range(args.rounds):
            for mode in MODES:
                r = one_round(mode, args, Path(d), n)
                runs[mode].append(r)
                print(row(mode, r), flush=True)
    med = {m: {k: statistics.median(r[k] for r in runs[m]) for k in runs[m][0]} for m in MODES}
    for m in MODES:
        print(row(m + "~", med[m]))
    old, new = med[MODES[0]], med[MODES[1]]
    print(
        f"{'ratio':<14} {'':>7} {new['steps_s'] / old['steps_s']:>7.2f}x "
        f"{new['p50'] / old['p50']:>7.2f}x {new['p99'] / old['p99']:>7.2f}x "
        f"{new['max'] / old['max']:>7.2f}x {new['cpu_ms'] / old['cpu_ms']:>10.2f}x "
        f"{new['fair'] / old['fair']:>5.2f}x"
    )
    print(
        "latency = one step's begin (durable) + complete, as its thread waits for both; "
        "fair = the fewest steps one process wrote / the most; "
        "~ = median over the rounds; ratio = own pauses / busy handler"
    )


if __name__ == "__main__":
    main()
