"""A2A over real gateways with the official client (`a2a-sdk`'s ClientFactory): the card is
served, a task completes with its artifacts, an approval is an input-required task answered
by its next message, a message sent twice runs once, and a gateway SIGKILLed mid-task is
restarted and the task completes — GetTask shows where it is, SubscribeToTask resumes it —
with nothing run twice. Hostile requests are JSON-RPC errors, never a traceback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from tests.gateway.harness import Server
from tests.gateway.teams_harness import add_user
from tests.waiting import until

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


async def open_client(server: Server, token: str | None = None) -> tuple[Client, httpx.AsyncClient]:
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token or server.token}"}, timeout=120
    )
    client = await ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create_from_url(
        server.http
    )
    return client, http


def message(text: str, mid: str, *, context: str = "", task: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=mid,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context,
            task_id=task,
        )
    )


async def collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [e async for e in events]


def last_state(events: list[StreamResponse]) -> int:
    for e in reversed(events):
        if e.HasField("status_update"):
            return e.status_update.status.state
        if e.HasField("task"):
            return e.task.status.state
    raise AssertionError("no state in the stream")


def task_id(events: list[StreamResponse]) -> str:
    first = events[0]
    assert first.HasField("task"), first
    return first.task.id


def steps(server: Server, sid: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{server.http}/api/sessions/{sid}/steps?n=0",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["steps"]
    return found


WRITE = [
    {"text": "Writing.", "tool_calls": [sh("echo hi >> out.txt")]},
    {"text": "Wrote out.txt."},
]


async def test_the_card_is_served_and_a_task_completes_with_its_artifacts(
    server_factory: Any,
) -> None:
    server = server_factory(WRITE, approval="yolo")
    async with httpx.AsyncClient(timeout=30) as anonymous:  # the card needs no token
        card = (await anonymous.get(f"{server.http}/.well-known/agent-card.json")).json()
    assert card["name"] == "xclaw"
    assert card["capabilities"]["streaming"] is True
    (interface,) = card["supportedInterfaces"]
    assert interface == {
        "url": f"{server.http}/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert {"shell", "read_file", "write_file"} <= {s["id"] for s in card["skills"]}

    client, http = await open_client(server)
    try:
        events = await collect(client.send_message(message("write it", "m-1", context="ctx-a")))
        assert last_state(events) == TaskState.TASK_STATE_COMPLETED
        tid = task_id(events)
        assert tid == "ctx-a:s0001"  # the context is the session; the task its turn
        task = await client.get_task(GetTaskRequest(id=tid))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.history[0].message_id == "m-1"
        names = {a.name: a for a in task.artifacts}
        assert names["answer"].parts[0].text == "Wrote out.txt."
        assert names["out.txt"].parts[0].raw == b"hi\n"
        listed = await client.list_tasks(ListTasksRequest(context_id="ctx-a"))
        assert [t.id for t in listed.tasks] == [tid]
    finally:
        await http.aclose()
    assert "Traceback" not in server.logs()


async def test_an_approval_is_input_required_and_the_next_message_answers_it(
    server_factory: Any,
) -> None:
    server = server_factory(WRITE, approval="ask")
    client, http = await open_client(server)
    try:
        events = await collect(client.send_message(message("write it", "m-1", context="ctx-b")))
        assert last_state(events) == TaskState.TASK_STATE_INPUT_REQUIRED
        tid = task_id(events)
        asked = events[-1].status_update.status.message
        assert "approve" in asked.parts[0].text
        data = asked.parts[1].data.struct_value.fields["approval"].struct_value.fields
        assert data["tool"].string_value == "shell"
        assert not server.workspace("ctx-b").joinpath("out.txt").exists()

        answer = message("approve", "m-2", context="ctx-b", task=tid)
        after = await collect(client.send_message(answer))
        assert last_state(after) == TaskState.TASK_STATE_COMPLETED
        assert server.workspace("ctx-b").joinpath("out.txt").read_text() == "hi\n"
        approval = next(s for s in steps(server, "ctx-b") if s["name"] == "approval")
        assert approval["output"]["by"] == {"kind": "person", "client": "a2a", "via": "http"}
    finally:
        await http.aclose()


async def test_a_message_sent_twice_runs_once(server_factory: Any) -> None:
    server = server_factory(WRITE, approval="yolo")
    client, http = await open_client(server)
    try:
        first = await collect(client.send_message(message("write it", "same-id", context="ctx-c")))
        again = await collect(client.send_message(message("write it", "same-id", context="ctx-c")))
        assert task_id(first) == task_id(again)
        assert last_state(again) == TaskState.TASK_STATE_COMPLETED
    finally:
        await http.aclose()
    assert [s["type"] for s in steps(server, "ctx-c")].count("user_input") == 1
    assert server.workspace("ctx-c").joinpath("out.txt").read_text() == "hi\n"


SLOW = [
    {"text": "Step one.", "tool_calls": [sh("echo one >> effects.txt")]},
    {"text": "Slow part.", "tool_calls": [sh("sleep 8")]},  # killed in it, not run again
    {"text": "All done."},
]


async def test_a_gateway_killed_mid_task_is_restarted_and_the_task_completes_once(
    server_factory: Any,
) -> None:
    server = server_factory(SLOW, approval="yolo")
    client, http = await open_client(server)
    stream = client.send_message(message("go", "m-kill", context="ctx-k"))
    first = await anext(stream)
    tid = first.task.id
    deadline = asyncio.get_running_loop().time() + 60
    while not any(s["input"] == {"command": "sleep 8"} for s in steps(server, "ctx-k")):
        assert asyncio.get_running_loop().time() < deadline, "the slow command never ran"
        await asyncio.sleep(0.05)
    server.kill()  # SIGKILL mid-task, the slow command running
    await stream.aclose()
    await http.aclose()
    server.start()

    client, http = await open_client(server)
    try:
        where = await client.get_task(GetTaskRequest(id=tid))
        assert where.status.state == TaskState.TASK_STATE_WORKING
        events = await collect(client.subscribe(SubscribeToTaskRequest(id=tid)))
        assert last_state(events) == TaskState.TASK_STATE_COMPLETED
        done: Task = await client.get_task(GetTaskRequest(id=tid))
        assert {a.name: a for a in done.artifacts}["answer"].parts[0].text == "All done."
    finally:
        await http.aclose()
    assert server.workspace("ctx-k").joinpath("effects.txt").read_text() == "one\n"
    assert [s["type"] for s in steps(server, "ctx-k")].count("user_input") == 1


async def test_a_working_task_is_canceled(server_factory: Any) -> None:
    server = server_factory([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}], approval="yolo")
    client, http = await open_client(server)
    try:
        stream = client.send_message(message("wait", "m-c", context="ctx-cancel"))
        tid = (await anext(stream)).task.id
        await stream.aclose()

        async def working() -> bool:
            state = (await client.get_task(GetTaskRequest(id=tid))).status.state
            return state == TaskState.TASK_STATE_WORKING and any(
                s["type"] == "tool_call" for s in steps(server, "ctx-cancel")
            )

        await until(working, "the task works on a tool call", 60, 0.1)
        canceled = await client.cancel_task(CancelTaskRequest(id=tid))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    finally:
        await http.aclose()


def rpc(server: Server, body: Any, *, token: str | None = None, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    h = {"A2A-Version": "1.0", "Content-Type": "application/json", **headers}
    if token != "":
        h["Authorization"] = f"Bearer {token or server.token}"
    return httpx.post(f"{server.http}/a2a", content=content, headers=h, timeout=60)


def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def test_hostile_requests_are_json_rpc_errors(server_factory: Any) -> None:
    server = server_factory(WRITE, approval="ask")
    cases = [
        (b"{not json", -32700),
        (b"[" * 100_000 + b"]" * 100_000, -32700),
        (call("NoSuchMethod", {}), -32601),
        (call("GetTask", {"id": "nope"}), -32001),
        (call("GetTask", {"id": "x:y:z"}), -32001),
        (call("SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}), -32602),
        (
            call(
                "SendMessage",
                {
                    "message": {
                        "messageId": "a",
                        "role": "ROLE_USER",
                        "contextId": "../x",
                        "parts": [{"text": "x"}],
                    }
                },
            ),
            -32602,
        ),
        (
            call(
                "SendMessage",
                {
                    "message": {
                        "messageId": "a",
                        "role": "ROLE_USER",
                        "parts": [{"url": "http://x"}],
                    }
                },
            ),
            -32602,
        ),
    ]
    for body, code in cases:
        r = rpc(server, body)
        assert r.status_code == 200, r.text
        assert r.json()["error"]["code"] == code, (body[:80], r.text)
    huge = json.dumps(
        call(
            "SendMessage",
            {
                "message": {
                    "messageId": "h",
                    "role": "ROLE_USER",
                    "parts": [{"text": "x" * 9_000_000}],
                }
            },
        )
    ).encode()
    r = rpc(server, huge)
    assert r.json()["error"]["code"] == -32600 and "too large" in r.json()["error"]["message"]
    assert rpc(server, call("GetTask", {"id": "a:s0001"}), token="").status_code == 401
    assert "Traceback" not in server.logs()


async def test_another_persons_task_and_context_look_like_none(server_factory: Any) -> None:
    server = server_factory(WRITE, approval="yolo")
    client, http = await open_client(server)
    try:
        events = await collect(client.send_message(message("write it", "m-1", context="ctx-mine")))
        tid = task_id(events)
    finally:
        await http.aclose()
    token = add_user(server, "eve")
    for method, params in (
        ("GetTask", {"id": tid}),
        ("CancelTask", {"id": tid}),
        ("SubscribeToTask", {"id": tid}),
    ):
        theirs = rpc(server, call(method, params), token=token)
        nobody = rpc(server, call(method, {"id": "ctx-none:s0001"}), token=token)
        assert theirs.json()["error"] == nobody.json()["error"], method
    send = call(
        "SendMessage",
        {
            "message": {
                "messageId": "e",
                "role": "ROLE_USER",
                "contextId": "ctx-mine",
                "parts": [{"text": "hi"}],
            }
        },
    )
    r = rpc(server, send, token=token)
    assert r.json()["error"]["code"] == -32602 and "no context" in r.json()["error"]["message"]
    listed = rpc(server, call("ListTasks", {}), token=token).json()["result"]
    assert listed["tasks"] == []
    assert [s["type"] for s in steps(server, "ctx-mine")].count("user_input") == 1
