"""AG-UI over real gateways with the official client (@ag-ui/client's HttpAgent): a run
streams and finishes, an approval interrupts and the next run answers it (also after a
SIGKILL), front-end tools go to the client and come back, and a stream that dropped — or a
gateway that was killed — is picked up from the record with nothing lost and nothing twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Server
from tests.protocols.harness import AguiClient

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def record(server: Server, sid: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{server.http}/api/sessions/{sid}/steps?n=0",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    steps: list[dict[str, Any]] = r.json()["steps"]
    return steps


async def until_step(server: Server, sid: str, pred: Any, timeout: float = 60) -> None:
    """Until the record holds a step `pred` accepts."""
    deadline = asyncio.get_running_loop().time() + timeout
    seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=30) as http:
        while asyncio.get_running_loop().time() < deadline:
            r = await http.get(
                f"{server.http}/api/sessions/{sid}/steps?n=0",
                headers={"Authorization": f"Bearer {server.token}"},
            )
            if r.status_code == 200:
                seen = r.json()["steps"]
                if any(pred(s) for s in seen):
                    return
            await asyncio.sleep(0.05)
    raise AssertionError(f"no such step within {timeout}s: {[(s['id'], s['name']) for s in seen]}")


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


async def test_a_run_streams_text_and_ends_with_run_finished(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(
        [{"text": "Hello from xclaw, streamed in pieces.", "thinking": "short"}], approval="ask"
    )
    client = AguiClient(server, "thread-text", tmp_path / "client.json")
    run = await client.run({"say": "hi"})
    assert run.error is None, run.error
    types = run.types()
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert run.outcome == {"type": "success"}
    assert run.result == "Hello from xclaw, streamed in pieces."
    assert "".join(e["delta"] for e in run.of("TEXT_MESSAGE_CONTENT")) == run.result
    assert len(run.of("TEXT_MESSAGE_CONTENT")) > 1  # streamed, not at once
    assert types.index("TEXT_MESSAGE_START") < types.index("TEXT_MESSAGE_END")
    assert "REASONING_MESSAGE_CONTENT" in types
    assert "STEP_STARTED" in types and "STEP_FINISHED" in types
    state = run.of("STATE_SNAPSHOT")[-1]["snapshot"]
    assert state["sessionId"] == "thread-text" and state["state"] == "success"
    assert state["llmCalls"] == 1 and state["usage"]["input"] > 0
    assert roles(run.messages)[0] == "user" and run.messages[-1]["content"] == run.result
    # The thread is an xclaw session like any other.
    steps = record(server, "thread-text")
    assert [s["type"] for s in steps] == ["user_input", "llm_call"]
    assert "Traceback" not in server.logs()


WRITE = [
    {"text": "Writing the file.", "tool_calls": [sh("echo once >> effects.txt")]},
    {"text": "Wrote it."},
]


async def test_an_approval_interrupts_the_run_and_the_next_run_answers_it(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(WRITE, approval="ask")
    client = AguiClient(server, "thread-approve", tmp_path / "client.json")
    first = await client.run({"say": "write it"})
    assert first.error is None, first.error
    assert first.outcome is not None and first.outcome["type"] == "interrupt"
    (interrupt,) = first.outcome["interrupts"]
    assert interrupt["reason"] == "tool_approval" and interrupt["toolCallId"]
    assert interrupt["metadata"]["tool"] == "shell"
    assert first.pending == first.outcome["interrupts"]
    assert not server.workspace("thread-approve").joinpath("effects.txt").exists()

    second = await client.run({"answer": {interrupt["id"]: True}})
    assert second.error is None, second.error
    assert second.outcome == {"type": "success"} and second.result == "Wrote it."
    assert second.pending == []
    assert [e["toolCallId"] for e in second.of("TOOL_CALL_RESULT")] == [interrupt["toolCallId"]]
    assert server.workspace("thread-approve").joinpath("effects.txt").read_text() == "once\n"
    approval = next(s for s in record(server, "thread-approve") if s["name"] == "approval")
    assert approval["id"] == interrupt["id"]
    assert approval["output"]["by"] == {"kind": "person", "client": "ag-ui", "via": "http"}


async def test_an_approval_answered_after_the_gateway_was_killed(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(WRITE, approval="ask")
    client = AguiClient(server, "thread-restart", tmp_path / "client.json")
    first = await client.run({"say": "write it"})
    assert first.outcome is not None and first.outcome["type"] == "interrupt"
    step = first.outcome["interrupts"][0]["id"]

    server.kill()  # SIGKILL while the approval waits
    server.start()

    second = await client.run({"answer": {step: True}})
    assert second.error is None, second.error
    assert second.outcome == {"type": "success"} and second.result == "Wrote it."
    assert server.workspace("thread-restart").joinpath("effects.txt").read_text() == "once\n"
    approvals = [s for s in record(server, "thread-restart") if s["name"] == "approval"]
    assert [a["id"] for a in approvals] == [step]  # asked again: the same step, answered once
    assert approvals[0]["output"]["approved"] is True


PICK = {
    "name": "pick_color",
    "description": "Ask the person at the page to pick a color.",
    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}},
}
ASK_PAGE = [
    {
        "text": "Asking the page.",
        "tool_calls": [{"name": "pick_color", "input": {"question": "which color?"}}],
    },
    {"text": "You picked a color."},
]


async def test_a_front_end_tool_call_goes_to_the_client_and_its_result_comes_back(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(ASK_PAGE, approval="ask")
    client = AguiClient(server, "thread-tool", tmp_path / "client.json", tools=[PICK])
    first = await client.run({"say": "pick one"})
    assert first.error is None, first.error
    assert first.outcome is not None and first.outcome["type"] == "success"
    (call_id,) = first.outcome["pendingToolCallIds"]
    (start,) = first.of("TOOL_CALL_START")
    assert start["toolCallId"] == call_id and start["toolCallName"] == "pick_color"
    assert first.of("TOOL_CALL_RESULT") == []

    second = await client.run({"toolResult": {"callId": call_id, "content": "blue"}})
    assert second.error is None, second.error
    assert second.outcome == {"type": "success"} and second.result == "You picked a color."
    tool = [s for s in record(server, "thread-tool") if s["type"] == "tool_call"]
    assert [(s["name"], s["status"], s["output"]) for s in tool] == [
        ("pick_color", "completed", "blue")
    ]


async def test_a_front_end_tool_call_outlives_a_killed_gateway(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(ASK_PAGE, approval="ask")
    client = AguiClient(server, "thread-tool-kill", tmp_path / "client.json", tools=[PICK])
    first = await client.run({"say": "pick one"})
    (call_id,) = first.outcome["pendingToolCallIds"] if first.outcome else ()

    server.kill()  # SIGKILL while the call waits for the page
    server.start()

    second = await client.run({"toolResult": {"callId": call_id, "content": "green"}})
    assert second.error is None, second.error
    assert second.result == "You picked a color."
    tool = [s for s in record(server, "thread-tool-kill") if s["type"] == "tool_call"]
    # The attempt the kill cut short is kept (nothing lost); the call ran again — only the
    # wait runs here — and the page's one answer completed it, unasked.
    assert [(s["status"], s["error"]) for s in tool] == [
        ("failed", "interrupted"),
        ("completed", None),
    ]
    assert tool[1]["output"] == "green"
    assert not [s for s in record(server, "thread-tool-kill") if s["name"] == "approval"]


SLOW = [
    {"text": "Step one.", "tool_calls": [sh("echo one >> effects.txt")]},
    {"text": "Now the slow part.", "tool_calls": [sh("sleep 3")]},
    {"text": "All done."},
]
# The slow part waits for its gate (at most a minute): the client that picks the dropped
# stream up opens it as its own stream opens, so the run is still going when it comes back,
# however slowly a loaded machine starts its process.
GATED = [
    SLOW[0],
    {
        "text": "Now the slow part.",
        "tool_calls": [sh("for i in $(seq 600); do [ -e gate ] && break; sleep 0.1; done")],
    },
    SLOW[2],
]


async def test_a_dropped_stream_is_picked_up_with_nothing_lost_and_nothing_twice(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(GATED, approval="yolo")
    client = AguiClient(server, "thread-drop", tmp_path / "client.json")
    dropped = await client.run({"say": "do the steps"}, abort_after=6)
    assert dropped.outcome is None  # the stream went before the run ended
    gated = GATED[1]["tool_calls"][0]["input"]
    await until_step(server, "thread-drop", lambda s: s["input"] == gated)

    again = await client.run(touch=server.workspace("thread-drop") / "gate")
    assert again.error is None, again.error
    assert again.types()[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert again.outcome == {"type": "success"} and again.result == "All done."
    texts = [m.get("content") for m in again.messages if m["role"] == "assistant"]
    assert texts == ["Step one.", "Now the slow part.", "All done."]
    assert roles(again.messages).count("user") == 1
    tool_ids = [m["toolCallId"] for m in again.messages if m["role"] == "tool"]
    assert len(tool_ids) == 2 == len(set(tool_ids))
    assert server.workspace("thread-drop").joinpath("effects.txt").read_text() == "one\n"


# Killed during the slow command: long enough that the kill lands in it on a loaded machine
# (the command is not run again after the restart: it may have run, so the model is told).
KILLED = [*SLOW[:1], {"text": "Now the slow part.", "tool_calls": [sh("sleep 8")]}, SLOW[2]]


async def test_a_gateway_killed_mid_run_is_restarted_and_the_run_completes_once(
    server_factory: Any, tmp_path: Path
) -> None:
    server = server_factory(KILLED, approval="yolo")
    client = AguiClient(server, "thread-kill", tmp_path / "client.json")
    proc = await client.start({"say": "do the steps"})
    await until_step(server, "thread-kill", lambda s: s["input"] == {"command": "sleep 8"})
    server.kill()  # SIGKILL mid-run, the slow command running
    cut = await client.finish(proc)
    assert cut.outcome is None and cut.error is not None
    server.start()

    again = await client.run()  # the front end tries again with what it holds
    assert again.error is None, again.error
    assert again.types()[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert again.outcome == {"type": "success"} and again.result == "All done."
    assert roles(again.messages).count("user") == 1
    steps = record(server, "thread-kill")
    assert [s["type"] for s in steps].count("user_input") == 1
    assert server.workspace("thread-kill").joinpath("effects.txt").read_text() == "one\n"


async def test_a_message_whose_run_was_cut_before_any_answer_is_not_sent_twice(
    server_factory: Any, tmp_path: Path
) -> None:
    """The client holds only its own message when the gateway dies: sending the run again
    must not record that message a second time (its id was recorded before it was sent)."""
    server = server_factory([{"text": "Thinking slowly.", "sleep": 3}, {"text": "no"}])
    client = AguiClient(server, "thread-once", tmp_path / "client.json")
    proc = await client.start({"say": "hello"})
    await until_step(server, "thread-once", lambda s: s["type"] == "llm_call")
    server.kill()
    await client.finish(proc)
    server.start()

    again = await client.run()
    assert again.error is None, again.error
    assert again.result == "Thinking slowly."
    assert [s["type"] for s in record(server, "thread-once")].count("user_input") == 1
    assert [m["content"] for m in again.messages if m["role"] == "user"] == ["hello"]


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_every_event_is_the_packages_own(server_factory: Any) -> None:
    """The events are built as dicts on the hot path: each must be exactly what the
    `ag-ui-protocol` package's models validate and its encoder writes."""
    from ag_ui.core import Event
    from ag_ui.encoder import EventEncoder
    from pydantic import TypeAdapter

    server = server_factory(
        [
            {"text": "Looking first.", "thinking": "plan", "tool_calls": [sh("echo x > f")]},
            {"text": "Done — ünïcode ✓."},
        ],
        approval="ask",
    )
    headers = {"Authorization": f"Bearer {server.token}"}
    body = {
        "threadId": "thread-pkg",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "go"}],
    }
    first = httpx.post(f"{server.http}/agui", json=body, headers=headers, timeout=60)
    (interrupt,) = sse_events(first.text)[-1]["outcome"]["interrupts"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    second = httpx.post(
        f"{server.http}/agui",
        json={**body, "runId": "r2", "resume": resume},
        headers=headers,
        timeout=60,
    )
    again = httpx.post(
        f"{server.http}/agui", json={**body, "runId": "r3"}, headers=headers, timeout=60
    )
    events = sse_events(first.text) + sse_events(second.text) + sse_events(again.text)
    kinds = {e["type"] for e in events}
    assert {
        "RUN_STARTED",
        "TEXT_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TOOL_CALL_RESULT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    } <= kinds
    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    encoder = EventEncoder()
    for event in events:
        typed = adapter.validate_python(event)
        assert json.loads(encoder.encode(typed)[6:]) == event, event


def test_the_example_chat_works(server_factory: Any, tmp_path: Path) -> None:
    """examples/ag-ui/chat.mjs (docs/ag-ui.md) against a real gateway: streams the answer and
    answers the approval interrupt (--yes)."""
    import shutil
    import subprocess

    from tests.protocols.harness import NODE_MODULES, node

    runner = node()
    server = server_factory(WRITE, approval="ask")
    example = Path(__file__).resolve().parents[2] / "examples" / "ag-ui" / "chat.mjs"
    here = tmp_path / "example"
    here.mkdir()
    shutil.copy(example, here / "chat.mjs")
    (here / "node_modules").symlink_to(NODE_MODULES)  # (ES modules ignore NODE_PATH)
    done = subprocess.run(
        [runner, "chat.mjs", server.http, server.token, "thread-example", "--yes"],
        input="write it\n",
        capture_output=True,
        text=True,
        cwd=here,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[tool] shell" in done.stdout and "Wrote it." in done.stdout, done.stdout
    assert server.workspace("thread-example").joinpath("effects.txt").read_text() == "once\n"
