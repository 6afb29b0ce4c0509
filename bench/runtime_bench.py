"""What recording costs: the whole runtime (agent loop + scripted model + a no-op tool) with
recording on and off, side by side in one run, next to the store's own durable-commit cost.

    python bench/runtime_bench.py [--iterations N] [--rounds R]

One iteration = one LLM call + one tool call (two steps recorded, one write-ahead commit).
Goal (issue 3): recording costs no more than the store's durable commits plus 15%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.agent.loop import Agent, AgentConfig  # noqa: E402
from xclaw.llm.scripted import ScriptedModel  # noqa: E402
from xclaw.messages import ToolCall  # noqa: E402
from xclaw.recorder.recorder import Recorder, StoreCaller  # noqa: E402
from xclaw.recorder.redact import Redactor  # noqa: E402
from xclaw.store import open_store  # noqa: E402
from xclaw.store.model import NewStep, StepType  # noqa: E402
from xclaw.tools.base import ToolContext, ToolResult  # noqa: E402


class NoopTool:
    name = "noop"
    description = "does nothing"
    input_schema: dict[str, Any] = {"type": "object"}
    read_only = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult("ok")


class Allow:
    kind = "allow"
    reason = ""

    def decide(self, tool: Any, args: Any) -> "Allow":
        return self


class NullObserver:
    """Recording off: the loop's events go nowhere."""

    async def user_input(self, text: str) -> None: ...
    async def llm_started(self, *a: Any) -> None: ...
    async def llm_delta(self, text: str) -> None: ...
    async def llm_finished(self, r: Any) -> None: ...
    async def llm_failed(self, e: str) -> None: ...
    async def approval_requested(self, *a: Any) -> None: ...
    async def approval_decided(self, *a: Any) -> None: ...
    async def tool_started(self, *a: Any) -> None: ...
    async def tool_finished(self, *a: Any) -> None: ...
    async def tool_refused(self, *a: Any) -> None: ...
    async def alert(self, *a: Any) -> None: ...

    def child(self, call: ToolCall) -> "NullObserver":
        return self


def make_script(path: Path, iterations: int) -> ScriptedModel:
    turn = {"text": "", "tool_calls": [{"name": "noop", "input": {"payload": "x" * 200}}]}
    path.write_text(json.dumps({"turns": [turn] * iterations + [{"text": "done"}]}))
    return ScriptedModel(path)


async def run_agent(model: ScriptedModel, observer: Any, tmp: Path, iterations: int) -> float:
    agent = Agent(
        model=model, tools={"noop": NoopTool()}, policy=Allow(), approver=None,  # type: ignore[arg-type]
        observer=observer, context=ToolContext(workspace=tmp, session_id="bench"),
        config=AgentConfig(max_iterations=iterations + 5),
    )
    t0 = time.perf_counter()
    answer = await agent.run([], user_text="go")
    elapsed = time.perf_counter() - t0
    assert answer == "done", answer
    return elapsed


async def one_round(tmp: Path, iterations: int, k: int) -> tuple[float, float, float]:
    model = make_script(tmp / f"script{k}.json", iterations)
    off = await run_agent(model, NullObserver(), tmp, iterations)

    store = open_store(tmp / f"on{k}.db")
    sid = store.create_session().session_id
    recorder = Recorder(db=StoreCaller(store), session_id=sid, emit=lambda f: None, redact=Redactor())
    on = await run_agent(model, recorder, tmp, iterations)
    store.close()

    # The store's own cost for the same writes, called directly (no loop, no thread hop):
    # per iteration one llm_call begin+complete and one tool_call begin+complete.
    store = open_store(tmp / f"raw{k}.db")
    sid = store.create_session().session_id
    t0 = time.perf_counter()
    for _ in range(iterations):
        llm = store.begin_step(sid, NewStep(StepType.LLM_CALL, "script", {"model": "m"}))
        store.complete_step(sid, llm.seq, output_data={"text": "", "tool_calls": []})
        tool = store.begin_step(sid, NewStep(StepType.TOOL_CALL, "noop", {"payload": "x" * 200}))
        store.complete_step(sid, tool.seq, output_data="ok")
    raw = time.perf_counter() - t0
    store.close()
    return off, on, raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.iterations
    with tempfile.TemporaryDirectory() as d:
        rounds = [asyncio.run(one_round(Path(d), n, k)) for k in range(args.rounds)]
    off = statistics.median(r[0] for r in rounds) / n * 1000
    on = statistics.median(r[1] for r in rounds) / n * 1000
    raw = statistics.median(r[2] for r in rounds) / n * 1000
    overhead = on - off
    print(f"runtime benchmark: {n} iterations (1 LLM call + 1 tool call each), median of {args.rounds} rounds")
    print(f"{'':38}{'ms/iteration':>14}{'iterations/s':>14}")
    print(f"{'recording off (null observer)':38}{off:14.3f}{1000 / off:14.0f}")
    print(f"{'recording on (SQLite, durable)':38}{on:14.3f}{1000 / on:14.0f}")
    print(f"{'store alone (same 4 writes, direct)':38}{raw:14.3f}{1000 / raw:14.0f}")
    ratio = overhead / raw
    print(f"recording overhead = on - off = {overhead:.3f} ms/iteration = {ratio:.2f}x the store's own cost")
    print(f"goal: <= 1.15x  ->  {'MET' if ratio <= 1.15 else 'NOT MET'}")


if __name__ == "__main__":
    main()
