"""`xclaw acp` side by side with `xclaw run`: the CPU one step costs through each, and how
soon the first `session/update` of a prompt reaches the editor after the model's first token.

Both runs play the same script (N turns, each a `read_file` call, yolo), in fresh processes on
fresh databases; CPU is the process's user+system time (RUSAGE_CHILDREN after it exits) less
what it had spent when its first model call began (the script makes that call wait, so the
process is idle then and /proc says how much its start-up took: most of a process's CPU, and
most of the noise); the same with no step is subtracted (its end, its first call). The first-token latency is measured on
`--prompts` prompts that each answer in text at once: from the llm_call step's recorded start
(the scripted model streams its first words as the call starts) to the client receiving the
first agent_message_chunk, same machine clock, millisecond resolution.

    .venv/bin/python bench/acp_bench.py [--steps 300] [--prompts 20] [--rounds 5]

Each round measures both, in alternating order (run first in even rounds, acp first in odd
ones), so that a change of the machine's load hits both alike; the figures are the medians of
the rounds, each round's own shown beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acp import spawn_agent_process, text_block  # noqa: E402

from tests.acp.client import Editor, agent_env  # noqa: E402

# The first model call waits this long: the process is started up and idle, and its CPU so
# far (start-up: most of a process's CPU, and its noise) is read then and left out.
SETTLE_S = 1.5


def _script(path: Path, steps: int, prompts: int) -> None:
    read = {"name": "read_file", "input": {"path": "README.md"}}
    turns: list[dict[str, Any]] = [{"tool_calls": [read]} for _ in range(steps)]
    turns.append({"text": "done reading"})
    turns[0]["sleep"] = SETTLE_S
    turns += [{"text": f"answer {i} in words"} for i in range(prompts)]
    path.write_text(json.dumps({"turns": turns}))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu_of(pid: int) -> float:
    """A live process's CPU time so far, every thread of it (schedstat: nanoseconds)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread gone meanwhile
    return total / 1e9


async def _started_up(pid: int) -> float:
    """The process's CPU once it has gone idle (waiting on the first model call)."""
    last = _cpu_of(pid)
    while True:
        await asyncio.sleep(0.1)
        now = _cpu_of(pid)
        if now - last < 0.001:
            return now
        last = now


async def run_cpu(tmp: Path, env: dict[str, str]) -> float:
    """`xclaw run`'s CPU after its start-up, to its exit."""
    before = _children_cpu()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "xclaw",
        "run",
        "--approval",
        "yolo",
        "read it",
        env=env,
        cwd=tmp,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    started = await _started_up(proc.pid)
    assert await proc.wait() == 0
    return _children_cpu() - before - started


async def acp_cpu_and_latency(
    tmp: Path, env: dict[str, str], prompts: int
) -> tuple[float, list[float]]:
    import xclaw

    editor = Editor()
    before = _children_cpu()
    latencies: list[float] = []
    async with spawn_agent_process(
        editor, sys.executable, "-m", "xclaw", "acp", "--approval", "yolo", env=env, cwd=tmp
    ) as (conn, proc):
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp / "project"), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("read it")]))
        started = await _started_up(proc.pid)
        await first
        for i in range(prompts):
            seen = len(editor.updates)
            arrived: list[float] = []

            def first(n: int = seen, box: list[float] = arrived) -> bool:
                for _, u in editor.updates[n:]:
                    if u.session_update == "agent_message_chunk":
                        box.append(time.time() * 1000)
                        return True
                return False

            task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block(f"q{i}")]))
            await editor.until(first)
            await task
            latencies.append(arrived[0])
        proc.stdin.close()
        await proc.wait()
    cpu = _children_cpu() - before - started
    if not prompts:
        return cpu, []
    async with xclaw.open(db=env["XCLAW_DB"], model="script:/dev/null") as agent:
        steps = await (await agent.session(sid)).steps()
    starts = [s.start_time for s in steps if s.type == "llm_call"][-prompts:]
    return cpu, [a - s for a, s in zip(latencies, starts, strict=True)]


def _case(tmp: Path, name: str, steps: int, prompts: int) -> tuple[Path, dict[str, str]]:
    case = tmp / name
    (case / "project").mkdir(parents=True)
    (case / "project" / "README.md").write_text("hello\n" * 50)
    script = case / "script.json"
    _script(script, steps, prompts)
    config = case / "xclaw.yaml"
    config.write_text(f"max_iterations: {steps + 10}\n")
    env = agent_env(
        XCLAW_MODEL=f"script:{script}",
        XCLAW_DB=str(case / "x.db"),
        XCLAW_HOME=str(case / "home"),
        HOME=str(case),
        XCLAW_CONFIG=str(config),
    )
    return case, env


def one_round(tmp: Path, r: int, steps: int, prompts: int) -> dict[str, Any]:
    cpu: dict[str, float] = {}
    kinds = ("run", "acp") if r % 2 == 0 else ("acp", "run")
    for n in (0, steps):
        for kind in kinds:
            case, env = _case(tmp, f"r{r}-{kind}{n}", n, 0)
            if kind == "run":
                cpu[f"run{n}"] = asyncio.run(run_cpu(case, env))
            else:
                cpu[f"acp{n}"] = asyncio.run(acp_cpu_and_latency(case, env, 0))[0]
    case, env = _case(tmp, f"r{r}-latency", 0, prompts)
    _, lat = asyncio.run(acp_cpu_and_latency(case, env, prompts))
    per = {k: 1000 * (cpu[f"{k}{steps}"] - cpu[f"{k}0"]) / (2 * steps) for k in ("run", "acp")}
    return {
        "per_step_cpu_ms": per,
        "acp_over_run": per["acp"] / per["run"] - 1,
        "first_update_ms": {"median": statistics.median(lat), "max": max(lat)},
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-"))
    rounds = [one_round(tmp, r, args.steps, args.prompts) for r in range(args.rounds)]

    def median(get: Any) -> float:
        return statistics.median(get(x) for x in rounds)

    out = {
        "rounds": rounds,
        "median": {
            "run_per_step_cpu_ms": median(lambda x: x["per_step_cpu_ms"]["run"]),
            "acp_per_step_cpu_ms": median(lambda x: x["per_step_cpu_ms"]["acp"]),
            "acp_over_run": median(lambda x: x["acp_over_run"]),
            # the medians' ratio: steadier than the rounds' ratios when one process of a round
            # started slowly (the start-up is most of each process's CPU)
            "acp_over_run_of_medians": median(lambda x: x["per_step_cpu_ms"]["acp"])
            / median(lambda x: x["per_step_cpu_ms"]["run"])
            - 1,
            "first_update_ms": median(lambda x: x["first_update_ms"]["median"]),
            "first_update_max_ms": max(x["first_update_ms"]["max"] for x in rounds),
        },
        "load": os.getloadavg(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
