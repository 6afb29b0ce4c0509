"""What recording costs: the whole runtime (agent loop + scripted model + a no-op tool) with
recording on and off, side by side in one run, next to the store's own durable-commit cost.

    python bench/runtime_bench.py [--iterations N] [--rounds R] [--llm-ms 0 5]
    python bench/runtime_bench.py --api [--iterations N] [--rounds R]

`--api` measures the Python API instead (docs/python-api.md): one turn driven through
`xclaw.open`'s Session.send (every event read into its typed class) side by side with the same
Runtime driven directly (send + wait_idle, frames dropped). Goal: the API adds <= 5 %.

    python bench/runtime_bench.py --agent [--iterations N] [--rounds R]

`--agent` measures declared agents (docs/agents.md), through the runtime, side by side:
xclaw's own agent, a declared agent that uses none of the features (the same tools), and one
with a before_tool and an after_tool hook (each deciding on every call, each decision a
recorded step) and a structured answer. Goals: a declared agent without features costs what
xclaw's own does (<= 2 %); hooks and output validation add <= 5 % per step.

One iteration = one LLM call + one tool call (two steps recorded, one write-ahead commit).
"Store alone" replays exactly the writes the recorder made (same rows, order, durability)
directly on a fresh database. Goal: recording costs no more than the store's
durable commits plus 15%.
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
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.agent.loop import Agent, AgentConfig
from xclaw.llm.messages import ToolCall, call_signature
from xclaw.llm.scripted import ScriptedModel
from xclaw.recorder.recorder import Recorder, StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.store import open_store
from xclaw.store.steps.writes import Write
from xclaw.tools.base import Tool, ToolContext, ToolResult


class NoopTool(Tool):
    name = "noop"
    description = "does nothing"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    read_only = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult("ok")


class Allow:
    kind = "allow"
    reason = ""
    confine = False

    async def review(self, tool: Any, args: Any, workspace: Any) -> Allow:
        return self


class NullObserver:
    """Recording off: the loop's events go nowhere."""

    async def user_input(self, text: str) -> None: ...
    async def llm_started(self, *a: Any) -> None: ...
    async def llm_delta(self, text: str) -> None: ...
    async def llm_thinking(self, block: Any) -> None: ...
    async def llm_thinking_discarded(self) -> None: ...
    async def llm_notice(self, text: str) -> None: ...
    async def compaction_finished(self, r: Any, summarised: int) -> None: ...

    def recorded_signature(self, call: ToolCall) -> str:
        return call_signature(call.name, call.input)

    async def llm_finished(self, r: Any) -> None: ...
    async def llm_failed(self, e: str) -> None: ...
    async def approval_requested(self, *a: Any) -> None: ...
    async def approval_decided(self, *a: Any) -> None: ...
    async def tool_started(self, *a: Any) -> None: ...
    async def tool_finished(self, *a: Any) -> None: ...
    async def tool_refused(self, *a: Any) -> None: ...
    async def alert(self, *a: Any) -> None: ...

    async def resume_child(self, call: ToolCall) -> None:
        return None

    def child(self, call: ToolCall) -> NullObserver:
        return self


def make_script(path: Path, iterations: int, llm_s: float = 0.0) -> ScriptedModel:
    turn: dict[str, Any] = {
        "text": "",
        "tool_calls": [{"name": "noop", "input": {"payload": "x" * 200}}],
    }
    if llm_s:
        turn["sleep"] = llm_s
    path.write_text(json.dumps({"turns": [turn] * iterations + [{"text": "done"}]}))
    return ScriptedModel(path)


async def run_agent(model: ScriptedModel, observer: Any, tmp: Path, iterations: int) -> float:
    agent = Agent(
        model=model,
        tools={"noop": NoopTool()},
        policy=Allow(),
        approver=None,  # type: ignore[arg-type]
        observer=observer,
        context=ToolContext(workspace=tmp, session_id="bench"),
        config=AgentConfig(max_iterations=iterations + 5),
    )
    t0 = time.perf_counter()
    answer = await agent.run([], user_text="go")
    elapsed = time.perf_counter() - t0
    assert answer == "done", answer
    return elapsed


class Capture:
    """The store, recording every write the recorder puts on its stream, to apply them
    again directly."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.writes: list[Write] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def write_stream(self, lease: Any = None) -> Any:
        stream = self._store.record.write_stream(lease)
        writes = self.writes

        class Recording:
            def put(self, write: Write) -> Any:
                writes.append(write)
                return stream.put(write)

            def last(self) -> Any:
                return stream.last()

        return Recording()


Round = tuple[
    float, float, float, int, int
]  # off s, on s, store-alone s, on commits, store commits


async def one_round(tmp: Path, iterations: int, k: int, llm_s: float = 0.0) -> Round:
    model = make_script(tmp / f"script{k}-{llm_s}.json", iterations, llm_s)
    off = await run_agent(model, NullObserver(), tmp, iterations)

    store = open_store(tmp / f"on{k}-{llm_s}.db")
    sid = store.record.create_session().session_id
    capture = Capture(store)
    recorder = Recorder(
        db=StoreCaller(store.record),
        writes=capture.write_stream(),
        session_id=sid,
        emit=lambda f: None,
        redact=Redactor(),
    )
    c0 = store.record.commits
    on = await run_agent(model, recorder, tmp, iterations)
    on_commits = store.record.commits - c0
    store.close()

    # The store's own cost for exactly the same writes (same rows, same order, same
    # durability), applied directly: no loop, no thread hop, no recorder.
    store = open_store(tmp / f"raw{k}-{llm_s}.db")
    store.record.create_session(session_id=sid)
    c0 = store.record.commits
    t0 = time.perf_counter()
    for write in capture.writes:  # each its own transaction, synced as writes.SYNC says
        store.record.write(write)
    raw = time.perf_counter() - t0
    raw_commits = store.record.commits - c0
    store.close()
    return off, on, raw, on_commits, raw_commits


def report(n: int, rounds: list[Round], llm_ms: float) -> None:
    off = statistics.median(r[0] for r in rounds) / n * 1000
    on = statistics.median(r[1] for r in rounds) / n * 1000
    raw = statistics.median(r[2] for r in rounds) / n * 1000
    overhead = on - off
    ratio = overhead / raw
    print(f"\nmodel answers in {llm_ms:g} ms")
    print(f"{'':40}{'ms/iteration':>14}{'iterations/s':>14}")
    print(f"{'recording off (null observer)':40}{off:14.3f}{1000 / off:14.0f}")
    print(f"{'recording on (SQLite, durable)':40}{on:14.3f}{1000 / on:14.0f}")
    print(f"{'store alone (the same writes, replayed)':40}{raw:14.3f}{1000 / raw:14.0f}")
    on_c = statistics.median(r[3] for r in rounds) / n
    raw_c = statistics.median(r[4] for r in rounds) / n
    print(
        f"commits per iteration: recording {on_c:.2f}, store alone {raw_c:.2f} "
        "(the recorder's writes share transactions: Store.write_stream)"
    )
    print(
        f"recording adds {overhead:.3f} ms/iteration = {ratio:.2f}x the store's own cost "
        f"(goal <= 1.15x: {'met' if ratio <= 1.15 else 'not met'})"
    )


# --- --api: the Python API's own cost, over the Runtime it drives ---------------------------


async def api_round(tmp: Path, iterations: int, k: int, through_api: bool) -> tuple[float, float]:
    """(wall s, CPU s) of one turn of `iterations` iterations on a fresh database: driven
    through the Python API (Session.send, every event read into its typed class), or by the
    same Runtime directly (send + wait_idle, its frames to a subscriber that drops them)."""
    import xclaw

    @xclaw.tool
    async def noop(payload: str) -> str:
        """does nothing"""
        return "ok"

    script = tmp / f"api-script{k}.json"
    make_script(script, iterations)
    agent = await xclaw.open(
        db=tmp / f"api{k}-{through_api}.db",
        home=tmp / "home",
        model=f"script:{script}",
        approval="yolo",
        config={"max_iterations": iterations + 5},
        tools=[noop],
    )
    try:
        session = await agent.new_session(title="bench")
        rt = agent.runtime  # type: ignore[attr-defined]
        w0, c0 = time.perf_counter(), time.process_time()
        if through_api:
            events = 0
            async for _event in session.send("go"):
                events += 1
            assert events > iterations * 4, events
        else:
            unsubscribe = rt.subscribe(session.id, lambda frame: None)
            await rt.send(session.id, "go")
            await rt.wait_idle(session.id)
            unsubscribe()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        # Each iteration: the LLM call, the outside_effects alert a Python tool's call gets,
        # the tool call; then the message and the final answer.
        assert len(await session.steps()) == 3 * iterations + 2
        return wall, cpu
    finally:
        await agent.close()


def api_bench(n: int, rounds: int) -> None:
    print(
        f"Python API over the runtime: {n} iterations (1 LLM call + 1 tool call each, "
        f"model instant), median of {rounds} rounds, runtime and API alternated"
    )
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as d:
        for k in range(rounds):
            for through_api in (False, True) if k % 2 == 0 else (True, False):
                runs[through_api].append(asyncio.run(api_round(Path(d), n, k, through_api)))
    print(f"{'':48}{'wall ms/it':>12}{'CPU ms/it':>12}")
    med: dict[bool, tuple[float, float]] = {}
    for through_api, label in (
        (False, "runtime (send + wait_idle, frames dropped)"),
        (True, "Python API (Session.send, typed events)"),
    ):
        wall = statistics.median(r[0] for r in runs[through_api]) / n * 1000
        cpu = statistics.median(r[1] for r in runs[through_api]) / n * 1000
        med[through_api] = (wall, cpu)
        print(f"{label:48}{wall:12.3f}{cpu:12.3f}")
    added_wall = med[True][0] / med[False][0] - 1
    added_cpu = med[True][1] / med[False][1] - 1
    print(
        f"the API adds {added_wall:+.1%} wall time and {added_cpu:+.1%} CPU per iteration "
        f"(goal <= +5%: {'met' if max(added_wall, added_cpu) <= 0.05 else 'not met'})"
    )


# --- --agent: declared agents' own cost ------------------------------------------------------


AGENT_VARIANTS = ("default", "declared", "hooks+output")


async def agent_round(
    tmp: Path, iterations: int, k: int, variant: str, llm_s: float = 0.0
) -> tuple[float, float]:
    """(wall s, CPU s) of one turn of `iterations` iterations, driven through the runtime,
    by xclaw's own agent or a declared one (see the module docstring)."""
    from pydantic import BaseModel

    import xclaw

    @xclaw.tool
    async def noop(payload: str) -> str:
        """does nothing"""
        return "ok"

    class Done(BaseModel):
        done: bool

    def allow(event: Any) -> None:
        return None

    script = tmp / f"agent-script{k}-{variant}.json"
    make_script(script, iterations, llm_s)
    if variant == "hooks+output":  # the final answer is a Done, validated
        turns = json.loads(script.read_text())
        turns["turns"][-1] = {"output": {"done": True}}
        script.write_text(json.dumps(turns))
    declared = None
    if variant == "declared":
        declared = xclaw.Agent("plain", tools=[noop])
    elif variant == "hooks+output":
        declared = xclaw.Agent(
            "checked",
            tools=[noop],
            output_type=Done,
            hooks=xclaw.Hooks(before_tool=allow, after_tool=allow),
        )
    agent = await xclaw.open(
        db=tmp / f"agent{k}-{variant}.db",
        home=tmp / "home",
        model=f"script:{script}",
        approval="yolo",
        config={"max_iterations": iterations + 5},
        tools=[noop] if declared is None else [],
        agent=declared,
    )
    try:
        session = await agent.new_session(title="bench")
        rt = agent.runtime  # type: ignore[attr-defined]
        unsubscribe = rt.subscribe(session.id, lambda frame: None)
        w0, c0 = time.perf_counter(), time.process_time()
        await rt.send(session.id, "go", agent=None if declared is None else declared.name)
        await rt.wait_idle(session.id)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        unsubscribe()
        hooks = 2 * iterations if variant == "hooks+output" else 0
        assert len(await session.steps()) == 3 * iterations + 2 + hooks
        return wall, cpu
    finally:
        await agent.close()


def agent_bench(n: int, rounds: int, llm_ms: float = 0.0) -> None:
    print(
        f"declared agents: {n} iterations (1 LLM call + 1 tool call each, the model answers "
        f"in {llm_ms:g} ms), median of {rounds} rounds, the variants alternated"
    )
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in AGENT_VARIANTS}
    with tempfile.TemporaryDirectory() as d:
        for variant in AGENT_VARIANTS:  # warm-up: imports, first-use caches; not counted
            asyncio.run(agent_round(Path(d), 20, -1, variant))
        for k in range(rounds):
            order = AGENT_VARIANTS[k % 3 :] + AGENT_VARIANTS[: k % 3]
            for variant in order:
                runs[variant].append(
                    asyncio.run(agent_round(Path(d), n, k, variant, llm_ms / 1000))
                )
    print(f"{'':48}{'wall ms/it':>12}{'CPU ms/it':>12}")
    med: dict[str, tuple[float, float]] = {}
    for variant in AGENT_VARIANTS:
        wall = statistics.median(r[0] for r in runs[variant]) / n * 1000
        cpu = statistics.median(r[1] for r in runs[variant]) / n * 1000
        med[variant] = (wall, cpu)
        print(f"{variant:48}{wall:12.3f}{cpu:12.3f}")
    for variant, goal in (("declared", 0.02), ("hooks+output", 0.05)):
        wall = med[variant][0] / med["default"][0] - 1
        cpu = med[variant][1] / med["default"][1] - 1
        print(
            f"{variant} adds {wall:+.1%} wall time and {cpu:+.1%} CPU per iteration "
            f"(goal <= +{goal:.0%}: {'met' if max(wall, cpu) <= goal else 'not met'})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--llm-ms",
        type=float,
        nargs="*",
        default=[0.0, 5.0],
        help="model latencies to run with (default: 0 = worst case, and 5 ms)",
    )
    ap.add_argument(
        "--api",
        action="store_true",
        help="instead: the Python API (xclaw.open) side by side with the Runtime it drives",
    )
    ap.add_argument(
        "--agent",
        action="store_true",
        help="instead: declared agents (none of their features, hooks and output) side by "
        "side with xclaw's own agent",
    )
    args = ap.parse_args()
    n = args.iterations
    if args.api:
        api_bench(n, args.rounds)
        return
    if args.agent:
        for llm_ms in args.llm_ms:
            agent_bench(n, args.rounds, llm_ms)
        return
    print(
        f"runtime benchmark: {n} iterations (1 LLM call + 1 tool call each), median of {args.rounds} rounds"
    )
    with tempfile.TemporaryDirectory() as d:
        for llm_ms in args.llm_ms:
            rounds = [
                asyncio.run(one_round(Path(d), n, k, llm_ms / 1000)) for k in range(args.rounds)
            ]
            report(n, rounds, llm_ms)


if __name__ == "__main__":
    main()
