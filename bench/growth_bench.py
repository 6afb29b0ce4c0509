"""Growth benchmark: what one write costs SQLite's writer as the database grows.

A server that runs for weeks holds hundreds of MB of steps. Session ids are random, so each
new step lands at a random place of the traces indexes, and a commit dirties more distinct
pages the larger they are. This benchmark grows two databases side by side, round by round
(alternating, so both see the same machine state): the store as it is (SQLite's default page
cache, 2 MB), and the same with a larger write cache (`--cache-mib`, default 64), and
prints the writer's busy time per write (`SQLiteStore.writer_busy_s`) at each size.

Each round: `--sessions` new sessions, each a user message and nine tool calls (a durable
begin with ~1 KB of input, then a completion with ~2 KB of output), all sessions' writes in
flight together through their write streams, as a busy server's are.

    .venv/bin/python bench/growth_bench.py                 # 8 rounds of 1,000 sessions, ~2 min
    .venv/bin/python bench/growth_bench.py --rounds 3 --sessions 200   # a smoke test
    .venv/bin/python bench/growth_bench.py --dir /mnt/disk # the databases on another disk
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import tempfile
import time
from pathlib import Path

from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import AddStep, BeginStep, FinishStep, Sync

TOOL_TURNS = 9


def _text(n: int) -> str:
    return "".join(random.choices(string.ascii_letters + " ", k=n))


async def grow(store: SQLiteStore, sessions: int) -> tuple[float, int]:
    """One round on `store`: its writer's busy seconds and the number of writes."""
    tool_input, tool_output = {"path": _text(1000)}, _text(2000)
    sids = [store.record.create_session().session_id for _ in range(sessions)]
    streams = {sid: store.record.write_stream() for sid in sids}
    busy = store.record.writer_busy_s
    await asyncio.gather(
        *(
            streams[sid].put(
                AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go"))
            )
            for sid in sids
        )
    )
    done = Completion(status=StepStatus.COMPLETED, output_data=tool_output)
    for _ in range(TOOL_TURNS):
        begun = [
            streams[sid].put(
                BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "list_dir", tool_input))
            )
            for sid in sids
        ]
        steps = await asyncio.gather(*begun)
        # A completion nobody is told of (lazy), as the store's own completions are here.
        await asyncio.gather(
            *(
                streams[step.session_id].put(
                    FinishStep(session_id=step.session_id, step=step, done=done)
                )
                for step in steps
            )
        )
    return store.record.writer_busy_s - busy, sessions * (1 + 2 * TOOL_TURNS)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="xclaw-growth-", dir=args.dir) as tmp:
        stores = {
            "the store (cache 2 MB)": SQLiteStore(Path(tmp) / "store.db"),
            f"write cache {args.cache_mib} MiB": SQLiteStore(Path(tmp) / "cached.db"),
        }
        ours, cached = stores.values()
        cached._writer.submit(
            lambda conn: conn.execute(f"PRAGMA cache_size=-{args.cache_mib * 1024}"),
            Sync.RELAXED,
        )
        print(
            f"xclaw growth benchmark: {args.rounds} rounds of {args.sessions} sessions x "
            f"{1 + 2 * TOOL_TURNS} writes (~1 KB in, ~2 KB out a tool call), in {tmp}"
        )
        names = list(stores)
        print(f"{'round':>5} {'db MB':>7} " + " ".join(f"{n:>34}" for n in names) + "  ratio")
        try:
            for r in range(args.rounds):
                per_write: dict[str, float] = {}
                for name in names if r % 2 == 0 else reversed(names):
                    busy, writes = await grow(stores[name], args.sessions)
                    per_write[name] = busy / writes * 1e6
                size = (Path(tmp) / "store.db").stat().st_size / 1e6
                print(
                    f"{r:>5} {size:>7.0f} "
                    + " ".join(f"{per_write[n]:>28.1f} us/wr" for n in names)
                    + f"  {per_write[names[1]] / per_write[names[0]]:.2f}x",
                    flush=True,
                )
        finally:
            for store in (ours, cached):
                store.close()
    print("us/wr = the writer's busy time (transactions, syncs, GIL waits) per write")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of new sessions (8)")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions a round (1000)")
    parser.add_argument("--dir", default=None, help="where the databases go (default: /tmp)")
    parser.add_argument(
        "--cache-mib", type=int, default=64, help="the second database's write cache (64)"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.sessions < 1 or args.cache_mib < 1:
        parser.error("--rounds, --sessions and --cache-mib must be at least 1")
    started = time.perf_counter()
    asyncio.run(main_async(args))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
