"""Queued messages: how soon a message that waited for a run starts once that run ends
(docs/protocol.md, "Input while a run is busy"; goal: ≤ 50 ms).

One session on a real database (SQLite in a temporary directory; PostgreSQL with `--pg URL`)
with the scripted model: a first message whose run sleeps in a tool long enough for
`--queued` messages to be sent behind it with `busy="queue"`, each of which then runs in turn
(one model call, its answer). For each hand-over it takes, as a client of the runtime sees
them, the time from the `reply` of a run to the `step` frame of the next message's
`user_input` (its turn opened, the message recorded and off the queue in one transaction),
and the time from the reply to the next run's first model call (`llm_call` running). In
process (xclaw.open) and through a real `xclaw serve` over its WebSocket (`--gateway`).

    .venv/bin/python bench/queue_bench.py                   # 50 hand-overs, SQLite
    .venv/bin/python bench/queue_bench.py --queued 100 --pg postgresql://postgres@127.0.0.1/test
    .venv/bin/python bench/queue_bench.py --gateway
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import xclaw
from xclaw.wire.frames import ReplyFrame, StepFrame

SLEEP_S = 3.0  # the first run's tool: long enough to queue every message behind it


def script(path: Path, queued: int) -> Path:
    turns: list[dict[str, Any]] = [
        {
            "text": "Working.",
            "tool_calls": [{"name": "shell", "input": {"command": f"sleep {SLEEP_S}"}}],
        },
        {"text": "first done"},
    ]
    turns += [{"text": f"answer {i}"} for i in range(queued)]
    path.write_text(json.dumps({"turns": turns}))
    return path


def figures(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return (
        f"{name}: n={len(ms)} p50 {statistics.median(ms):.1f} ms · p95 {p95:.1f} ms · "
        f"max {ms[-1]:.1f} ms · mean {statistics.fmean(ms):.1f} ms"
    )


def handovers(stamped: list[tuple[float, Any]], queued: int) -> tuple[list[float], list[float]]:
    """(reply -> next user_input step, reply -> next llm_call running), per hand-over."""
    to_message: list[float] = []
    to_model: list[float] = []
    last_reply: float | None = None
    waiting_model = False
    for t, event in stamped:
        if isinstance(event, ReplyFrame):
            last_reply = t
        elif isinstance(event, StepFrame) and last_reply is not None:
            step = event.step
            if step.type == "user_input" and step.status == "completed":
                to_message.append(t - last_reply)
                waiting_model = True
            elif step.type == "llm_call" and step.status == "running" and waiting_model:
                to_model.append(t - last_reply)
                waiting_model = False
    return to_message[:queued], to_model[:queued]


def record_gaps(steps: list[Any]) -> list[float]:
    """From the record (ms): each queued message's `user_input` start minus the end of the
    run before it (its last step's end), in seconds."""
    gaps: list[float] = []
    last_end: int | None = None
    for step in steps:
        if step.type == "user_input" and last_end is not None:
            gaps.append((step.start_time - last_end) / 1000)
        if step.end_time is not None:
            last_end = step.end_time
    return gaps


async def in_process(
    root: Path, queued: int, db: str | None
) -> tuple[list[tuple[float, Any]], list[float]]:
    sc = script(root / "script.json", queued)
    agent = await xclaw.open(
        db=db or root / "bench.db",
        home=root / "home",
        model=f"script:{sc}",
        approval="yolo",
        cwd=root,
    )
    stamped: list[tuple[float, Any]] = []
    try:
        session = await agent.new_session(title="queue bench")
        rt = agent._live()  # the runtime's own frames, stamped as they are emitted
        from xclaw.wire.frames import SERVER_FRAME

        def sink(frame: Any) -> None:
            if frame.get("type") in ("reply", "step"):
                stamped.append((time.perf_counter(), SERVER_FRAME.validate_python(frame)))

        rt.subscribe(session.id, sink)
        first = session.send("first")
        task = asyncio.ensure_future(first.result())
        await asyncio.sleep(0.3)  # its tool sleeps: the run is in flight
        for i in range(queued):
            kept = await session.send(f"message {i}", busy="queue")
            assert kept.queued is not None, kept.events
        await task
        await session.wait(120 + queued)
        gaps = record_gaps(await session.steps())
    finally:
        await agent.close()
    return stamped, gaps


async def through_gateway(root: Path, queued: int) -> tuple[list[tuple[float, Any]], list[float]]:
    from tests.gateway.harness import Server, write_script  # a real `xclaw serve`

    turns = json.loads(script(root / "turns.json", queued).read_text())["turns"]
    server = Server(root=root / "gw", script=None, approval="yolo")
    server.root.mkdir()
    server.script = write_script(server.root / "script.json", turns)
    server.start()
    stamped: list[tuple[float, Any]] = []
    try:
        from websockets.asyncio.client import connect

        from xclaw.wire.frames import SERVER_FRAME

        async with xclaw.connect(server.http, token=server.token) as agent:
            session = await agent.new_session(title="queue bench")  # written now
            # A client of its own watches the session, reading every frame as it comes.
            async with connect(f"{server.ws_url}?token={server.token}") as ws:
                await ws.send(json.dumps({"type": "reconnect", "sessionId": session.id}))
                replies = asyncio.Event()
                seen = 0

                async def watch() -> None:
                    nonlocal seen
                    async for raw in ws:
                        frame = json.loads(raw)
                        if frame.get("type") in ("reply", "step"):
                            t = time.perf_counter()
                            stamped.append((t, SERVER_FRAME.validate_python(frame)))
                            seen += frame.get("type") == "reply"
                            if seen >= queued + 1:
                                replies.set()

                watcher = asyncio.ensure_future(watch())
                await asyncio.sleep(0.3)  # attached
                task = asyncio.ensure_future(session.send("first").result())
                await asyncio.sleep(0.5)  # its tool sleeps: the run is in flight
                for i in range(queued):
                    kept = await session.send(f"message {i}", busy="queue")
                    assert kept.queued is not None, kept.events
                await task
                await asyncio.wait_for(replies.wait(), 120 + queued)
                watcher.cancel()
            gaps = record_gaps(await session.steps())
    finally:
        server.kill()
    return stamped, gaps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--queued", type=int, default=50, help="messages queued behind the first run")
    ap.add_argument("--pg", help="a PostgreSQL URL instead of SQLite (a fresh schema is not made)")
    ap.add_argument("--gateway", action="store_true", help="through a real xclaw serve as well")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2-CPU machine: figures move with it)")
    with tempfile.TemporaryDirectory(prefix="xclaw-queue-bench-") as tmp:
        root = Path(tmp)
        for where in ("local", "gateway"):
            (root / where).mkdir()
        stamped, gaps = asyncio.run(in_process(root / "local", args.queued, args.pg))
        to_message, to_model = handovers(stamped, args.queued)
        where = "PostgreSQL" if args.pg else "SQLite"
        print(f"in process ({where}), {args.queued} queued messages:")
        print("  " + figures("reply -> next message recorded (its step frame)", to_message))
        print("  " + figures("reply -> next run's model call (llm_call running)", to_model))
        print(
            "  " + figures("in the record: run's last step end -> next user_input (ms clock)", gaps)
        )
        if args.gateway:
            stamped, gaps = asyncio.run(through_gateway(root / "gateway", args.queued))
            to_message, to_model = handovers(stamped, args.queued)
            print(
                f"through xclaw serve (SQLite, frames at a WebSocket client), {args.queued} queued:"
            )
            print("  " + figures("reply -> next message recorded (its step frame)", to_message))
            print("  " + figures("reply -> next run's model call (llm_call running)", to_model))
            print(
                "  "
                + figures("in the record: run's last step end -> next user_input (ms clock)", gaps)
            )
    print("goal: a queued message starts <= 50 ms after the run before it ends")


if __name__ == "__main__":
    main()
