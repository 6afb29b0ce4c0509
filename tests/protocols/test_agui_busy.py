"""AG-UI while a run of the thread is in flight (docs/ag-ui.md; docs/protocol.md, "Input while a
run is busy"), with the official client (@ag-ui/client's HttpAgent) against a real gateway and
the scripted model: under `input.busy: queue` a second front end's run is kept in the
session's queue, its stream stays open and streams its own turn once the run before it ends
(never that run's events); `/busy steer` makes the message reach the running model at its next
tool boundary, the run streaming from there; the default (`reject`) still answers 409 busy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Server, write_script
from tests.protocols.harness import AguiClient
from tests.protocols.test_agui import record, until_step

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@pytest.fixture
def queue_server(tmp_path: Path) -> Iterator[Any]:
    made: list[Server] = []

    def make(turns: list[dict[str, Any]], policy: str = "queue") -> Server:
        root = tmp_path / f"srv{len(made)}"
        root.mkdir()
        s = Server(
            root=root,
            script=write_script(root / "script.json", turns),
            approval="yolo",
            config_extra=f"input:\n  busy: {policy}\n",
        )
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.kill()


async def _queue(server: Server, sid: str, timeout: float = 30) -> list[str]:
    """The session's waiting messages, once there is one."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with httpx.AsyncClient(timeout=30) as http:
        while True:
            r = await http.get(
                f"{server.http}/api/sessions/{sid}/queue",
                headers={"Authorization": f"Bearer {server.token}"},
            )
            found = [q["content"] for q in r.json()["queued"]]
            if found or asyncio.get_running_loop().time() > deadline:
                return found
            await asyncio.sleep(0.1)


def _running_tool(step: dict[str, Any]) -> bool:
    return step["type"] == "tool_call" and step["status"] == "running"


async def test_a_run_sent_while_the_thread_is_busy_is_queued_and_streams_its_own_turn(
    queue_server: Any, tmp_path: Path
) -> None:
    server = queue_server(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 12")]},
            {"text": "First done."},
            {"text": "Second done."},
        ]
    )
    first = AguiClient(server, "thread-q", tmp_path / "first.json")
    second = AguiClient(server, "thread-q", tmp_path / "second.json")
    running = await first.start({"say": "go"})
    await until_step(server, "thread-q", _running_tool)
    opened = tmp_path / "second-open"
    queued = await second.start({"say": "then this"}, touch=opened)
    for _ in range(600):  # until its stream is open: RUN_STARTED came, the run goes on
        if opened.exists():
            break
        await asyncio.sleep(0.1)
    # Kept in the session's queue while the first run goes on.
    assert await _queue(server, "thread-q") == ["then this"]
    one, two = await first.finish(running), await second.finish(queued)
    assert one.error is None and two.error is None, (one.error, two.error)
    assert one.outcome == {"type": "success"} and one.result == "First done."
    assert two.outcome == {"type": "success"} and two.result == "Second done."
    streamed = "".join(e["delta"] for e in two.of("TEXT_MESSAGE_CONTENT"))
    assert streamed == "Second done."  # its own turn only, never the run before it
    inputs = [s["input"] for s in record(server, "thread-q") if s["type"] == "user_input"]
    assert inputs == ["go", "then this"]


async def test_a_steering_run_reaches_the_running_model_and_streams_from_there(
    queue_server: Any, tmp_path: Path
) -> None:
    server = queue_server(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 12")]},
            {"text": "Heard you: done."},
        ],
        policy="steer",
    )
    first = AguiClient(server, "thread-s", tmp_path / "first.json")
    second = AguiClient(server, "thread-s", tmp_path / "second.json")
    running = await first.start({"say": "go"})
    await until_step(server, "thread-s", _running_tool)
    steering = await second.start({"say": "use the staging db"})
    one, two = await first.finish(running), await second.finish(steering)
    assert one.result == "Heard you: done." and two.result == "Heard you: done."
    assert two.outcome == {"type": "success"}
    steps = record(server, "thread-s")
    (steered,) = [s for s in steps if s["type"] == "user_input" and s["input"] != "go"]
    assert steered["input"] == "use the staging db" and steered["output"]["steer"] is True
    # Delivered inside the first run: after its tool, before its last model call.
    order = [s["type"] for s in steps]
    assert order.index("tool_call") < steps.index(steered) < len(order) - 1


async def test_the_default_policy_still_refuses_busy(queue_server: Any, tmp_path: Path) -> None:
    server = queue_server(
        [{"text": "Working.", "tool_calls": [sh("sleep 12")]}, {"text": "Done."}],
        policy="reject",
    )
    first = AguiClient(server, "thread-r", tmp_path / "first.json")
    second = AguiClient(server, "thread-r", tmp_path / "second.json")
    running = await first.start({"say": "go"})
    await until_step(server, "thread-r", _running_tool)
    refused = await second.run({"say": "again"})
    assert refused.error is not None and "409" in str(refused.error), refused.error
    assert (await first.finish(running)).result == "Done."


async def test_an_interrupting_run_stops_the_run_in_flight_and_streams_its_own_turn(
    queue_server: Any, tmp_path: Path
) -> None:
    server = queue_server(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 60")]},
            {"text": "Stopped that; on it."},
        ],
        policy="interrupt",
    )
    first = AguiClient(server, "thread-i", tmp_path / "first.json")
    second = AguiClient(server, "thread-i", tmp_path / "second.json")
    running = await first.start({"say": "go"})
    await until_step(server, "thread-i", _running_tool)
    began = asyncio.get_running_loop().time()
    two = await second.run({"say": "stop, do this instead"})
    assert asyncio.get_running_loop().time() - began < 45  # the 60 s command was stopped
    assert two.error is None and two.outcome == {"type": "success"}, two.error
    assert two.result == "Stopped that; on it."
    await first.finish(running)
    steps = record(server, "thread-i")
    (tool,) = [s for s in steps if s["type"] == "tool_call"]
    assert tool["status"] == "failed"  # cancelled by the user, as Stop does
    inputs = [s["input"] for s in steps if s["type"] == "user_input"]
    assert inputs == ["go", "stop, do this instead"]
