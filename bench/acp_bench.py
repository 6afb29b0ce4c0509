"""`xclaw acp` side by side with `xclaw run`: the CPU one step costs through each, and how
soon the first `session/update` of a prompt reaches the editor after the model's first token.

Both runs play the same script (N turns, each a `read_file` call, yolo), in fresh processes on
fresh databases; CPU is the process's user+system time (RUSAGE_CHILDREN after it exits), so
start-up is in both and cancels in the difference. The first-token latency is measured on
`--prompts` prompts that each answer in text at once: from the llm_call step's recorded start
(the scripted model streams its first words as the call starts) to the client receiving the
first agent_message_chunk, same machine clock, millisecond resolution.

    .venv/bin/python bench/acp_bench.py [--steps 200] [--prompts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acp import spawn_agent_process, text_block  # noqa: E402

from tests.acp.client import Editor, agent_env  # noqa: E402


def _script(path: Path, steps: int, prompts: int) -> None:
    read = {"name": "read_file", "input": {"path": "README.md"}}
    turns: list[dict[str, Any]] = [{"tool_calls": [read]} for _ in range(steps)]
    turns.append({"text": "done reading"})
    turns += [{"text": f"answer {i} in words"} for i in range(prompts)]
    path.write_text(json.dumps({"turns": turns}))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cpu(tmp: Path, env: dict[str, str]) -> float:
    before = _children_cpu()
    subprocess.run(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", "read it"],
        env=env,
        cwd=tmp,
        check=True,
        capture_output=True,
    )
    return _children_cpu() - before


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
        await conn.prompt(session_id=sid, prompt=[text_block("read it")])
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
    cpu = _children_cpu() - before
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--prompts", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-"))
    cpu: dict[str, float] = {}
    for n in (0, args.steps):
        case, env = _case(tmp, f"run{n}", n, 0)
        cpu[f"run{n}"] = run_cpu(case, env)
        case, env = _case(tmp, f"acp{n}", n, 0)
        cpu[f"acp{n}"] = asyncio.run(acp_cpu_and_latency(case, env, 0))[0]
    case, env = _case(tmp, "latency", 0, args.prompts)
    _, lat = asyncio.run(acp_cpu_and_latency(case, env, args.prompts))
    steps = 2 * args.steps  # an llm_call and a tool_call per turn
    per = {k: 1000 * (cpu[f"{k}{args.steps}"] - cpu[f"{k}0"]) / steps for k in ("run", "acp")}
    out = {
        "cpu_s": cpu,
        "per_step_cpu_ms": per,
        "acp_over_run": per["acp"] / per["run"] - 1,
        "first_update_ms": {"median": statistics.median(lat), "max": max(lat)},
        "load": os.getloadavg(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
