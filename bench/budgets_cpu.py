"""The budget check's cost in instructions, which a loaded machine does not move.

`gateway_bench.py --budgets` reads the server's CPU time, which a busy neighbour moves by
±30 % (more at load 10+); this runs the same 20-step task (list_dir, the instant scripted
model) in-process — `xclaw.open`, the runtime `xclaw serve` runs — so that valgrind can count
its instructions. One warm-up round, then `TASKS` rounds of `SESSIONS` new sessions at once;
printed: CPU ms and wall ms per step (getrusage, all threads) and steps per commit. Modes:
`base` (no cap), `session` (the session's cap), `budgets` (the session's and the deployment's
day and month, as `gateway_bench.py --budgets`: their counters kept). Caps no task reaches.

Instructions per step: run each mode at two lengths under callgrind and divide the
difference by the steps between them (start-up cancels out):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python \\
        bench/budgets_cpu.py session 5 1      # then 25 1; "Collected" / 400 steps apart

Under valgrind everything runs ~50x slower, so what is timed by the clock runs more often a
step than it would (the shared scopes' totals read at most every 2 s of wall time: read once
a turn) and the writer's 2 ms wait for company is shorter in instructions; steps/commit say
how far the commits moved. bench/README.md, "Budgets", has the figures.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import xclaw
from bench.gateway_bench import STEPS_PER_TASK, script

CAPS: dict[str, dict[str, float]] = {
    "budgets": {
        "session_tokens": 10**9,
        "total_daily_tokens": 10**12,
        "total_monthly_usd": 10**6,
    },
    "session": {"session_tokens": 10**9},
}


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def prepare(prefix: str) -> Path:
    """A home with the 20-step script and an empty workspace."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    (home / "script.json").write_text(json.dumps(script("list_dir")))
    (home / "ws").mkdir()
    return home


def open_agent(home: Path, mode: str) -> Any:
    """`xclaw.open` on `home` (prepare) with the caps of `mode` (none for `base`)."""
    config: dict[str, Any] = {"approval": {"mode": "yolo"}, "max_iterations": 50}
    if mode in CAPS:
        config["budgets"] = CAPS[mode]
    return xclaw.open(
        db=home / "xclaw.db",
        model=f"script:{home / 'script.json'}",
        config=config,
        cwd=home,
        workspace=home / "ws",
        home=home,
    )


async def one_task(agent: Any) -> None:
    """The 20-step task in a new session."""
    session = await agent.new_session()
    async for _ in session.send("go"):
        pass


async def main(mode: str, tasks: int, sessions: int) -> None:
    home = prepare("xclaw-budgets-cpu-")
    async with open_agent(home, mode) as agent:

        def task() -> Any:
            return one_task(agent)

        await asyncio.gather(*(task() for _ in range(sessions)))  # warm-up
        store = agent.runtime.store  # the writer's commits
        commits, cpu, wall = store.record.commits, cpu_s(), time.perf_counter()
        for _ in range(tasks):
            await asyncio.gather(*(task() for _ in range(sessions)))
        steps = tasks * sessions * STEPS_PER_TASK
        print(
            json.dumps(
                {
                    "mode": mode,
                    "sessions": sessions,
                    "steps": steps,
                    "cpu_ms_per_step": round((cpu_s() - cpu) * 1000 / steps, 4),
                    "wall_ms_per_step": round((time.perf_counter() - wall) * 1000 / steps, 4),
                    "steps_per_commit": round(steps / max(1, store.record.commits - commits), 3),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("base", *CAPS):
        raise SystemExit("usage: budgets_cpu.py base|session|budgets TASKS SESSIONS")
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
