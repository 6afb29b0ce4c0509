"""[bench] Which pages a step writes: WAL frames per step, by b-tree, with and without budgets.

A commit in WAL mode writes every page it dirtied as one 4 KB frame (and SQLite checksums
each, ~4.6 k instructions a frame), so how the same rows are split over commits decides what
the writer pays: a b-tree page dirtied in two commits is written twice. This runs the
20-step task of `gateway_bench.py` in-process (`xclaw.open`, as `budgets_cpu.py` does) with
the WAL's automatic checkpoint off, then reads the WAL file itself: the frames the measured
tasks appended, each mapped to the table or index its page belongs to (SQLite's `dbstat`).

    .venv/bin/python bench/wal_frames.py base 10
    .venv/bin/python bench/wal_frames.py session 10     # the session's cap (budgets_cpu.py)

bench/README.md, "Budgets", has the figures.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import struct
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_connect = sqlite3.connect


def _connect_no_checkpoint(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    """The store's connections, with the automatic checkpoint off: the WAL keeps every frame."""
    conn: sqlite3.Connection = _connect(*args, **kwargs)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


sqlite3.connect = _connect_no_checkpoint  # type: ignore[assignment]  # before xclaw opens its store

from bench.budgets_cpu import CAPS, one_task, open_agent, prepare  # noqa: E402
from bench.gateway_bench import STEPS_PER_TASK  # noqa: E402

WAL_HEADER, FRAME_HEADER = 32, 24


async def run(home: Path, mode: str, tasks: int) -> tuple[int, bytes]:
    """(WAL size after the warm-up task, the WAL after `tasks` more)."""
    wal = home / "xclaw.db-wal"
    async with open_agent(home, mode) as agent:
        await one_task(agent)  # warm-up: the first session's rows, the caps read
        await asyncio.sleep(0.2)  # the last commit of the warm-up is written
        mark = wal.stat().st_size
        for _ in range(tasks):
            await one_task(agent)
        await asyncio.sleep(0.2)
        shutil.copy(wal, home / "measured.wal")
    return mark, (home / "measured.wal").read_bytes()


def main(mode: str, tasks: int) -> None:
    home = prepare("xclaw-wal-frames-")
    mark, data = asyncio.run(run(home, mode, tasks))
    page_size = struct.unpack(">I", data[8:12])[0]
    frame = FRAME_HEADER + page_size
    offset = WAL_HEADER + (mark - WAL_HEADER) // frame * frame
    pages: Counter[int] = Counter()
    commits = 0
    while offset + frame <= len(data):
        page, commit_size = struct.unpack(">II", data[offset : offset + 8])
        pages[page] += 1
        commits += commit_size != 0  # a commit's last frame holds the database's size
        offset += frame
    with _connect(str(home / "xclaw.db")) as db:
        names = dict((page, name) for name, page in db.execute("SELECT name, pageno FROM dbstat"))
    by_tree: Counter[str] = Counter()
    for page, n in pages.items():
        by_tree[names.get(page, f"page {page}")] += n
    steps = tasks * STEPS_PER_TASK
    frames = sum(pages.values())
    print(
        f"{mode}: {frames / steps:.2f} frames a step, {commits / steps:.3f} commits a step, "
        f"{frames / max(1, commits):.2f} frames a commit"
    )
    for name, n in by_tree.most_common():
        print(f"  {n / steps:6.2f}  {name}")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("base", *CAPS):
        raise SystemExit("usage: wal_frames.py base|session|budgets TASKS")
    main(sys.argv[1], int(sys.argv[2]))
