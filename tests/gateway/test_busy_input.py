"""Input while a run is busy (docs/protocol.md): messages sent with `busy: queue` while a run
is in flight wait in the record and run once each, in order, after it — told to every client
(`queued`, `queue`), cancellable (`/unqueue`), and kept across a SIGKILL of the gateway; a
message without a policy is refused `busy` as before. Real `xclaw serve` processes, the raw
protocol, checked against the record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gateway.conftest import ServerFactory
from tests.gateway.harness import Client, Server
from xclaw.wire.frames import undeclared

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


async def _message(
    client: Client, text: str, mid: str | None = None, busy: str | None = None
) -> None:
    frame: dict[str, Any] = {"type": "message", "sessionId": client.session_id, "content": text}
    if mid is not None:
        frame["messageId"] = mid
    if busy is not None:
        frame["busy"] = busy
    await client.send(frame)


async def _answer(client: Client, mid: str) -> dict[str, Any]:
    """The ack, the queued frame, or the error naming `mid`."""
    return await client.until(
        lambda f: f.get("messageId") == mid and f.get("type") in ("ack", "queued", "error")
    )


def _inputs(server: Server, sid: str) -> list[tuple[str, Any]]:
    from xclaw.store import Access, open_store

    with open_store(server.home / "xclaw.db", access=Access.READ) as store:
        return [
            (s.input_data, (s.output_data or {}).get("messageId"))
            for s in store.record.steps(sid)
            if s.step_type.value == "user_input"
        ]


def _steps(server: Server, sid: str) -> list[Any]:
    from xclaw.store import Access, open_store

    with open_store(server.home / "xclaw.db", access=Access.READ) as store:
        return store.record.steps(sid)


def _queued(server: Server, sid: str) -> list[str]:
    from xclaw.store import Access, open_store

    with open_store(server.home / "xclaw.db", access=Access.READ) as store:
        return [q.id for q in store.record.queued(sid)]


async def _replies(client: Client, n: int) -> list[str]:
    """The contents of the first `n` replies the client got (read on until there are)."""

    def got() -> list[str]:
        return [f["content"] for f in client.seen if f.get("type") == "reply"]

    while len(got()) < n:
        await client.until_type("reply")
    return got()[:n]


async def test_two_messages_queued_while_busy_run_in_order_after_the_run(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 2")]},
            {"text": "first done"},
            {"text": "second done"},
            {"text": "third done"},
        ],
        approval="yolo",
    )
    client = await Client.open(server)
    watcher = await Client.open(server)  # another client of the session sees the queue too
    await client.attach()
    sid = client.session_id or ""
    await _message(client, "first", "m-1")
    assert (await _answer(client, "m-1"))["type"] == "ack"
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await watcher.attach(sid)

    await _message(client, "second", "m-2", busy="queue")
    kept = await _answer(client, "m-2")
    assert kept == {
        "type": "queued",
        "sessionId": sid,
        "messageId": "m-2",
        "busy": "queue",
        "duplicate": False,
    }
    assert undeclared(kept) == []
    await _message(client, "third", "m-3", busy="queue")
    assert (await _answer(client, "m-3"))["duplicate"] is False
    await _message(client, "second", "m-2", busy="queue")  # a resend: queued once
    assert (await _answer(client, "m-2"))["duplicate"] is True
    # Without a policy, as before: refused, nothing kept.
    await _message(client, "other", "m-x")
    refused = await _answer(client, "m-x")
    assert refused["type"] == "error" and refused["code"] == "busy"

    listing = await watcher.until(lambda f: f.get("type") == "queue" and len(f["queued"]) == 2)
    assert [(q["id"], q["content"], q["busy"]) for q in listing["queued"]] == [
        ("m-2", "second", "queue"),
        ("m-3", "third", "queue"),
    ]
    assert undeclared(listing) == []

    assert await _replies(client, 3) == ["first done", "second done", "third done"]
    await watcher.until(lambda f: f.get("type") == "queue" and f["queued"] == [])
    assert _inputs(server, sid) == [("first", "m-1"), ("second", "m-2"), ("third", "m-3")]
    assert _queued(server, sid) == []


async def test_a_waiting_message_is_cancelled_and_a_client_without_ids_is_told(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(
        [{"text": "Working.", "tool_calls": [sh("sleep 2")]}, {"text": "done"}, {"text": "next"}],
        approval="yolo",
    )
    client = await Client.open(server)
    await client.attach()
    sid = client.session_id or ""
    await _message(client, "first")
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await _message(client, "/busy queue")  # the session's own policy, from then on
    await client.until(lambda f: f.get("type") == "notice" and f["content"] == "[busy] queue")
    await _message(client, "drop me")  # no id, no policy of its own: the session's
    notice = await client.until(
        lambda f: f.get("type") == "notice" and f["content"].startswith("[queue] the agent")
    )
    assert "waits" in notice["content"]
    await _message(client, "keep me")
    await client.until(lambda f: f.get("type") == "queue" and len(f["queued"]) == 2)
    await _message(client, "/queue")
    listing = await client.until(
        lambda f: f.get("type") == "notice" and f["content"].startswith("[queue] 2 waiting")
    )
    assert "1. [queue] “drop me”" in listing["content"]
    await _message(client, "/unqueue 1")
    await client.until(
        lambda f: (
            f.get("type") == "notice" and f["content"] == "[queue] cancelled 1 waiting message"
        )
    )
    assert await _replies(client, 2) == ["done", "next"]
    assert [text for text, _ in _inputs(server, sid)] == ["first", "keep me"]


async def test_queued_messages_survive_a_sigkill_and_run_once_each_in_order(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 60")]},
            {"text": "first done"},
            {"text": "second done"},
            {"text": "third done"},
        ],
        approval="yolo",
    )
    client = await Client.open(server)
    await client.attach()
    sid = client.session_id or ""
    await _message(client, "first", "m-1")
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await _message(client, "second", "m-2", busy="queue")
    assert (await _answer(client, "m-2"))["type"] == "queued"
    await _message(client, "third", "m-3", busy="queue")
    assert (await _answer(client, "m-3"))["type"] == "queued"

    server.kill()  # SIGKILL, mid-run, two messages waiting
    assert _queued(server, sid) == ["m-2", "m-3"]
    server.start()
    client = await Client.open(server)
    await client.attach(sid)  # resumes the interrupted run; the queue follows it
    await _message(client, "third", "m-3", busy="queue")  # a resend after the restart
    again = await _answer(client, "m-3")
    assert again["type"] == "queued" and again["duplicate"] is True
    assert await _replies(client, 3) == ["first done", "second done", "third done"]
    assert _inputs(server, sid) == [("first", "m-1"), ("second", "m-2"), ("third", "m-3")]
    assert _queued(server, sid) == []


async def test_a_steering_message_reaches_the_model_at_the_next_tool_boundary(
    server_factory: ServerFactory,
) -> None:
    server = server_factory([], approval="yolo")
    assert server.script is not None  # a script with a branch the steer's words take
    server.script.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "Working.", "tool_calls": [sh("sleep 2")]},
                    {"text": "not steered"},
                ],
                "branches": [{"when": "use python", "turns": [{"text": "Steered to python."}]}],
            }
        )
    )
    server.restart()
    client = await Client.open(server)
    await client.attach()
    sid = client.session_id or ""
    await _message(client, "first", "m-1")
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await _message(client, "use python instead", "s-1", busy="steer")
    kept = await _answer(client, "s-1")
    assert kept["type"] == "queued" and kept["busy"] == "steer"
    # The same run answers, having read it after the tool's result.
    assert await _replies(client, 1) == ["Steered to python."]
    steps = _steps(server, sid)
    kinds = [(s.step_type.value, s.status.value) for s in steps]
    assert kinds == [
        ("user_input", "completed"),
        ("llm_call", "completed"),
        ("tool_call", "completed"),
        ("user_input", "completed"),  # delivered here: after the result, before the call
        ("llm_call", "completed"),
    ], kinds
    steer = steps[3]
    assert steer.input_data == "use python instead"
    assert steer.output_data == {"messageId": "s-1", "steer": True}
    assert _queued(server, sid) == []
    # Its id is recorded: a resend is acknowledged, not run.
    await _message(client, "use python instead", "s-1", busy="steer")
    again = await _answer(client, "s-1")
    assert again["type"] == "ack" and again["duplicate"] is True


async def test_an_interrupting_message_stops_the_run_and_runs_next(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(
        [
            {"text": "Working.", "tool_calls": [sh("sleep 60")]},
            {"text": "done the new thing"},
        ],
        approval="yolo",
    )
    client = await Client.open(server)
    await client.attach()
    sid = client.session_id or ""
    await _message(client, "first", "m-1")
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await _message(client, "do this instead", "i-1", busy="interrupt")
    assert (await _answer(client, "i-1"))["busy"] == "interrupt"
    await client.until(
        lambda f: f.get("type") == "notice" and f["content"].startswith("[cancel] run stopped"),
        timeout=20,
    )
    assert await _replies(client, 1) == ["done the new thing"]
    steps = _steps(server, sid)
    tool = next(s for s in steps if s.step_type.value == "tool_call")
    assert tool.status.value == "failed" and tool.error_message == "cancelled by the user"
    assert _inputs(server, sid) == [("first", "m-1"), ("do this instead", "i-1")]
    assert _queued(server, sid) == []
