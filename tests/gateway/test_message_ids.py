"""A message's client-made id (`messageId`, docs/protocol.md "Sending a message exactly
once"): the gateway acknowledges the message once it is recorded, refuses it by name, and a
resend of an id the record holds — while its run is in flight, after it ended, after the
gateway was SIGKILLed and started again — is acknowledged again and never run twice. Real
`xclaw serve` processes, the raw protocol."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.conftest import ServerFactory
from tests.gateway.harness import Client, Server
from xclaw.wire.frames import undeclared

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


async def _message(client: Client, text: str, mid: str | None) -> None:
    frame: dict[str, Any] = {"type": "message", "sessionId": client.session_id, "content": text}
    if mid is not None:
        frame["messageId"] = mid
    await client.send(frame)


async def _answer(client: Client, mid: str) -> dict[str, Any]:
    """The ack, or the error naming `mid`."""
    return await client.until(
        lambda f: f.get("messageId") == mid and f.get("type") in ("ack", "error")
    )


def _inputs(server: Server, sid: str) -> list[str]:
    from xclaw.store import Access, open_store

    with open_store(server.home / "xclaw.db", access=Access.READ) as store:
        return [s.input_data for s in store.record.steps(sid) if s.step_type.value == "user_input"]


async def test_a_message_is_acknowledged_once_recorded_and_a_resend_is_not_run_again(
    server_factory: ServerFactory,
) -> None:
    server = server_factory([{"text": "one"}, {"text": "two"}], approval="yolo")
    client = await Client.open(server)
    await client.attach()
    await _message(client, "hello", "m-1")
    ack = await _answer(client, "m-1")
    assert ack == {
        "type": "ack",
        "sessionId": client.session_id,
        "messageId": "m-1",
        "stepId": "s0001",
        "duplicate": False,
    }
    assert undeclared(ack) == []
    assert (await client.until_type("reply"))["content"] == "one"
    step = next(f["step"] for f in client.seen if f.get("type") == "step")
    assert step["input"] == "hello" and step["output"] == {"messageId": "m-1"}

    client.seen.clear()
    await _message(client, "hello", "m-1")  # the same message again: not a second turn
    again = await _answer(client, "m-1")
    assert again["type"] == "ack" and again["duplicate"] is True and again["stepId"] == "s0001"
    await client.send({"type": "ping"})
    await client.until_type("pong")
    assert not [f for f in client.seen if f.get("type") in ("reply", "status", "step")]
    assert _inputs(server, client.session_id or "") == ["hello"]

    # A frame without an id is the tutorial's: no ack, the turn runs.
    client.seen.clear()
    await _message(client, "plain", None)
    assert (await client.until_type("reply"))["content"] == "two"
    assert not client.of_type("ack")


async def test_a_resend_during_its_run_is_acknowledged_and_another_message_is_refused_by_id(
    server_factory: ServerFactory,
) -> None:
    server = server_factory([{"text": "Waiting.", "tool_calls": [sh("sleep 30")]}, {"text": "x"}])
    client = await Client.open(server)
    await client.attach()
    await _message(client, "wait", "first")
    assert (await _answer(client, "first"))["type"] == "ack"
    await client.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    await _message(client, "wait", "first")  # its own run is in flight: not `busy`
    again = await _answer(client, "first")
    assert again["type"] == "ack" and again["duplicate"] is True
    await _message(client, "other", "second")
    refused = await _answer(client, "second")
    assert refused["type"] == "error" and refused["code"] == "busy"
    assert undeclared(refused) == []
    await client.send({"type": "cancel", "sessionId": client.session_id})
    await client.until(lambda f: f.get("type") == "status" and f.get("busy") is False)
    assert _inputs(server, client.session_id or "") == ["wait"]


async def test_the_record_of_ids_survives_a_restart(server_factory: ServerFactory) -> None:
    server = server_factory([{"text": "one"}, {"text": "two"}], approval="yolo")
    client = await Client.open(server)
    await client.attach()
    await _message(client, "hello", "kept")
    assert (await _answer(client, "kept"))["duplicate"] is False
    await client.until_type("reply")
    sid = client.session_id
    server.kill()  # SIGKILL
    server.start()
    client = await Client.open(server)
    await client.attach(sid)
    await _message(client, "hello", "kept")
    again = await _answer(client, "kept")
    assert again["type"] == "ack" and again["duplicate"] is True and again["stepId"] == "s0001"
    assert _inputs(server, sid or "") == ["hello"]
    await _message(client, "next", "new")
    assert (await _answer(client, "new"))["stepId"] == "s0003"
    assert (await client.until_type("reply"))["content"] == "two"


@pytest.mark.parametrize("bad", ["", "with space", "x" * 129, "é"])
async def test_a_malformed_id_is_a_bad_frame(server_factory: ServerFactory, bad: str) -> None:
    server = server_factory([{"text": "one"}])
    client = await Client.open(server)
    await client.attach()
    await _message(client, "hello", bad)
    error = await client.until_type("error")
    assert error["code"] == "bad_frame" and "messageId" in error["content"]
