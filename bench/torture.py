"""The torture campaign: SIGKILLs at random moments and at each phase of a
30-step scripted task with side-effect ledgers, headless (`xclaw run`) and through the gateway
(`xclaw serve` + a WebSocket client), during recovery, during rollback, fork and workspace
restore; and power losses, simulated by a file layer that forgets every write not yet synced
(bench/powerloss_shim.c, LD_PRELOADed).

    python bench/torture.py [--kills 200] [--power-losses 40] [--seed N] [--json]

Figures printed (docs/reliability.md holds a run's):
- lost completed steps: a step completed in the record (or shown completed to a client) before
  a kill that is not completed after recovery — after a power loss, all but the latest one
  unless it was shown: a durable commit is synced before anyone is told of it, and another
  connection (this checker's) may read it in between (docs/storage.md, "Durability"), so a
  power loss in that moment takes back a commit nobody was told of;
- repeated completed side effects: a ledger entry written twice;
- side effects without a record: a ledger entry (or file) whose step has no row at all;
- integrity failures: PRAGMA integrity_check / foreign_key_check, `xclaw fsck` when it exists,
  and the record's own rules (nothing running in a finished session, at most one completed tool
  step per requested call, a workspace equal to the snapshot a rollback or fork restored);
- stuck sessions: a session that does not finish after its last recovery;
- recovery p50/p95: from starting the process after a kill to its first new step.

Every kill is checked at once (record and ledger), then the run goes on; each run ends with a
clean recovery and the end-of-run checks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = 30
FINAL = "task complete"
XCLAW = [sys.executable, "-m", "xclaw"]


# --- the task ------------------------------------------------------------------------------


def task_turns(ledger: Path) -> list[dict[str, Any]]:
    """30 tool steps: shell steps append their number to an outside ledger (an effect a
    rollback cannot undo), some after a pause (a kill inside the tool); every 10th step writes
    a file, every 10th an edit; some model answers take a while (a kill during the LLM call)."""
    turns: list[dict[str, Any]] = []
    for k in range(STEPS):
        if k == 0:
            cmd = f"mkdir -p notes; printf 'next: 7\\n' > notes/log.md; echo out00; echo 0 >> {ledger}"
            call = {"name": "shell", "input": {"command": cmd}}
        elif k % 10 == 4:
            call = {
                "name": "write_file",
                "input": {"path": f"notes/f{k:02d}.txt", "content": f"step {k}\n" * 50},
            }
        elif k % 10 == 7:
            call = {
                "name": "edit_file",
                "input": {
                    "path": "notes/log.md",
                    "old_text": f"next: {k}",
                    "new_text": f"done: {k}\nnext: {k + 10}",
                },
            }
        else:
            pause = "sleep 0.15; " if k % 6 == 3 else ""
            call = {
                "name": "shell",
                "input": {"command": f"{pause}echo out{k:02d}; echo {k} >> {ledger}"},
            }
        turn: dict[str, Any] = {"text": f"step {k}", "tool_calls": [call]}
        if k % 4 == 2:
            turn["sleep"] = 0.12
        turns.append(turn)
    turns.append({"text": FINAL})
    return turns


def step_of_call(call_id: str | None) -> int | None:
    """Turn k's call is `call_<k>_0` (scripted ids are deterministic)."""
    m = re.fullmatch(r"call_(\d+)_0", call_id or "")
    return int(m.group(1)) if m else None


# --- figures -------------------------------------------------------------------------------


@dataclass
class Figures:
    kills: Counter[str] = field(default_factory=Counter)
    power_losses: int = 0
    lost_completed: int = 0
    repeated_effects: int = 0
    effects_without_record: int = 0
    integrity_failures: int = 0
    stuck_sessions: int = 0
    told_not_committed: int = 0
    runs: int = 0
    effects: int = 0  # ledger entries and files written, over all runs (the checks' material)
    settled: int = 0  # interrupted file tools settled on resume by checking the workspace
    recovery_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def fail(self, what: str, detail: str) -> None:
        self.problems.append(f"{what}: {detail}")

    def as_json(self) -> dict[str, Any]:
        rec = sorted(self.recovery_s)
        return {
            "kills": sum(self.kills.values()),
            "killsByPhase": dict(sorted(self.kills.items())),
            "powerLosses": self.power_losses,
            "runs": self.runs,
            "sideEffects": self.effects,
            "settledByWorkspace": self.settled,
            "lostCompletedSteps": self.lost_completed,
            "toldCompletedNotCommitted": self.told_not_committed,
            "repeatedCompletedSideEffects": self.repeated_effects,
            "sideEffectsWithoutRecord": self.effects_without_record,
            "integrityFailures": self.integrity_failures,
            "stuckSessions": self.stuck_sessions,
            "recoveryP50s": round(statistics.median(rec), 3) if rec else None,
            "recoveryP95s": round(rec[min(len(rec) - 1, int(len(rec) * 0.95))], 3) if rec else None,
            "problems": self.problems[:50],
        }


# --- one run's world ----------------------------------------------------------------------


class World:
    """One run: its home, database, ledger, script and session."""

    def __init__(self, root: Path, name: str, *, shim: Path | None = None) -> None:
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.db = self.dir / "xclaw.db"
        self.ledger = self.dir / "ledger.txt"
        self.script = self.dir / "script.json"
        self.script.write_text(json.dumps({"turns": task_turns(self.ledger)}))
        self.sid = f"torture-{name}"
        self.shim = shim
        # No sandbox: the ledger outside the workspace stands for the outside world.
        (self.dir / "xclaw.yaml").write_text(
            "approval:\n  mode: yolo\nllm_retry_base_delay: 0.01\nmax_iterations: 200\nsandbox:\n  isolation: none\n"
        )
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_"))
        }
        self.env.update(
            {
                "XCLAW_HOME": str(self.dir),
                "XCLAW_DB": str(self.db),
                "XCLAW_MODEL": f"script:{self.script}",
                "XCLAW_CONFIG": str(self.dir / "xclaw.yaml"),
                "PYTHONUNBUFFERED": "1",
                "NO_COLOR": "1",
                "PYTHONPATH": str(ROOT),
            }
        )
        if shim is not None:
            self.env["LD_PRELOAD"] = str(shim)
            self.env["POWERLOSS_DIR"] = str(self.dir)

    @property
    def workspace(self) -> Path:
        return self.dir / "workspaces" / self.sid

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.db.exists():
            return []
        for _ in range(50):
            try:
                conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
                try:
                    return conn.execute(sql, params).fetchall()
                finally:
                    conn.close()
            except sqlite3.OperationalError as e:
                if "no such table" in str(e):
                    return []
                time.sleep(0.02)
            except sqlite3.DatabaseError as e:  # a corrupt file: every check then fails
                return [(f"corrupt: {e}",)]
        return []

    def max_seq(self) -> int:
        rows = self.query("SELECT max(seq) FROM traces WHERE session_id=?", (self.sid,))
        return int(rows[0][0] or 0) if rows else 0

    def completed_steps(self) -> set[int]:
        """Task steps k whose tool call is completed in the record."""
        rows = self.query(
            "SELECT call_id FROM traces WHERE session_id=? AND step_type='tool_call' AND status='completed' AND agent='main'",
            (self.sid,),
        )
        return {k for (c,) in rows if (k := step_of_call(c)) is not None}

    def recorded_steps(self) -> set[int]:
        rows = self.query(
            "SELECT call_id FROM traces WHERE session_id=? AND step_type='tool_call'", (self.sid,)
        )
        return {k for (c,) in rows if (k := step_of_call(c)) is not None}

    def ledger_counts(self) -> Counter[int]:
        if not self.ledger.exists():
            return Counter()
        return Counter(int(x) for x in self.ledger.read_text().split())

    def status(self) -> str | None:
        rows = self.query("SELECT current_status FROM sessions WHERE session_id=?", (self.sid,))
        return rows[0][0] if rows else None

    def run_cmd(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*XCLAW, *args],
            cwd=self.dir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def lose_power(self) -> None:
        """Every database file back to what was last synced (or gone if never synced)."""
        for f in list(self.dir.iterdir()):
            name = f.name
            if (
                not f.is_file()
                or not name.startswith("xclaw.db")
                or name.endswith((".synced", ".synced.tmp"))
            ):
                continue
            synced = f.with_name(name + ".synced")
            if name.endswith("-shm"):
                f.unlink()
            elif synced.exists():
                os.replace(synced, f)
            else:
                f.unlink()
        for f in self.dir.glob("xclaw.db*.synced*"):
            f.unlink()
        # What survived is on disk for good: the next life starts from it.
        for f in self.dir.glob("xclaw.db*"):
            if f.is_file():
                shutil.copyfile(f, f.with_name(f.name + ".synced"))


def kill(proc: subprocess.Popen[str], *, read: bool = True) -> str:
    """SIGKILL and reap; `read`: collect the output (when no Reader thread owns it)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    try:
        if read:
            out, _ = proc.communicate(timeout=30)
            return out or ""
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    return ""


def wait_until(cond: Any, timeout: float, step: float = 0.003) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


# --- checks -------------------------------------------------------------------------------


def have_fsck() -> bool:
    p = subprocess.run(
        [*XCLAW, "fsck", "--help"],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return p.returncode == 0


FSCK = False


def check_integrity(w: World, fig: Figures, where: str) -> None:
    if not w.db.exists():
        return  # killed before the database was created
    if w.query("SELECT count(*) FROM sqlite_master") == [(0,)]:
        # Killed while creating it: SQLite makes the file when it connects, and every
        # migration then commits in one transaction, so a file without tables is a database
        # not made yet (the next start makes it), not a broken one. Nothing can have been
        # told committed in it: the lost-steps figure counts that.
        return
    rows = w.query("PRAGMA integrity_check")
    fk = w.query("PRAGMA foreign_key_check")
    if rows != [("ok",)] or fk:
        fig.integrity_failures += 1
        fig.fail("integrity", f"{where} {w.dir.name}: {rows[:3]} {fk[:3]}")
        return
    check_record_rules(w, fig, where)
    if FSCK:
        problem = fsck_problem(w)
        if problem is not None:
            fig.integrity_failures += 1
            fig.fail("fsck", f"{where} {w.dir.name}: {problem[-300:]}")


def fsck_problem(w: World) -> str | None:
    """What `xclaw fsck --db` finds wrong, or None. Its own check (xclaw/ops/fsck.py) on a
    store opened as the command opens it (READ: nothing written), in this process: a process
    a check cost a start of xclaw (~0.7 CPU-s) for each of the ~30 checks of a small
    campaign. A world under the power-loss file layer still runs the command, through the
    layer."""
    if w.shim is not None:
        p = subprocess.run(
            [*XCLAW, "fsck", "--db", str(w.db)],
            capture_output=True,
            check=False,
            text=True,
            env=w.env,
        )
        return None if p.returncode == 0 else p.stdout + p.stderr
    from xclaw.errors import XclawError
    from xclaw.ops import fsck
    from xclaw.store import Access, open_store

    try:
        store = open_store(str(w.db), access=Access.READ)
    except (XclawError, OSError) as e:  # what the command answers with exit 2
        return f"not opened: {e}"
    try:
        report = fsck.check(store)
    finally:
        store.close()
    return None if report.ok else json.dumps(report.to_json())


def check_record_rules(w: World, fig: Figures, where: str) -> None:
    """The record's own rules, in SQL both backends run: at most one completed tool step per
    requested call; nothing running once the session finished."""
    multi = w.query(
        "SELECT call_id, count(*) FROM traces WHERE step_type='tool_call' AND status='completed' "
        "GROUP BY session_id, call_id HAVING count(*) > 1"
    )
    running = w.query(
        "SELECT t.step_id FROM traces t JOIN sessions s USING (session_id) "
        "WHERE t.status='running' AND s.current_status IN ('Success', 'Failed')"
    )
    if multi or running:
        fig.integrity_failures += 1
        fig.fail(
            "integrity",
            f"{where} {w.dir.name}: twice completed {multi[:3]}, running in finished {running[:3]}",
        )


def check_effects(w: World, fig: Figures, where: str) -> None:
    counts = w.ledger_counts()
    recorded = w.recorded_steps()
    for k, n in counts.items():
        if n > 1:
            fig.repeated_effects += 1
            fig.fail("repeated", f"{where} {w.dir.name}: step {k} ran {n} times")
        if k not in recorded:
            fig.effects_without_record += 1
            fig.fail("no record", f"{where} {w.dir.name}: step {k} has an effect and no row")
    for f in (w.workspace / "notes").glob("f*.txt") if w.workspace.exists() else ():
        k = int(f.stem[1:])
        if k not in recorded:
            fig.effects_without_record += 1
            fig.fail("no record", f"{where} {w.dir.name}: {f.name} exists and step {k} has no row")


def check_kept(w: World, fig: Figures, before: set[int], told: set[int], where: str) -> None:
    """What was completed (or shown completed) before the kill is completed now."""
    now = w.completed_steps()
    lost = before - now
    if lost:
        fig.lost_completed += len(lost)
        fig.fail(
            "lost", f"{where} {w.dir.name}: completed steps {sorted(lost)} are no longer completed"
        )
    untold = told - now
    if untold:
        fig.told_not_committed += len(untold)
        fig.fail(
            "told",
            f"{where} {w.dir.name}: steps {sorted(untold)} shown completed, recorded {sorted(untold & w.recorded_steps())}",
        )


def check_finished(w: World, fig: Figures, out: str, where: str) -> None:
    fig.effects += sum(w.ledger_counts().values())
    if w.workspace.exists():
        fig.effects += len(list((w.workspace / "notes").glob("f*.txt")))
    fig.settled += len(
        w.query(
            "SELECT 1 FROM traces WHERE session_id=? AND output_data LIKE '%checked after an interruption%'",
            (w.sid,),
        )
    )
    if w.status() != "Success":
        fig.stuck_sessions += 1
        fig.fail("stuck", f"{where} {w.dir.name}: status {w.status()}; output tail {out[-300:]!r}")


_TOLD = re.compile(r"↳ out(\d\d)")


def told_in(out: str) -> set[int]:
    return {int(m) for m in _TOLD.findall(out)}


# --- headless campaign ----------------------------------------------------------------------

PHASES = ("random", "llm", "tool", "shown", "recovery")


class Reader:
    """The process's output, read in a thread so a kill can follow a line at once."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        import threading

        self.proc = proc
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append("")  # EOF marker
            self.cond.notify_all()

    def wait_for(self, pattern: re.Pattern[str], start: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            i = start
            while True:
                while i < len(self.lines):
                    if self.lines[i] == "":
                        return None
                    if pattern.search(self.lines[i]):
                        return i
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def text(self) -> str:
        self.thread.join(timeout=30)
        return "".join(self.lines)


def headless_run(
    root: Path,
    name: str,
    kills: int,
    rng: random.Random,
    fig: Figures,
    *,
    power: bool = False,
    shim: Path | None = None,
) -> int:
    """One 30-step task with up to `kills` kills (power losses when `power`); returns kills made."""
    w = World(root, name, shim=shim if power else None)
    fig.runs += 1
    made = 0
    first = True
    while True:
        args = ["run", "--approval", "yolo", "--session", w.sid] + (
            ["do the task"] if first else []
        )
        before_seq = w.max_seq()
        t0 = time.monotonic()
        proc = w.run_cmd(*args)
        reader = Reader(proc)
        phase = "power" if power else rng.choice(PHASES if not first else PHASES[:4])
        if made >= kills:
            phase = "none"
        if not first and phase != "recovery":  # recovery time: to this process's first new step
            wait_until(lambda: w.max_seq() > before_seq or proc.poll() is not None, 60)
            if w.max_seq() > before_seq:
                fig.recovery_s.append(time.monotonic() - t0)
        if made >= kills:
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                kill(proc, read=False)
            out = reader.text()
            check_finished(w, fig, out, "end")
            check_effects(w, fig, "end")
            check_integrity(w, fig, "end")
            return made
        told: set[int] = set()
        if phase == "recovery":
            time.sleep(rng.uniform(0, 0.4))
        elif phase == "llm":
            wait_until(
                lambda: (
                    bool(
                        w.query(
                            "SELECT 1 FROM traces WHERE session_id=? AND step_type='llm_call' AND status='running'",
                            (w.sid,),
                        )
                    )
                    or proc.poll() is not None
                ),
                30,
            )
            time.sleep(rng.uniform(0, 0.05))
        elif phase == "tool":
            seq0 = w.max_seq()
            wait_until(
                lambda: (
                    bool(
                        w.query(
                            "SELECT 1 FROM traces WHERE session_id=? AND step_type='tool_call' AND status='running' AND seq>?",
                            (w.sid, seq0),
                        )
                    )
                    or proc.poll() is not None
                ),
                30,
            )
            time.sleep(rng.uniform(0, 0.03))
        elif phase == "shown":
            start = len(reader.lines)
            skip = rng.randint(0, 4)
            for _ in range(skip + 1):
                i = reader.wait_for(_TOLD, start, 30)
                if i is None:
                    break
                start = i + 1
        else:  # random, power
            time.sleep(rng.uniform(0.05, 2.5))
        if proc.poll() is not None:  # it finished before the kill landed: start over
            out = reader.text()
            check_finished(w, fig, out, "early end")
            check_effects(w, fig, "early end")
            check_integrity(w, fig, "early end")
            return made
        completed_before = w.completed_steps()
        kill(proc, read=False)
        out = reader.text()
        told = told_in(out)
        made += 1
        fig.kills[phase] += 1
        if power:
            fig.power_losses += 1
            w.lose_power()
        # Power lost: only what was synced survives, and a commit is synced just after it is
        # visible — the latest completed step may not be yet (unless it was told: after its
        # sync). The steps run one after another, each result committed and synced before the
        # next step begins: every earlier completed step is on disk.
        kept = set(completed_before)
        if power and kept:
            kept.discard(max(kept))
        check_kept(w, fig, kept, told, phase)
        check_effects(w, fig, phase)
        check_integrity(w, fig, phase)
        first = first and not w.query("SELECT 1 FROM traces WHERE session_id=?", (w.sid,))


# --- gateway campaign -----------------------------------------------------------------------


class Gateway:
    """`xclaw serve` of a world (`args`: more options; `name` tells several apart)."""

    def __init__(self, w: World, args: list[str] | None = None, name: str = "") -> None:
        self.w = w
        self.args = args or []
        self.name = name
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.token = ""
        self.starts = 0

    def start(self) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.starts += 1
        out = self.w.dir / f"serve-{self.name}{self.starts}.txt"
        with out.open("w") as f:
            self.proc = subprocess.Popen(
                [*XCLAW, "serve", "--port", str(self.port), *self.args],
                cwd=self.w.dir,
                env=self.w.env,
                stdout=f,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = out.read_text(errors="replace")
            if "?token=" in text and "Ctrl+C stops" in text:
                self.token = text.split("?token=", 1)[1].split()[0]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"xclaw serve did not start: {out.read_text()[-500:]}")

    def kill(self) -> None:
        if self.proc is not None:
            kill(self.proc, read=False)
            self.proc = None


async def _client(gw: Gateway) -> Any:
    from websockets.asyncio.client import connect

    return await connect(
        f"ws://127.0.0.1:{gw.port}/ws",
        additional_headers={"Authorization": f"Bearer {gw.token}"},
        max_size=None,
        open_timeout=20,
    )


async def _frames(conn: Any, sink: list[dict[str, Any]], stop: asyncio.Event) -> None:
    try:
        async for raw in conn:
            sink.append(json.loads(raw))
            stop.set()
    except Exception:  # noqa: BLE001 - the server was killed: the connection just ends
        return


def _told_frames(frames: list[dict[str, Any]]) -> set[int]:
    out: set[int] = set()
    for f in frames:
        if f.get("type") == "tool" and f.get("state") == "completed" and f.get("name") == "shell":
            m = re.search(r"echo (\d+) >>", json.dumps(f.get("input")))
            if m:
                out.add(int(m.group(1)))
    return out


async def gateway_run(root: Path, name: str, kills: int, rng: random.Random, fig: Figures) -> int:
    w = World(root, name)
    fig.runs += 1
    gw = Gateway(w)
    made = 0
    first = True
    try:
        while True:
            before_seq = w.max_seq()
            t0 = time.monotonic()
            gw.start()
            conn = await _client(gw)
            frames: list[dict[str, Any]] = []
            got = asyncio.Event()
            reader = asyncio.ensure_future(_frames(conn, frames, got))
            phase = rng.choice(("gw-random", "gw-tool", "gw-shown", "gw-recovery"))
            if first:
                await conn.send(json.dumps({"type": "reconnect", "sessionId": None}))
                await _until(lambda: any(f.get("type") == "session" for f in frames), 30)
                w.sid = next(f["sessionId"] for f in frames if f.get("type") == "session")
                await conn.send(
                    json.dumps({"type": "message", "sessionId": w.sid, "content": "do the task"})
                )
                first = False
                if phase == "gw-recovery":
                    phase = "gw-random"
            else:
                await conn.send(json.dumps({"type": "reconnect", "sessionId": w.sid}))
                if phase != "gw-recovery":
                    await _until(lambda: w.max_seq() > before_seq or w.status() == "Success", 60)
                    if w.max_seq() > before_seq:
                        fig.recovery_s.append(time.monotonic() - t0)

            def replied() -> bool:
                return any(f.get("type") == "reply" and f.get("content") == FINAL for f in frames)

            if made >= kills:
                ok = await _until(lambda: replied() or w.status() in ("Success", "Failed"), 300)
                check_finished(w, fig, FINAL if replied() else "", "gateway end")
                check_effects(w, fig, "gateway end")
                check_integrity(w, fig, "gateway end")
                await conn.close()
                reader.cancel()
                del ok
                return made
            if phase == "gw-recovery":
                await asyncio.sleep(rng.uniform(0, 0.3))
            elif phase == "gw-tool":
                n = rng.randint(0, 3)
                await _until(
                    lambda: (
                        sum(
                            1
                            for f in frames
                            if f.get("type") == "tool" and f.get("state") == "running"
                        )
                        > n
                        or replied()
                    ),
                    30,
                )
                await asyncio.sleep(rng.uniform(0, 0.02))
            elif phase == "gw-shown":
                n = rng.randint(0, 3)
                await _until(lambda: len(_told_frames(frames)) > n or replied(), 30)
            else:
                await asyncio.sleep(rng.uniform(0.05, 2.5))
            if replied():
                check_finished(w, fig, FINAL, "gateway early end")
                check_effects(w, fig, "gateway early end")
                check_integrity(w, fig, "gateway early end")
                await conn.close()
                reader.cancel()
                return made
            completed_before = w.completed_steps()
            told = _told_frames(frames)
            gw.kill()
            reader.cancel()
            made += 1
            fig.kills[phase] += 1
            check_kept(w, fig, completed_before, told, phase)
            check_effects(w, fig, phase)
            check_integrity(w, fig, phase)
    finally:
        gw.kill()


async def _until(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.005)
    return False


# --- rollback, fork, workspace restore --------------------------------------------------------


def _manifest_files(w: World, sid: str, seq: int) -> dict[str, str] | None:
    from xclaw.store import open_store

    store = open_store(str(w.db))
    try:
        found = store.snapshots.snapshot_from(sid, seq)
    finally:
        store.close()
    if found is None:
        return None
    return {p: e["hash"] for p, e in found[1].items() if isinstance(e, dict) and "hash" in e}


def _workspace_files(ws: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if ws.exists():
        for f in ws.rglob("*"):
            if f.is_file() and not f.is_symlink():
                out[str(f.relative_to(ws))] = sha256(f.read_bytes()).hexdigest()
    return out


def timetravel_run(root: Path, name: str, kills: int, rng: random.Random, fig: Figures) -> int:
    """A finished task, then rollbacks and forks killed at random moments (during the
    record's transaction or the files' restore), each followed by a recovery that is itself
    killed now and then; the workspace must end equal to the snapshot restored."""
    w = World(root, name)
    fig.runs += 1
    proc = w.run_cmd("run", "--approval", "yolo", "--session", w.sid, "do the task")
    out, _ = proc.communicate(timeout=300)
    check_finished(w, fig, out, "timetravel setup")
    made = 0
    while made < kills:
        top = w.max_seq()
        if top < 4:
            break
        target = rng.randint(2, top)
        kind = rng.choice(("rollback", "fork", "restore-recovery"))
        steps_before = len(w.query("SELECT 1 FROM traces WHERE session_id=?", (w.sid,)))
        expected = _manifest_files(w, w.sid, target)
        # No snapshot after the target: the source's files now. (An empty one is an empty
        # workspace, not "none": `or` took the files now for it.)
        after = _manifest_files(w, w.sid, target + 1)
        fork_expected = _workspace_files(w.workspace) if after is None else after
        sessions_before = {r[0] for r in w.query("SELECT session_id FROM sessions")}
        if kind in ("rollback", "restore-recovery"):
            p = w.run_cmd("rollback", w.sid, f"s{target:04d}", "-y")
        else:
            p = w.run_cmd("fork", w.sid, f"s{target:04d}", "--json")
        time.sleep(rng.uniform(0.0, 0.6))
        if p.poll() is None:
            kill(p)
            made += 1
            fig.kills[kind] += 1
        else:
            p.communicate()
        check_integrity(w, fig, kind)
        # Recovery: finish the restore journaled by the record's transaction (if it
        # committed) — killed once more at random for restore-recovery.
        rec = [*XCLAW[:1], "-c", _RECOVER, str(w.db), str(w.dir / "workspaces")]
        if kind == "restore-recovery" and made < kills:
            r = subprocess.Popen(
                rec,
                cwd=w.dir,
                env=w.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            time.sleep(rng.uniform(0, 0.3))
            if r.poll() is None:
                kill(r)
                made += 1
                fig.kills["restore-during-recovery"] += 1
            else:
                r.communicate()
        t0 = time.monotonic()
        r = subprocess.run(
            rec, cwd=w.dir, env=w.env, capture_output=True, check=False, text=True, timeout=120
        )
        fig.recovery_s.append(time.monotonic() - t0)
        if r.returncode != 0:
            fig.stuck_sessions += 1
            fig.fail(
                "restore",
                f"{kind} {w.dir.name}: recovery failed {r.stdout[-300:]} {r.stderr[-300:]}",
            )
        check_integrity(w, fig, kind)
        steps_after = len(w.query("SELECT 1 FROM traces WHERE session_id=?", (w.sid,)))
        new_sessions = {r[0] for r in w.query("SELECT session_id FROM sessions")} - sessions_before
        if kind != "fork" and steps_after < steps_before and expected is not None:
            got = _workspace_files(w.workspace)
            if got != expected:
                fig.integrity_failures += 1
                diff = sorted(set(got.items()) ^ set(expected.items()))[:4]
                fig.fail(
                    "restore",
                    f"{kind} {w.dir.name}: workspace differs from snapshot s{target:04d}: {diff}",
                )
        for fork in new_sessions:
            got = _workspace_files(w.dir / "workspaces" / fork)
            if got != fork_expected:
                fig.integrity_failures += 1
                diff = sorted(set(got.items()) ^ set(fork_expected.items()))[:4]
                fig.fail(
                    "fork", f"{w.dir.name}: fork {fork} at s{target:04d} workspace differs: {diff}"
                )
        if steps_after < steps_before:  # rolled back: carry on with a new instruction
            p = w.run_cmd("run", "--approval", "yolo", "--session", w.sid, "go on")
            out, _ = p.communicate(timeout=300)
            if w.status() not in ("Success",):
                fig.stuck_sessions += 1
                fig.fail("stuck", f"after {kind} {w.dir.name}: {w.status()} {out[-300:]!r}")
    return made


_RECOVER = (
    "import sys; from pathlib import Path; from xclaw.store import open_store; "
    "from xclaw.config.settings import load_settings; from xclaw.workspace.timetravel import Workspaces; "
    "s = open_store(sys.argv[1]); Workspaces.from_settings(s, load_settings().sandbox_setup(), Path(sys.argv[2])).recover(); "
    "assert not s.snapshots.pending_restores(), s.snapshots.pending_restores(); s.close()"
)


# --- main ----------------------------------------------------------------------------------


def build_shim(into: Path) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out = into / "powerloss_shim.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            str(out),
            str(ROOT / "bench" / "powerloss_shim.c"),
            "-ldl",
        ],
        check=True,
    )
    return out


def campaign(kills: int, power_losses: int, seed: int, root: Path) -> Figures:
    global FSCK
    FSCK = have_fsck()
    rng = random.Random(seed)
    fig = Figures()
    headless = kills * 5 // 10
    gateway = kills * 3 // 10
    travel = kills - headless - gateway
    n = 0
    made = 0
    while made < headless:
        n += 1
        made += headless_run(root, f"h{n:03d}", min(rng.randint(3, 6), headless - made), rng, fig)
    made = 0
    while made < gateway:
        n += 1
        made += asyncio.run(
            gateway_run(root, f"g{n:03d}", min(rng.randint(3, 6), gateway - made), rng, fig)
        )
    made = 0
    while made < travel:
        n += 1
        made += timetravel_run(root, f"t{n:03d}", min(rng.randint(4, 8), travel - made), rng, fig)
    if power_losses:
        shim = build_shim(root)
        if shim is None:
            fig.fail("power", "no C compiler: power losses not simulated")
        else:
            made = 0
            while made < power_losses:
                n += 1
                made += headless_run(
                    root,
                    f"p{n:03d}",
                    min(rng.randint(3, 6), power_losses - made),
                    rng,
                    fig,
                    power=True,
                    shim=shim,
                )
    return fig


def count(text: str) -> int:
    """A number of kills or power losses: a negative one would never be reached."""
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n}: must be 0 or more")
    return n


FAILURE_FIGURES = (
    "lostCompletedSteps",
    "toldCompletedNotCommitted",
    "repeatedCompletedSideEffects",
    "sideEffectsWithoutRecord",
    "integrityFailures",
    "stuckSessions",
)


def main() -> int:
    """Exit 1 when any failure figure is not 0, so a script or CI can act on the campaign."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--kills",
        type=count,
        default=200,
        help="SIGKILLs in all (half headless, 3/10 gateway, the rest time travel)",
    )
    ap.add_argument("--power-losses", type=count, default=40)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="the figures as one JSON object")
    ap.add_argument("--keep", action="store_true", help="keep the runs' directories")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    root = Path(tempfile.mkdtemp(prefix="xclaw-torture-"))
    t0 = time.monotonic()
    try:
        fig = campaign(args.kills, args.power_losses, seed, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    result = fig.as_json() | {
        "seed": seed,
        "seconds": round(time.monotonic() - t0, 1),
        "fsck": FSCK,
    }
    failed = any(result[key] for key in FAILURE_FIGURES) or bool(result["problems"])
    if args.json:
        print(json.dumps(result))
        return 1 if failed else 0
    print(
        f"torture campaign: seed {seed}, {result['seconds']} s, {result['runs']} runs of a {STEPS}-step task"
    )
    print(
        f"  kills: {result['kills']} {result['killsByPhase']}; power losses: {result['powerLosses']}"
    )
    print(
        f"  side effects checked: {result['sideEffects']}; interrupted file tools settled by the workspace: {result['settledByWorkspace']}"
    )
    for key in FAILURE_FIGURES:
        print(f"  {key:32} {result[key]}")
    print(f"  recovery p50 {result['recoveryP50s']} s, p95 {result['recoveryP95s']} s")
    for p in result["problems"]:
        print(f"  ! {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
