"""The write that opens a queued message's turn on PostgreSQL, alone (bench/README.md, "Queued
messages"): the shared body (store/common.py, one round trip a statement) against the
pipelined one (store/postgres/opening.py), alternated, each through the pool as a run's write
stream applies it (one transaction, synced), on a session with a step and a message queued.

    .venv/bin/python bench/open_turn_bench.py --pg postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python bench/open_turn_bench.py --pg URL --n 500

A fresh schema is made for the run and dropped after it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import time
from typing import Any

import psycopg

from xclaw.store.common import StoreBase
from xclaw.store.postgres.store import PostgresStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import AddStep, Kind, OpenTurn, QueueInput, sync_for


def _user(text: str) -> NewStep:
    return NewStep(step_type=StepType.USER_INPUT, name="user", input_data=text)


def _figures(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    at = lambda q: ms[min(len(ms) - 1, int(len(ms) * q))]  # noqa: E731
    return (
        f"{name:9s} n={len(ms)} p50 {statistics.median(ms):.2f} ms · p95 {at(0.95):.2f} · "
        f"p99 {at(0.99):.2f} · max {ms[-1]:.2f} · mean {statistics.fmean(ms):.2f}"
    )


def run(url: str, n: int) -> dict[str, list[float]]:
    schema = "open_turn_bench_" + secrets.token_hex(4)
    sep = "&" if "?" in url else "?"
    store = PostgresStore(f"{url}{sep}schema={schema}")
    rec: Any = store.record
    times: dict[str, list[float]] = {"shared": [], "pipelined": []}
    try:
        for i in range(n):
            for kind in ("shared", "pipelined") if i % 2 == 0 else ("pipelined", "shared"):
                sid = rec.create_session(title="t").session_id
                rec.write(AddStep(session_id=sid, step=_user("first")))
                rec.write(QueueInput(session_id=sid, id="m-1", mode="queue", content="q"))
                opening = OpenTurn(
                    session_id=sid,
                    message=_user("q"),
                    worker_id="w1",
                    ttl_s=30,
                    create=False,
                    message_id="m-1",
                    dequeue=True,
                    keep_approvals=False,
                    approval_output={"approved": False},
                )
                body = (
                    StoreBase._open_turn_tx(rec, opening)
                    if kind == "shared"
                    else rec._open_turn_tx(opening)
                )
                began = time.perf_counter()
                rec._db._pool.run_units([body], sync_for(Kind.TURN_OPENED))
                times[kind].append((time.perf_counter() - began) * 1000)
    finally:
        store.close()
        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pg", required=True, help="a PostgreSQL URL")
    ap.add_argument("--n", type=int, default=300, help="openings of each body")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2-CPU machine: figures move with it)")
    times = run(args.pg, args.n)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    for name, ms in times.items():
        print(_figures(name, ms))


if __name__ == "__main__":
    main()
