"""Outside effects under kills: a 10-call task whose every call records a payment in an
outside ledger (a SQLite file outside the workspace), run by a real process driving xclaw
through its Python API, SIGKILLed again and again, then finished. Two kinds of kill:

- random: at a uniformly random moment of the run (model answers, tool calls, recording);
- aimed: between a call's effect and its recording — the instant the ledger holds a row
  whose step is not yet recorded completed (the tool pauses after its insert).

Two subjects: `check` (the tool declares a settle check, `@xclaw.tool(settle=…)`) and `none`
(the same effect with nothing declared: xclaw's rule before settle checks, "may or may not
have run", re-run only if the model asks again and a person approves). The model re-issues an
interrupted call (an `after_interruption` turn); the person says yes to every question.

    python bench/effects_campaign.py [--random-kills 100] [--aimed-kills 73] [--seed N] [--json]

Figures per subject and kill kind: double effects (a payment recorded twice), lost effects
(a payment of the task missing at its end), questions to a person per 100 kills.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ledger import TOOL_MODULE  # noqa: E402 - after the path is set

CALLS = 10
TOOLS = {"check": "record_payment", "none": "record_payment_unchecked"}

DRIVER = """
import asyncio, os, sys
import xclaw

async def main():
    base = sys.argv[1]
    sid_file = os.path.join(base, "session")
    asked = os.path.join(base, "questions.log")

    def yes(event):
        with open(asked, "a") as f:
            f.write(event.step_id + "\\n")
            f.flush()
            os.fsync(f.fileno())
        return True

    async with xclaw.open(
        db=os.path.join(base, "xclaw.db"), model="script:" + os.path.join(base, "script.json"),
        approval="yolo", workspace=os.path.join(base, "ws"), home=base, cwd=base,
    ) as agent:
        if os.path.exists(sid_file):
            session = await agent.session(open(sid_file).read())
        else:
            session = await agent.new_session(title="payments")
            with open(sid_file, "w") as f:
                f.write(session.id)
        if any(s.type == "user_input" for s in await session.steps()):
            await session.resume(approve=yes)
        else:  # killed before the task's message was recorded: it is sent (again)
            await session.send("record the ten payments", approve=yes)
        print("DONE", flush=True)

asyncio.run(main())
"""


def script(tool: str) -> dict[str, Any]:
    """Each call, then the model asking for it again if it was interrupted."""
    turns: list[dict[str, Any]] = []
    for k in range(CALLS):
        call = {"name": tool, "input": {"ref": f"T{k}", "amount": k + 1}}
        turns.append({"text": f"payment {k}", "sleep": 0.05, "tool_calls": [call]})
        turns.append({"after_interruption": True, "text": "again", "tool_calls": [call]})
    turns.append({"text": "all ten recorded"})
    return {"turns": turns}


class Run:
    """One run of the task in its own directory."""

    def __init__(self, base: Path, subject: str) -> None:
        self.base = base
        base.mkdir(parents=True)
        (base / "script.json").write_text(json.dumps(script(TOOLS[subject])))
        (base / "ledger_tools.py").write_text(textwrap.dedent(TOOL_MODULE))
        (base / "xclaw.yaml").write_text(
            "tools: ['ledger_tools:record_payment', 'ledger_tools:record_payment_unchecked']\n"
        )
        (base / "driver.py").write_text(DRIVER)
        self.ledger = base / "ledger.db"
        conn = sqlite3.connect(self.ledger)
        conn.execute("CREATE TABLE payments (id INTEGER PRIMARY KEY, ref TEXT, amount INTEGER)")
        conn.commit()
        conn.close()

    def start(self, pause_after: float) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "LEDGER_URL": str(self.ledger),
            "PAY_PAUSE_AFTER": str(pause_after),
            "PYTHONPATH": str(ROOT),
        }
        env.pop("XCLAW_CONFIG", None)
        return subprocess.Popen(
            [sys.executable, str(self.base / "driver.py"), str(self.base)],
            cwd=self.base,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def refs(self) -> list[str]:
        conn = sqlite3.connect(self.ledger, timeout=10)
        try:
            return [r[0] for r in conn.execute("SELECT ref FROM payments ORDER BY id")]
        finally:
            conn.close()

    def questions(self) -> int:
        path = self.base / "questions.log"
        return len(path.read_text().split()) if path.exists() else 0


def kill(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL; False when it had already finished (no kill happened)."""
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return True


def random_kill(run: Run, rng: random.Random, span: float) -> bool:
    proc = run.start(pause_after=0.05)
    deadline = time.monotonic() + rng.uniform(0.0, span)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    return kill(proc)


def aimed_kill(run: Run) -> bool:
    """Killed the instant this process's first effect is in the ledger: the tool pauses
    after its insert, so its step is still `running` (not yet recorded completed)."""
    before = len(run.refs())
    proc = run.start(pause_after=0.4)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if len(run.refs()) > before:
            return kill(proc)
        time.sleep(0.002)
    return kill(proc)


def finish(run: Run) -> None:
    proc = run.start(pause_after=0.0)
    out, _ = proc.communicate(timeout=300)
    if b"DONE" not in out:
        raise SystemExit(f"the run in {run.base} did not finish:\n{out.decode()[-3000:]}")


def whole_run_s(subject: str, tmp: Path) -> float:
    """How long one run of the task takes unkilled, start-up included: random kills fall
    within it."""
    run = Run(tmp / f"{subject}-calibration", subject)
    began = time.monotonic()
    finish(run)
    return time.monotonic() - began


def campaign(
    subject: str, kind: str, kills: int, rng: random.Random, tmp: Path, span: float
) -> dict[str, Any]:
    done = runs = 0
    doubles = lost = questions = 0
    while done < kills:
        run = Run(tmp / f"{subject}-{kind}-{runs}", subject)
        runs += 1
        for _ in range(min(rng.randint(2, 5), kills - done)):
            landed = aimed_kill(run) if kind == "aimed" else random_kill(run, rng, span)
            done += landed
            if not landed:
                break
        finish(run)
        counts = Counter(run.refs())
        doubles += sum(n - 1 for n in counts.values() if n > 1)
        lost += sum(1 for k in range(CALLS) if counts[f"T{k}"] == 0)
        questions += run.questions()
    return {
        "subject": subject,
        "kills": kind,
        "killsLanded": done,
        "runs": runs,
        "doubleEffects": doubles,
        "lostEffects": lost,
        "questions": questions,
        "questionsPer100Kills": round(100 * questions / max(done, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random-kills", type=int, default=100)
    parser.add_argument("--aimed-kills", type=int, default=73)
    parser.add_argument("--subjects", default="check,none")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    began = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="xclaw-effects-") as tmp:
        for subject in args.subjects.split(","):
            span = whole_run_s(subject, Path(tmp))
            for kind, kills in (("random", args.random_kills), ("aimed", args.aimed_kills)):
                if kills:
                    rows.append(campaign(subject, kind, kills, rng, Path(tmp), span))
    if args.json:
        print(
            json.dumps({"seed": seed, "seconds": round(time.monotonic() - began, 1), "rows": rows})
        )
        return
    print(f"effects campaign: seed {seed}, {time.monotonic() - began:.1f} s")
    print(
        f"  {'subject':8} {'kills':7} {'landed':>6} {'runs':>5} {'double':>7} {'lost':>5} "
        f"{'questions':>9} {'per 100 kills':>13}"
    )
    for r in rows:
        print(
            f"  {r['subject']:8} {r['kills']:7} {r['killsLanded']:>6} {r['runs']:>5} "
            f"{r['doubleEffects']:>7} {r['lostEffects']:>5} {r['questions']:>9} "
            f"{r['questionsPer100Kills']:>13}"
        )


if __name__ == "__main__":
    main()
