"""A2A while a task of the context is working (docs/a2a.md; docs/protocol.md, "Input while a run
is busy"), with the official client (`a2a-sdk`'s ClientFactory) against a real gateway and the
scripted model: under `input.busy: queue` a second message is kept in the session's queue and
is a task at once — `submitted` (its stream's first event, GetTask, ListTasks), `working` once
the task before completes, then `completed` with its own answer, under the one id it was given;
canceled while it waits, it never runs; under the default it is refused as before."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskState,
)

from tests.gateway.harness import Server, write_script
from tests.protocols.test_a2a_server import (
    collect,
    last_state,
    message,
    open_client,
    sh,
    steps,
    task_id,
)

pytestmark = pytest.mark.slow

TURNS = [
    {"text": "Working.", "tool_calls": [sh("sleep 12")]},
    {"text": "First done."},
    {"text": "Second done."},
]


@pytest.fixture
def busy_server(tmp_path: Path) -> Iterator[Any]:
    made: list[Server] = []

    def make(policy: str) -> Server:
        root = tmp_path / f"srv{len(made)}"
        root.mkdir()
        s = Server(
            root=root,
            script=write_script(root / "script.json", TURNS),
            approval="yolo",
            config_extra=f"input:\n  busy: {policy}\n",
        )
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.kill()


async def _tool_running(server: Server, sid: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(600):
            r = await http.get(
                f"{server.http}/api/sessions/{sid}/steps?n=0",
                headers={"Authorization": f"Bearer {server.token}"},
            )
            if r.status_code == 200 and any(s["type"] == "tool_call" for s in r.json()["steps"]):
                return
            await asyncio.sleep(0.1)
    raise AssertionError("the first task never ran its tool")


async def _queued(server: Server, sid: str) -> list[str]:
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(300):
            r = await http.get(
                f"{server.http}/api/sessions/{sid}/queue",
                headers={"Authorization": f"Bearer {server.token}"},
            )
            found = [q["content"] for q in r.json()["queued"]]
            if found:
                return found
            await asyncio.sleep(0.1)
    return []


async def test_a_message_while_a_task_works_is_a_submitted_task_that_works_after(
    busy_server: Any,
) -> None:
    server = busy_server("queue")
    client, http = await open_client(server)
    try:
        first = asyncio.create_task(
            collect(client.send_message(message("go", "m-1", context="ctx-queue")))
        )
        await _tool_running(server, "ctx-queue")
        stream = client.send_message(message("then this", "m-2", context="ctx-queue"))
        opened = await anext(stream)  # at once, while the task before works
        assert opened.HasField("task"), opened
        tid = opened.task.id
        assert tid == "ctx-queue:a2a:m-2"
        assert opened.task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert opened.task.history[0].parts[0].text == "then this"
        assert opened.task.history[0].message_id == "m-2"
        assert await _queued(server, "ctx-queue") == ["then this"]
        # Seen by anyone who asks, as submitted, under the same id.
        got = await client.get_task(GetTaskRequest(id=tid))
        assert got.status.state == TaskState.TASK_STATE_SUBMITTED
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-queue"))
        assert [(t.id, t.status.state) for t in listed.tasks] == [
            (tid, TaskState.TASK_STATE_SUBMITTED),
            ("ctx-queue:s0001", TaskState.TASK_STATE_WORKING),
        ]
        assert not first.done()
        rest = [e async for e in stream]
        states = [e.status_update.status.state for e in rest if e.HasField("status_update")]
        assert states[0] == TaskState.TASK_STATE_WORKING, rest
        assert states[-1] == TaskState.TASK_STATE_COMPLETED, rest
        assert {e.status_update.task_id for e in rest if e.HasField("status_update")} == {tid}
        one = await first
        assert last_state(one) == TaskState.TASK_STATE_COMPLETED
        assert task_id(one) == "ctx-queue:s0001"
        answers = [
            a.parts[0].text
            for e in rest
            if e.HasField("artifact_update")
            for a in [e.artifact_update.artifact]
            if a.name == "answer"
        ]
        assert answers == ["Second done."], rest
        # It keeps its id once it ran: asked for, and listed.
        done = await client.get_task(GetTaskRequest(id=tid))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.status.message.parts[0].text == "Second done."
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-queue"))
        assert [t.id for t in listed.tasks] == [tid, "ctx-queue:s0001"]
        inputs = [s["input"] for s in steps(server, "ctx-queue") if s["type"] == "user_input"]
        assert inputs == ["go", "then this"]
    finally:
        await http.aclose()


async def test_a_message_that_returns_at_once_while_busy_is_followed_by_subscribing(
    busy_server: Any,
) -> None:
    """`returnImmediately` on a message that must wait its turn: the blocking SendMessage
    answers at once with the submitted task (not once the task before it is done), and
    SubscribeToTask on that id follows it from its wait through its run to its answer."""
    server = busy_server("queue")
    client, http = await open_client(server)
    blocking = await ClientFactory(
        ClientConfig(httpx_client=http, streaming=False)
    ).create_from_url(server.http)
    try:
        first = asyncio.create_task(
            collect(client.send_message(message("go", "m-1", context="ctx-ri")))
        )
        await _tool_running(server, "ctx-ri")
        request = message("then this", "m-2", context="ctx-ri")
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        answered = await collect(blocking.send_message(request))
        assert not first.done()  # answered while the task before it still works
        assert len(answered) == 1 and answered[0].HasField("task"), answered
        tid = answered[0].task.id
        assert tid == "ctx-ri:a2a:m-2"
        assert answered[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        followed = await collect(client.subscribe(SubscribeToTaskRequest(id=tid)))
        states = [e.status_update.status.state for e in followed if e.HasField("status_update")]
        assert TaskState.TASK_STATE_WORKING in states, followed
        assert last_state(followed) == TaskState.TASK_STATE_COMPLETED, followed
        answers = [
            e.artifact_update.artifact.parts[0].text
            for e in followed
            if e.HasField("artifact_update") and e.artifact_update.artifact.name == "answer"
        ]
        assert answers == ["Second done."], followed
        assert last_state(await first) == TaskState.TASK_STATE_COMPLETED
    finally:
        await http.aclose()


async def test_a_submitted_task_canceled_never_runs(busy_server: Any) -> None:
    server = busy_server("queue")
    client, http = await open_client(server)
    try:
        first = asyncio.create_task(
            collect(client.send_message(message("go", "m-1", context="ctx-qc")))
        )
        await _tool_running(server, "ctx-qc")
        stream = client.send_message(message("never mind", "m-2", context="ctx-qc"))
        opened = await anext(stream)
        tid = opened.task.id
        assert opened.task.status.state == TaskState.TASK_STATE_SUBMITTED
        canceled = await client.cancel_task(CancelTaskRequest(id=tid))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [e async for e in stream]
        assert last_state(rest) == TaskState.TASK_STATE_CANCELED, rest
        assert last_state(await first) == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(Exception, match=r"[Nn]ot found"):
            await client.get_task(GetTaskRequest(id=tid))  # it never was a turn
        inputs = [s["input"] for s in steps(server, "ctx-qc") if s["type"] == "user_input"]
        assert inputs == ["go"]
    finally:
        await http.aclose()


async def test_by_default_a_message_while_a_task_works_is_refused(busy_server: Any) -> None:
    server = busy_server("reject")
    client, http = await open_client(server)
    try:
        first = asyncio.create_task(
            collect(client.send_message(message("go", "m-1", context="ctx-reject")))
        )
        await _tool_running(server, "ctx-reject")
        with pytest.raises(Exception, match="is working"):
            await collect(client.send_message(message("then this", "m-2", context="ctx-reject")))
        assert last_state(await first) == TaskState.TASK_STATE_COMPLETED
    finally:
        await http.aclose()


async def test_an_interrupting_message_cancels_the_working_task_and_runs_next(
    tmp_path: Path,
) -> None:
    root = tmp_path / "srv-i"
    root.mkdir()
    turns = [
        {"text": "Working.", "tool_calls": [sh("sleep 60")]},
        {"text": "Stopped that; on it."},
    ]
    server = Server(
        root=root,
        script=write_script(root / "script.json", turns),
        approval="yolo",
        config_extra="input:\n  busy: interrupt\n",
    )
    server.start()
    client, http = await open_client(server)
    try:
        first = asyncio.create_task(
            collect(client.send_message(message("go", "m-1", context="ctx-int")))
        )
        await _tool_running(server, "ctx-int")
        began = asyncio.get_running_loop().time()
        two = await collect(client.send_message(message("instead", "m-2", context="ctx-int")))
        assert asyncio.get_running_loop().time() - began < 45  # the 60 s command was stopped
        assert last_state(two) == TaskState.TASK_STATE_COMPLETED
        one = await first
        assert last_state(one) != TaskState.TASK_STATE_WORKING
        (tool,) = [s for s in steps(server, "ctx-int") if s["type"] == "tool_call"]
        assert tool["status"] == "failed"  # stopped as Stop stops it
        inputs = [s["input"] for s in steps(server, "ctx-int") if s["type"] == "user_input"]
        assert inputs == ["go", "instead"]
    finally:
        await http.aclose()
        server.kill()
