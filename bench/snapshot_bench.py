"""Benchmark of workspace snapshots and restores on a 1,000-file, 50 MB workspace.

    python bench/snapshot_bench.py            # the full run (~30 s, ~300 MB of temporary files)
    python bench/snapshot_bench.py --quick    # 200 files, 10 MB: a smoke test, not figures
    python bench/snapshot_bench.py --files 10000 --mb 20   # a 10,000-file project

Prints (see bench/README.md for the goals):
  1. snapshot time: the first one (everything hashed and stored), nothing changed (goal
     < 50 ms), one file changed, and after a restart (empty stat cache: everything hashed
     again, nothing stored) — each the whole operation: walk, hash, store, durable commit;
  2. storage growth per snapshot: nothing changed, and one file changed (goal: about that
     file's size), measured as the database file's growth after a checkpoint;
  3. restore time: rollback to before the first step (every file rewritten, one commit,
     the swap) and fork (the same, into a new workspace).
File contents are random bytes, so compression cannot flatter the storage figures.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import BeginStep, FinishStep
from xclaw.workspace import snapshots as snapmod
from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter
from xclaw.workspace.timetravel import Workspaces

_rng = random.Random(6)
TOOL = NewStep(StepType.TOOL_CALL, "shell", {"command": "make"})


def build_workspace(ws: Path, files: int, total: int) -> list[Path]:
    """`files` files of random bytes adding up to `total`, in 40 directories, sizes spread
    from 1/10 to ~2x the mean (as source trees and build outputs are)."""
    mean = total // files
    sizes = [max(1, int(mean * _rng.uniform(0.1, 1.9))) for _ in range(files)]
    scale = total / sum(sizes)
    paths = []
    for i, size in enumerate(sizes):
        d = ws / f"pkg{i % 40:02d}" / ("sub" if i % 3 else "")
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"file{i:05d}.dat"
        p.write_bytes(os.urandom(max(1, int(size * scale))))
        paths.append(p)
    return paths


def db_bytes(path: Path) -> int:
    """The database file's size once the WAL is checkpointed into it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.stat().st_size


def settle() -> None:
    time.sleep(snapmod._RACY_NS / 1e9 + 0.01)  # files just written are re-read: wait it out


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", default=None, help="where the workspace and database go")
    ap.add_argument("--files", type=int, default=None, help="files in the workspace")
    ap.add_argument("--mb", type=float, default=None, help="their total size in MB")
    args = ap.parse_args()
    files, total = (200, 10 * 2**20) if args.quick else (1000, 50 * 2**20)
    files = args.files or files
    total = int(args.mb * 2**20) if args.mb else total
    rounds = 5 if args.quick else 20

    tmp = Path(tempfile.mkdtemp(prefix="xclaw-snapbench-", dir=args.dir))
    try:
        run(tmp, files, total, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path, files: int, total: int, rounds: int) -> None:
    db = tmp / "x.db"
    store = SQLiteStore(db)
    workspaces = Workspaces(store, tmp / "ws", SnapshotConfig())
    sid = store.record.create_session(title="bench").session_id
    ws = workspaces.path(sid)
    ws.mkdir(parents=True)
    paths = build_workspace(ws, files, total)
    settle()

    cpu: list[float] = []

    def snapshot() -> float:
        step = store.record.write(BeginStep(session_id=sid, step=TOOL))
        t, c = time.perf_counter(), time.process_time()
        workspaces.snapshot(sid, step)
        elapsed = time.perf_counter() - t
        cpu.append(time.process_time() - c)  # this process's threads: the writer's too
        store.record.write(
            FinishStep(
                session_id=sid,
                step=step.seq,
                done=Completion(status=StepStatus.COMPLETED, output_data="ok"),
            )
        )
        return elapsed

    print(f"workspace: {files} files, {total / 2**20:.0f} MB of random bytes, 40 directories")
    print(
        f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}"
    )
    print()
    print("1. snapshot time (walk + hash + store + durable commit)")
    print(f"{'case':<44}{'ms':>8}   files read   CPU ms")
    first = snapshot()
    print(
        f"{'first snapshot (everything new)':<44}{ms(first)}   "
        f"{workspaces.snapshotter.last.files_read:<10}{ms(cpu[-1])}"
    )

    size0 = db_bytes(db)
    unchanged = [snapshot() for _ in range(rounds)]
    read = workspaces.snapshotter.last.files_read
    size1 = db_bytes(db)
    label = f"nothing changed (median of {rounds})"
    spent = statistics.median(cpu[-rounds:])
    print(f"{label:<44}{ms(statistics.median(unchanged))}   {read:<10}{ms(spent)}")

    changed_times, changed_sizes = [], []
    for _ in range(rounds):
        victim = paths[_rng.randrange(len(paths))]
        victim.write_bytes(os.urandom(victim.stat().st_size))
        changed_sizes.append(victim.stat().st_size)
        settle()
        changed_times.append(snapshot())
    read = workspaces.snapshotter.last.files_read
    size2 = db_bytes(db)
    label = f"one file changed (median of {rounds})"
    spent = statistics.median(cpu[-rounds:])
    print(f"{label:<44}{ms(statistics.median(changed_times))}   {read:<10}{ms(spent)}")

    workspaces.snapshotter = Snapshotter(SnapshotConfig())  # a restarted process: cold cache
    cold = snapshot()
    read = workspaces.snapshotter.last.files_read
    print(f"{'after a restart (empty stat cache)':<44}{ms(cold)}   {read:<10}{ms(cpu[-1])}")
    capture = []
    for _ in range(rounds):
        t = time.perf_counter()
        workspaces.snapshotter.capture(ws)
        capture.append(time.perf_counter() - t)
    print(f"{'  of which walk + stat only (median)':<44}{ms(statistics.median(capture))}")

    print()
    print("2. storage growth per snapshot (database file, after checkpoint)")
    print(f"{'case':<44}{'bytes':>12}{'file bytes':>12}{'ratio':>8}")
    print(f"{'nothing changed':<44}{(size1 - size0) / rounds:>12,.0f}{0:>12,}{'':>8}")
    growth = (size2 - size1) / rounds
    mean_file = statistics.mean(changed_sizes)
    print(f"{'one file changed':<44}{growth:>12,.0f}{mean_file:>12,.0f}{growth / mean_file:>7.2f}x")
    print(f"{'first snapshot':<44}{size0:>12,}{total:>12,}{size0 / total:>7.2f}x")

    print()
    print("3. restore time (one transaction + write every file + swap)")
    print(f"{'case':<44}{'ms':>8}")
    fork_times = []
    for _ in range(3):
        t = time.perf_counter()
        workspaces.fork(sid, 1)  # just after s0001: the snapshot before s0002
        fork_times.append(time.perf_counter() - t)
    print(f"{'fork at s0001 (new workspace, median of 3)':<44}{ms(statistics.median(fork_times))}")
    t = time.perf_counter()
    result = workspaces.rollback(sid, 2)  # before s0002: every file changed since is rewound
    rollback = time.perf_counter() - t
    assert result.restore is not None
    print(f"{'rollback to before s0002 (in place)':<44}{ms(rollback)}")
    t = time.perf_counter()
    store.snapshots.gc_blobs()
    print(f"{'blob sweep after the rollback':<44}{ms(time.perf_counter() - t)}")
    store.close()


if __name__ == "__main__":
    main()
