"""Benchmark of the SQLite store against bare sqlite3 doing the same work, in one process.

    python bench/store_bench.py            # the full run (~1 minute, ~1 GB of temporary files)
    python bench/store_bench.py --quick    # smaller sizes, for a smoke test

Prints four tables (see bench/README.md for what each measures and the goals):
  1. per-step cost (begin tool_call + complete) vs bare sqlite3 with WAL + synchronous=FULL
     and two commits per step, same schema;
  2. database bytes per step vs payload bytes, at two sizes (linear?);
  3. resume-history load time (`steps(session, agent="main")`) vs the bare read floor;
  4. rollback and fork of half of a 10,000-step session vs a bare delete / copy of the rows.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import statistics
import string
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.store.migrations import M001_SQLITE
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import BeginStep, FinishStep

SID = "benchSessionId0123456789"[:22]  # the length of a generated id (token_urlsafe(16))
_rng = random.Random(6)
_ALPHABET = string.ascii_letters + string.digits + "    \n.,:/-_"


def text(n: int) -> str:
    return "".join(_rng.choices(_ALPHABET, k=n))


def payload(in_chars: int, out_chars: int) -> tuple[dict, dict]:
    """A tool call's input and output: ~in_chars and ~out_chars of JSON."""
    return ({"command": text(in_chars - 14)}, {"stdout": text(out_chars - 27), "exit_code": 0})


def dumps(v: object) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# --- helpers ---------------------------------------------------------------------------------


class Scratch:
    """Fresh database paths under one temporary directory, removed at the end."""

    def __init__(self, root: str | None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="xclaw-bench-", dir=root))
        self.n = 0

    def path(self, name: str) -> Path:
        self.n += 1
        d = self.root / f"{self.n:03d}-{name}"
        d.mkdir()
        return d / "bench.db"

    def clean(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def bare_connection(path: Path, *, sync: str = "FULL", fk: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={sync}")
    conn.execute(f"PRAGMA foreign_keys={'ON' if fk else 'OFF'}")
    return conn


def bare_schema(path: Path) -> sqlite3.Connection:
    """The same tables and indexes as the store (migration 1), without the store."""
    conn = bare_connection(path)
    for statement in M001_SQLITE:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at) "
        "VALUES (?, 'bench', 'Running', 0, 0)",
        (SID,),
    )
    return conn


def db_bytes(path: Path) -> int:
    """Size of the database after a checkpoint has moved everything out of the WAL."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size + sum(
        p.stat().st_size for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# --- 1. per-step cost --------------------------------------------------------------------------


def steps_bare(path: Path, n: int, inp: dict, out: dict) -> float:
    conn = bare_schema(path)
    t = time.perf_counter()
    for seq in range(1, n + 1):
        step_id = f"{SID}:s{seq:04d}"
        now = time.time_ns() // 1_000_000
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO traces (step_id, session_id, seq, step_type, name, status, input_data,"
            " start_time) VALUES (?, ?, ?, 'tool_call', 'shell', 'running', ?, ?)",
            (step_id, SID, seq, dumps(inp), now),
        )
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE traces SET status='completed', output_data=?, end_time=? WHERE step_id=?",
            (dumps(out), time.time_ns() // 1_000_000, step_id),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t
    conn.close()
    return elapsed / n


def steps_store(path: Path, n: int, inp: dict, out: dict) -> float:
    with SQLiteStore(path) as store:
        sid = store.record.create_session(title="bench").session_id
        t = time.perf_counter()
        for _ in range(n):
            st = store.record.write(
                BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", inp))
            )
            store.record.write(
                FinishStep(
                    session_id=sid,
                    step=st.seq,
                    done=Completion(status=StepStatus.COMPLETED, output_data=out),
                )
            )
        return (time.perf_counter() - t) / n


def steps_store_threads(path: Path, threads: int, n: int, inp: dict, out: dict) -> float:
    """Several sessions driven at once: group commit shares one sync between them."""
    with SQLiteStore(path) as store:
        sids = [store.record.create_session().session_id for _ in range(threads)]

        def drive(sid: str) -> None:
            for _ in range(n):
                st = store.record.write(
                    BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", inp))
                )
                store.record.write(
                    FinishStep(
                        session_id=sid,
                        step=st.seq,
                        done=Completion(status=StepStatus.COMPLETED, output_data=out),
                    )
                )

        workers = [threading.Thread(target=drive, args=(s,)) for s in sids]
        t = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return (time.perf_counter() - t) / (threads * n)


def bench_per_step(scratch: Scratch, n: int, rounds: int) -> list[tuple]:
    inp, out = payload(1000, 2000)
    bare, ours = [], []
    for _ in range(rounds):  # alternate, so drift of the disk hits both alike
        bare.append(steps_bare(scratch.path("bare-steps"), n, inp, out))
        ours.append(steps_store(scratch.path("store-steps"), n, inp, out))
    b, o = statistics.median(bare), statistics.median(ours)
    par = steps_store_threads(scratch.path("store-threads"), 8, n // 4, inp, out)
    return [
        ("bare sqlite3 (WAL, FULL, 2 commits/step)", b * 1e3, 1.0),
        ("SQLiteStore, 1 session", o * 1e3, o / b),
        ("SQLiteStore, 8 sessions in 8 threads", par * 1e3, par / b),
    ]


# --- 2. bytes per step -------------------------------------------------------------------------


def bench_bytes(scratch: Scratch, sizes: list[int]) -> list[tuple]:
    inp, out = payload(1000, 2000)
    per_step_payload = len(dumps(inp).encode()) + len(dumps(out).encode())
    rows = []
    for n in sizes:
        path = scratch.path(f"bytes-{n}")
        with SQLiteStore(path) as store:
            sid = store.record.create_session().session_id
            for _ in range(n):
                st = store.record.write(
                    BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", inp))
                )
                store.record.write(
                    FinishStep(
                        session_id=sid,
                        step=st.seq,
                        done=Completion(status=StepStatus.COMPLETED, output_data=out),
                    )
                )
        size = db_bytes(path)
        rows.append((n, size / n, per_step_payload, size / n / per_step_payload))
    return rows


# --- 3. resume-history load ----------------------------------------------------------------


def bulk_session(path: Path, n: int, inp: dict, out: dict, *, parents: bool = True) -> None:
    """A finished n-step session written fast (one transaction, executemany): user_input,
    llm_call and tool_call rows in the shapes the recorder writes, tool calls under their
    llm call. Same schema and JSON text as the store writes."""
    SQLiteStore(path).close()  # create the schema through the store itself
    conn = bare_connection(path, sync="OFF")
    conn.execute(
        "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, "
        "next_seq) VALUES (?, 'bulk', 'Success', 0, 0, ?)",
        (SID, n + 1),
    )
    inp_j, out_j = dumps(inp), dumps(out)

    def rows() -> Iterator[tuple]:
        llm = None
        for seq in range(1, n + 1):
            kind = ("user_input", "llm_call", "tool_call", "tool_call")[seq % 4]
            parent = llm if (parents and kind == "tool_call") else None
            step_id = f"{SID}:s{seq:04d}"
            if kind == "llm_call":
                llm = step_id
            yield (
                step_id,
                SID,
                seq,
                parent,
                kind,
                "shell" if kind == "tool_call" else kind,
                "completed",
                inp_j,
                out_j,
                seq,
                seq + 3,
            )

    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO traces (step_id, session_id, seq, parent_step_id, step_type, name, status,"
        " input_data, output_data, start_time, end_time) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        rows(),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def load_floor(path: Path) -> float:
    """The least a reader can do: select the rows and decode the JSON columns."""
    conn = sqlite3.connect(path)
    t = time.perf_counter()
    rows = conn.execute(
        "SELECT step_id, seq, input_data, output_data FROM traces "
        "WHERE session_id=? AND agent='main' ORDER BY seq",
        (SID,),
    ).fetchall()
    _ = [(a, b, json.loads(c), json.loads(d)) for a, b, c, d in rows]
    elapsed = time.perf_counter() - t
    conn.close()
    return elapsed


def load_store(path: Path) -> tuple[float, int]:
    with SQLiteStore(path) as store:
        t = time.perf_counter()
        steps = store.record.steps(SID, agent="main")
        return time.perf_counter() - t, len(steps)


def bench_resume(scratch: Scratch, sizes: list[int], big: dict, small: dict) -> list[tuple]:
    out = []
    for label, (inp, res) in (("~3 KB/step", big), ("~300 B/step", small)):
        for n in sizes:
            path = scratch.path(f"resume-{n}")
            bulk_session(path, n, inp, res)
            load_store(path)  # warm the page cache alike for both readers
            gc.collect()
            floor = min(load_floor(path) for _ in range(2))
            gc.collect()
            ours, count = min(load_store(path) for _ in range(2))
            assert count == n
            out.append((label, n, ours * 1e3, floor * 1e3, ours / floor))
            shutil.rmtree(path.parent)
    return out


# --- 4. rollback and fork of half a session --------------------------------------------------


def bench_time_travel(scratch: Scratch, n: int, rounds: int) -> list[tuple]:
    inp, out = payload(1000, 2000)
    template = scratch.path("tt-template")
    bulk_session(template, n, inp, out)
    half = n // 2 + 1
    new = "forkSession0123456789x"

    def fresh() -> Path:
        path = scratch.path("tt")
        shutil.copyfile(template, path)
        return path

    def bare_rollback(path: Path, fk: bool) -> float:
        conn = bare_connection(path, fk=fk)
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM traces WHERE session_id=? AND seq>=?", (SID, half))
        conn.execute("COMMIT")
        elapsed = time.perf_counter() - t
        conn.close()
        return elapsed

    def bare_fork(path: Path, fk: bool) -> float:
        conn = bare_connection(path, fk=fk)
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at) "
            "VALUES (?, 'copy', 'Init', 0, 0)",
            (new,),
        )
        cut = len(SID) + 1
        conn.execute(
            "INSERT INTO traces (step_id, session_id, seq, parent_step_id, step_type, name,"
            " status, agent, call_id, input_data, output_data, error_message, start_time,"
            " end_time, token_usage_prompt, token_usage_completion) "
            "SELECT ? || substr(step_id, ?), ?, seq,"
            " CASE WHEN parent_step_id IS NULL THEN NULL ELSE ? || substr(parent_step_id, ?) END,"
            " step_type, name, status, agent, call_id, input_data, output_data, error_message,"
            " start_time, end_time, token_usage_prompt, token_usage_completion "
            "FROM traces WHERE session_id=? AND seq<? ORDER BY seq",
            (new, cut, new, new, cut, SID, half),
        )
        conn.execute("COMMIT")
        elapsed = time.perf_counter() - t
        conn.close()
        return elapsed

    def store_op(op: str) -> Callable[[Path], float]:
        def run(path: Path) -> float:
            with SQLiteStore(path) as store:
                if op == "rollback":
                    return timed(lambda: store.record.rollback(SID, half))
                return timed(lambda: store.record.fork(SID, half - 1))

        return run

    cases: dict[str, Callable[[Path], float]] = {
        "rollback bare (FK on)": lambda p: bare_rollback(p, True),
        "rollback bare (FK off)": lambda p: bare_rollback(p, False),
        "rollback SQLiteStore": store_op("rollback"),
        "fork bare (FK on)": lambda p: bare_fork(p, True),
        "fork bare (FK off)": lambda p: bare_fork(p, False),
        "fork SQLiteStore": store_op("fork"),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            path = fresh()
            times[name].append(fn(path))
            shutil.rmtree(path.parent)
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for op in ("rollback", "fork"):
        base = med[f"{op} bare (FK on)"]
        for name in (f"{op} bare (FK on)", f"{op} bare (FK off)", f"{op} SQLiteStore"):
            rows.append((name, n // 2, med[name] * 1e3, med[name] / base))
    return rows


# --- report ------------------------------------------------------------------------------------


def table(title: str, header: tuple[str, ...], rows: list[tuple], fmt: tuple[str, ...]) -> None:
    cells = [[f.format(v) for f, v in zip(fmt, r, strict=True)] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print(
        "  ".join(
            h.rjust(w) if i else h.ljust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    for c in cells:
        print(
            "  ".join(
                v.rjust(w) if i else v.ljust(w)
                for i, (v, w) in enumerate(zip(c, widths, strict=True))
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke test, not figures")
    ap.add_argument("--dir", default=None, help="where to put the temporary databases")
    args = ap.parse_args()
    q = args.quick
    scratch = Scratch(args.dir)
    print(
        f"xclaw store benchmark  python {sys.version.split()[0]}  sqlite {sqlite3.sqlite_version}"
        f"  {os.cpu_count()} CPUs  dir {scratch.root}{'  (quick)' if q else ''}"
    )
    try:
        n = 200 if q else 1000
        table(
            f"1. per-step cost: begin tool_call + complete, {n}-step session, ~1 KB in + ~2 KB out",
            ("writer", "ms/step", "ratio"),
            bench_per_step(scratch, n, 1 if q else 5),
            ("{}", "{:.3f}", "{:.2f}x"),
        )
        table(
            "2. database bytes per step (after checkpoint)",
            ("steps", "bytes/step", "payload", "ratio"),
            bench_bytes(scratch, [200, 1000] if q else [1000, 10_000]),
            ("{:,}", "{:,.0f}", "{:,}", "{:.2f}x"),
        )
        big = payload(1000, 2000)
        small = ({"command": text(60)}, {"stdout": text(200), "exit_code": 0})
        table(
            '3. resume-history load: steps(session, agent="main"), all completed',
            ("payload", "steps", "store ms", "floor ms", "ratio"),
            bench_resume(scratch, [1000, 5000] if q else [1000, 10_000, 100_000], big, small),
            ("{}", "{:,}", "{:.1f}", "{:.1f}", "{:.2f}x"),
        )
        table(
            f"4. rollback / fork of half of a {2000 if q else 10_000}-step session "
            "(~3 KB/step, one transaction, synchronous=FULL)",
            ("operation", "rows", "ms", "ratio"),
            bench_time_travel(scratch, 2000 if q else 10_000, 1 if q else 5),
            ("{}", "{:,}", "{:.1f}", "{:.2f}x"),
        )
        print(
            "\nfloor = bare sqlite3 SELECT of the same rows + json.loads of both JSON columns;"
            " ratios are to the first row of each group (4: to bare with foreign keys on, as the"
            " schema declares them)."
        )
    finally:
        scratch.clean()


if __name__ == "__main__":
    main()
