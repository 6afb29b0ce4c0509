"""Workers benchmark: steps/s of 100 concurrent scripted sessions served by 1, 2 and 3
`xclaw serve` processes on one PostgreSQL database, next to one process on SQLite, all in
the same run.

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

PostgreSQL comes from --pg, else XCLAW_TEST_PG_URL, else the local default; every
configuration gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_bench import STEPS_PER_TASK, server_cpu_s, spawn_serve

TOKEN = "bench-token-" + secrets.token_hex(8)
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    url: str


def start_worker(root: Path, db: str, workspace: Path) -> Worker:
    proc, port = spawn_serve(root, "list_dir", TOKEN, "--workspace", str(workspace), XCLAW_DB=db)
    return Worker(proc, f"ws://127.0.0.1:{port}/ws")


@dataclass
class SessionRun:
    latencies_ms: list[float] = field(default_factory=list)
    steps: int = 0
    finished_at: float = 0.0


async def one_session(url: str, go: asyncio.Event, ready: asyncio.Queue[None]) -> SessionRun:
    run = SessionRun()
    async with connect(
        url,
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
        max_size=None,
        max_queue=None,
        open_timeout=60,
    ) as ws:
        await ws.send(json.dumps({"type": "reconnect", "sessionId": None}))
        sid = None
        while True:
            f = json.loads(await ws.recv())
            if f["type"] == "session":
                sid = f["sessionId"]
            if f["type"] == "status" and "busy" in f:
                break
        ready.put_nowait(None)
        await go.wait()
        last = time.perf_counter()
        await ws.send(json.dumps({"type": "message", "sessionId": sid, "content": "go"}))
        async for raw in ws:
            f = json.loads(raw)
            if f["type"] == "step" and f["step"]["status"] != "running":
                now = time.perf_counter()
                run.latencies_ms.append((now - last) * 1000)
                run.steps += 1
                last = now
            elif f["type"] == "reply":
                run.finished_at = time.perf_counter()
                break
            elif f["type"] == "error":
                raise RuntimeError(f"session {sid}: {f}")
    return run


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
    workers: list[Worker], sessions: int
) -> tuple[list[SessionRun], float, float, float]:
    go = asyncio.Event()
    ready: asyncio.Queue[None] = asyncio.Queue()
    tasks = [
        asyncio.create_task(one_session(workers[i % len(workers)].url, go, ready))
        for i in range(sessions)
    ]
    for _ in range(sessions):
        await ready.get()
    cpu, db_cpu = sum(server_cpu_s(w.proc.pid) for w in workers), postgres_cpu_s()
    start = time.perf_counter()
    go.set()
    runs = await asyncio.gather(*tasks)
    wall = max(r.finished_at for r in runs) - start
    cpu = sum(server_cpu_s(w.proc.pid) for w in workers) - cpu
    return runs, wall, cpu, postgres_cpu_s() - db_cpu


def pg_schema_url(base: str) -> tuple[str, str]:
    schema = "xclaw_bench_" + secrets.token_hex(4)
    return f"{base}{'&' if '?' in base else '?'}schema={schema}", schema


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    from xclaw.store.postgres_conn import parse_url

    with psycopg.connect(parse_url(base).conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def measure(name: str, db: str, n: int, sessions: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="xclaw-workers-bench-") as tmp:
        workspace = Path(tmp) / "workspaces"
        workers = [start_worker(Path(tmp) / f"w{i}", db, workspace) for i in range(n)]
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
    lat = sorted(x for r in runs for x in r.latencies_ms)
    return {
        "config": name,
        "workers": n,
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[min(len(lat) - 1, round(0.99 * len(lat)))],
        "server_cpu_ms_per_step": cpu * 1000 / steps,
        "db_cpu_ms_per_step": db_cpu * 1000 / steps if "://" in db else 0.0,
    }


async def main_async(args: argparse.Namespace) -> None:
    results = []
    with tempfile.TemporaryDirectory(prefix="xclaw-sqlite-bench-") as tmp:
        results.append(
            await measure("SQLite", str(Path(tmp) / "xclaw.db"), 1, args.sessions, args.rounds)
        )
    for n in args.workers:
        url, schema = pg_schema_url(args.pg)
        try:
            results.append(await measure("PostgreSQL", url, n, args.sessions, args.rounds))
        finally:
            drop_schema(args.pg, schema)
    print(
        f"xclaw workers benchmark: {args.sessions} concurrent {STEPS_PER_TASK}-step sessions "
        f"x {args.rounds} rounds, {os.cpu_count()} CPUs, list_dir tool"
    )
    print(
        f"{'backend':<11} {'workers':>7} {'steps':>7} {'wall s':>7} {'steps/s':>8} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'xclaw CPU':>9} {'db CPU':>7}  (ms per step)"
    )
    for r in results:
        print(
            f"{r['config']:<11} {r['workers']:>7} {r['steps']:>7} {r['wall_s']:>7.2f} "
            f"{r['steps_per_s']:>8.0f} {r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} "
            f"{r['server_cpu_ms_per_step']:>9.2f} {r['db_cpu_ms_per_step']:>7.2f}"
        )
    if args.json:
        print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", default=os.environ.get("XCLAW_TEST_PG_URL") or DEFAULT_PG)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
