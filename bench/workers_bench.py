"""Workers benchmark: steps/s of 100 concurrent scripted sessions served by 1, 2 and 3
`xclaw serve` processes on one PostgreSQL database, next to one process on SQLite (or
several: --sqlite-workers), all in the same run.

Each session runs the gateway benchmark's 20-step task (user message, nine LLM calls that
each ask for one `list_dir` call, a final answer) over a real WebSocket; the sessions are
spread round-robin over the workers (as a load balancer would). A step counts when its
trace row is finished (the live `step` frame). Throughput is every finished step over the
wall time from the first message sent to the last reply; CPU is the xclaw servers' and (when
it runs on this machine) PostgreSQL's user+system time over the same span, per step. The
machine's cores are shared by the servers, PostgreSQL and this client, so the figures say how
the work spreads, not what more hardware would give.

    .venv/bin/python bench/workers_bench.py
    .venv/bin/python bench/workers_bench.py --pg postgresql://postgres@127.0.0.1:5432/test \\
        --sessions 100 --rounds 2
    .venv/bin/python bench/workers_bench.py --sessions 1000 --rounds 1 --llm-ms 1000 \\
        --workers 1 2 --sqlite-workers 1 2

`--llm-ms N` paces the sessions as gateway_bench.py does (every model call takes N ms, each
session sends its message at a random moment of the first N ms) and adds "xclaw p50/p99":
an llm_call step's wait minus the model's own N ms, the latency xclaw adds per step.
`--sqlite-workers` runs that many processes on one SQLite file too (leases keep one driver
per session; the file's write lock takes their transactions one at a time).

PostgreSQL comes from --pg, else XCLAW_TEST_PG_URL, else the local default; every
configuration gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_bench import (
    STEPS_PER_TASK,
    Gateway,
    SessionRun,
    machine_speed_ms,
    one_session,
    pct,
    server_cpu_s,
    spawn_serve,
)

TOKEN = "bench-token-" + secrets.token_hex(8)
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def start_worker(root: Path, db: str, workspace: Path, llm_ms: float) -> Gateway:
    proc, port = spawn_serve(
        root, "list_dir", TOKEN, "--workspace", str(workspace), llm_ms=llm_ms, XCLAW_DB=db
    )
    return Gateway(proc, f"ws://127.0.0.1:{port}/ws", TOKEN, root, llm_ms, stagger_ms=llm_ms)


def postgres_cpu_s() -> float:
    """utime + stime of the local PostgreSQL server's processes (0 when it is elsewhere)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, _, rest = text.partition(") ")
        if name.endswith("(postgres"):
            fields = rest.split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def one_round(
    workers: list[Gateway], sessions: int
) -> tuple[list[SessionRun], float, float, float]:
    """All sessions attach (round-robin over the workers), then start together."""
    go = asyncio.Event()
    ready: asyncio.Queue[None] = asyncio.Queue()
    tasks = [
        asyncio.create_task(one_session(workers[i % len(workers)], go, ready))
        for i in range(sessions)
    ]
    for _ in range(sessions):
        await ready.get()
    gc.collect()
    gc.disable()  # the client's own collector pauses are not the servers' latency
    try:
        cpu, db_cpu = sum(server_cpu_s(w.proc.pid) for w in workers), postgres_cpu_s()
        start = time.perf_counter()
        go.set()
        runs = await asyncio.gather(*tasks)
        cpu = sum(server_cpu_s(w.proc.pid) for w in workers) - cpu
        db_cpu = postgres_cpu_s() - db_cpu
    finally:
        gc.enable()
    wall = max(r.finished_at for r in runs) - start
    return runs, wall, cpu, db_cpu


def pg_schema_url(base: str) -> tuple[str, str]:
    schema = "xclaw_bench_" + secrets.token_hex(4)
    return f"{base}{'&' if '?' in base else '?'}schema={schema}", schema


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    from xclaw.store.postgres.conn import parse_url

    with psycopg.connect(parse_url(base).conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def measure(
    name: str, db: str, n: int, sessions: int, rounds: int, llm_ms: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xclaw-workers-bench-") as tmp:
        workspace = Path(tmp) / "workspaces"
        workers = [start_worker(Path(tmp) / f"w{i}", db, workspace, llm_ms) for i in range(n)]
        try:
            await one_round(workers, min(sessions, 10))  # warm-up: connections, caches
            runs: list[SessionRun] = []
            wall = cpu = db_cpu = 0.0
            for _ in range(rounds):
                r, w, c, d = await one_round(workers, sessions)
                runs += r
                wall += w
                cpu += c
                db_cpu += d
        finally:
            for w in workers:
                w.proc.terminate()
            for w in workers:
                try:
                    w.proc.wait(20)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
    steps = sum(r.steps for r in runs)
    expected = rounds * sessions * STEPS_PER_TASK
    if steps != expected:
        raise RuntimeError(f"{name}: expected {expected} finished steps, saw {steps}")
    lat = [x for r in runs for x in r.latencies_ms]
    added = [x for r in runs for x in r.added_ms]
    return {
        "config": name,
        "workers": n,
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "p50_ms": statistics.median(lat),
        "p99_ms": pct(lat, 99),
        "added_p50_ms": statistics.median(added),
        "added_p99_ms": pct(added, 99),
        "server_cpu_ms_per_step": cpu * 1000 / steps,
        "db_cpu_ms_per_step": db_cpu * 1000 / steps if "://" in db else 0.0,
    }


async def main_async(args: argparse.Namespace) -> None:
    results = []
    for n in args.sqlite_workers:
        with tempfile.TemporaryDirectory(prefix="xclaw-sqlite-bench-") as tmp:
            db = str(Path(tmp) / "xclaw.db")
            results.append(await measure("SQLite", db, n, args.sessions, args.rounds, args.llm_ms))
    for n in args.workers:
        url, schema = pg_schema_url(args.pg)
        try:
            results.append(
                await measure("PostgreSQL", url, n, args.sessions, args.rounds, args.llm_ms)
            )
        finally:
            drop_schema(args.pg, schema)
    paced = bool(args.llm_ms)
    model = f"{args.llm_ms:g} ms per model call, starts spread over it" if paced else "instant"
    print(
        f"xclaw workers benchmark: {args.sessions} concurrent {STEPS_PER_TASK}-step sessions "
        f"x {args.rounds} rounds, {os.cpu_count()} CPUs, list_dir tool, scripted model "
        f"({model}); machine: a 1M-step Python loop takes {machine_speed_ms():.0f} ms"
    )
    print(
        f"{'backend':<11} {'workers':>7} {'steps':>7} {'wall s':>7} {'steps/s':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} "
        + (f"{'xclaw p50':>9} {'xclaw p99':>9} " if paced else "")
        + f"{'xclaw CPU':>9} {'db CPU':>7}  (ms per step)"
    )
    for r in results:
        print(
            f"{r['config']:<11} {r['workers']:>7} {r['steps']:>7} {r['wall_s']:>7.2f} "
            f"{r['steps_per_s']:>8.0f} {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} "
            + (f"{r['added_p50_ms']:>9.1f} {r['added_p99_ms']:>9.1f} " if paced else "")
            + f"{r['server_cpu_ms_per_step']:>9.2f} {r['db_cpu_ms_per_step']:>7.2f}"
        )
    if paced:
        print(f"xclaw p50/p99 = a step's wait beyond the model's own time ({args.llm_ms:g} ms)")
    if args.json:
        print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=os.environ.get("XCLAW_TEST_PG_URL") or DEFAULT_PG)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="*",
        default=[1, 2, 3],
        help="PostgreSQL worker counts (none: no PostgreSQL run)",
    )
    parser.add_argument(
        "--sqlite-workers",
        type=int,
        nargs="*",
        default=[1],
        help="SQLite worker counts, processes on one database file (none: no SQLite run)",
    )
    parser.add_argument(
        "--llm-ms", type=float, default=0.0, help="every model call takes this long (paced)"
    )
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
