"""`/rollback sNNNN` through AG-UI and A2A, as every other client meets it (docs/ag-ui.md,
docs/a2a.md): a user message that is a command is answered as a command, never sent to the
model; past outside effects the rollback first shows what it would undo and what it would
leave done, changing nothing; confirmed, it runs each compensation once and rewinds; past an
irreversible effect it needs the person's explicit acceptance; someone without the right to
act on the session is refused. The official clients (@ag-ui/client's HttpAgent, a2a-sdk)
against a real `xclaw serve` whose Python tool records payments in a real ledger
(tests/ledger.py: a delete declared as the payment's compensation)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client import A2ACardResolver
from a2a.types.a2a_pb2 import Message, StreamResponse
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from tests.gateway.teams_harness import add_user, share
from tests.gateway.test_rollback_effects import LedgerServer, serve
from tests.ledger import pay
from tests.protocols.harness import AguiClient, RunResult
from tests.protocols.test_a2a_server import call, collect, message, open_client, rpc, steps
from xclaw.gateway.access import CACHE_S

pytestmark = pytest.mark.slow

PAYMENTS = [
    {"text": "Paying A.", "tool_calls": [pay("A")]},
    {"text": "Paying B.", "tool_calls": [pay("B")]},
    {"text": "Paid."},
]
IRREVERSIBLE = [
    {"text": "Paying A.", "tool_calls": [pay("A")]},
    {"text": "Paying M.", "tool_calls": [pay("M", tool="record_payment_unchecked")]},
    {"text": "Paid."},
]


@pytest.fixture
def ledger_server(tmp_path: Path) -> Iterator[Any]:
    made: list[LedgerServer] = []

    def start(turns: list[dict[str, Any]]) -> LedgerServer:
        s = serve(tmp_path, turns)
        made.append(s)
        s.start()
        return s

    yield start
    for s in made:
        s.kill()


def said(run: RunResult) -> str:
    return "".join(e["delta"] for e in run.of("TEXT_MESSAGE_CONTENT"))


def custom(run: RunResult, name: str) -> dict[str, Any]:
    (found,) = [e["value"] for e in run.of("CUSTOM") if e["name"] == name]
    value: dict[str, Any] = found
    return value


def user_inputs(server: LedgerServer, sid: str) -> list[Any]:
    return [s["input"] for s in steps(server, sid) if s["type"] == "user_input"]


# --- AG-UI ------------------------------------------------------------------------------------


async def test_agui_rollback_previews_then_compensates_once_on_confirm(
    ledger_server: Any, tmp_path: Path
) -> None:
    server = ledger_server(PAYMENTS)
    client = AguiClient(server, "thread-pay", tmp_path / "client.json")
    paid = await client.run({"say": "pay A then B"})
    assert paid.error is None and paid.result == "Paid.", paid.error
    assert server.ledger.refs() == ["A", "B"]
    recorded = steps(server, "thread-pay")

    preview = await client.run({"say": "/rollback s0001"})
    assert preview.error is None, preview.error
    assert preview.types()[0] == "RUN_STARTED" and preview.types()[-1] == "RUN_FINISHED"
    assert preview.outcome == {"type": "success"}
    words = said(preview)
    assert "undone, in this order (2)" in words, words
    assert words.index("record_payment") < words.index("/rollback s0001 --confirm")
    assert preview.result == words
    shown = custom(preview, "xclaw.rollback_preview")
    assert [e["tool"] for e in shown["compensable"]] == ["record_payment"] * 2
    assert not preview.of("MESSAGES_SNAPSHOT")
    # Nothing done: the ledger, the record (the command never reached the model) as they were.
    assert server.ledger.refs() == ["A", "B"]
    assert steps(server, "thread-pay") == recorded

    done = await client.run({"say": "/rollback s0001 --confirm"})
    assert done.error is None, done.error
    assert done.outcome == {"type": "success"}
    words = said(done)
    assert "session reset to before step s0001" in words, words
    assert "2 outside effect(s) undone" in words
    rolled = custom(done, "xclaw.rolledback")
    assert [c["tool"] for c in rolled["compensated"]] == ["record_payment"] * 2
    types = done.types()
    # The rewound conversation first (nothing before s0001), then the command's answer.
    assert types.index("MESSAGES_SNAPSHOT") < types.index("TEXT_MESSAGE_START")
    assert done.of("MESSAGES_SNAPSHOT")[0]["messages"] == []
    assert [m["role"] for m in done.messages] == ["assistant"]
    state = done.of("STATE_SNAPSHOT")[-1]["snapshot"]
    assert state["sessionId"] == "thread-pay" and state["busy"] is False
    assert server.ledger.refs() == []
    assert server.ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]  # each once
    assert user_inputs(server, "thread-pay") == []
    assert "Traceback" not in server.logs()


async def test_agui_rollback_past_an_irreversible_effect_needs_its_acceptance(
    ledger_server: Any, tmp_path: Path
) -> None:
    server = ledger_server(IRREVERSIBLE)
    client = AguiClient(server, "thread-mail", tmp_path / "client.json")
    await client.run({"say": "pay"})
    assert server.ledger.refs() == ["A", "M"]

    preview = await client.run({"say": "/rollback s0001"})
    words = said(preview)
    assert "NOT undone — they stay done (1)" in words, words
    assert "/rollback s0001 --accept-irreversible" in words
    shown = custom(preview, "xclaw.rollback_preview")
    assert [e["tool"] for e in shown["irreversible"]] == ["record_payment_unchecked"]

    refused = await client.run({"say": "/rollback s0001 --confirm"})
    assert refused.error is not None and refused.error["code"] == "irreversible_effects"
    assert "record_payment_unchecked" in refused.error["message"]
    assert refused.outcome is None
    assert server.ledger.refs() == ["A", "M"]  # nothing done

    done = await client.run({"say": "/rollback s0001 --accept-irreversible"})
    assert done.error is None, done.error
    rolled = custom(done, "xclaw.rolledback")
    assert [c["tool"] for c in rolled["compensated"]] == ["record_payment"]
    assert [e["tool"] for e in rolled["notUndone"]] == ["record_payment_unchecked"]
    assert "NOT undone" in said(done)
    assert server.ledger.refs() == ["M"]
    assert server.ledger.calls() == ["pay A", "pay M", "undo A"]


async def test_agui_another_member_cannot_roll_back_the_thread(
    ledger_server: Any, tmp_path: Path
) -> None:
    server = ledger_server(PAYMENTS)
    owner = AguiClient(server, "thread-own", tmp_path / "owner.json")
    await owner.run({"say": "pay A then B"})
    eve = add_user(server, "eve")
    theirs = AguiClient(server, "thread-own", tmp_path / "eve.json", token=eve)
    refused = await theirs.run({"say": "/rollback s0001 --confirm"})
    nobody = await AguiClient(server, "thread-none", tmp_path / "none.json", token=eve).run(
        {"say": "/rollback s0001 --confirm"}
    )
    assert refused.error is not None and refused.error.get("status") == 404, refused.error
    assert nobody.error is not None and nobody.error.get("status") == 404
    # Shared to watch, not to act: refused, saying why.
    share(server, "thread-own", "eve", "viewer")
    viewer = await AguiClient(server, "thread-own", tmp_path / "viewer.json", token=eve).run(
        {"say": "/rollback s0001 --confirm"}
    )
    assert viewer.error is not None and viewer.error.get("status") == 403, viewer.error
    assert server.ledger.refs() == ["A", "B"]
    assert server.ledger.calls() == ["pay A", "pay B"]
    # Shared to act: a collaborator rolls back as the owner would (the preview first).
    share(server, "thread-own", "eve", "collaborator")
    await asyncio.sleep(CACHE_S)  # (the gateway asks again after its cache's second)
    shown = await AguiClient(server, "thread-own", tmp_path / "collab.json", token=eve).run(
        {"say": "/rollback s0001"}
    )
    assert shown.error is None, shown.error
    assert custom(shown, "xclaw.rollback_preview")["stepId"] == "s0001"
    assert server.ledger.refs() == ["A", "B"]
    assert len(user_inputs(server, "thread-own")) == 1


# --- A2A --------------------------------------------------------------------------------------


def answer_of(events: list[StreamResponse]) -> Message:
    (only,) = events
    assert only.HasField("message"), only
    return only.message


def frames_of(answer: Message) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for part in answer.parts:
        if part.WhichOneof("content") == "data":
            frame = MessageToDict(part.data.struct_value)
            out[frame["type"]] = frame
    return out


async def test_a2a_rollback_previews_then_compensates_once_on_confirm(
    ledger_server: Any,
) -> None:
    server = ledger_server(PAYMENTS)
    client, http = await open_client(server)
    try:
        # The commands are on the card, beside the tools (as the SDK's resolver reads it).
        card = await A2ACardResolver(http, server.http).get_agent_card()
        commands = next(s for s in card.skills if s.id == "xclaw.commands")
        assert "/rollback s0004 --confirm" in commands.examples
        await collect(client.send_message(message("pay A then B", "m-1", context="ctx-pay")))
        assert server.ledger.refs() == ["A", "B"]
        recorded = steps(server, "ctx-pay")

        shown = answer_of(
            await collect(client.send_message(message("/rollback s0001", "m-2", context="ctx-pay")))
        )
        assert shown.context_id == "ctx-pay" and not shown.task_id
        words = shown.parts[0].text
        assert "undone, in this order (2)" in words, words
        assert "/rollback s0001 --confirm" in words
        preview = frames_of(shown)["rollback_preview"]
        assert [e["tool"] for e in preview["compensable"]] == ["record_payment"] * 2
        assert server.ledger.refs() == ["A", "B"]
        assert steps(server, "ctx-pay") == recorded  # no task, no turn: nothing recorded

        # The same, asked with structure: metadata.rollback.
        ask = message("", "m-3", context="ctx-pay")
        ask.message.metadata.update({"rollback": {"stepId": "s0001", "confirm": True}})
        done = answer_of(await collect(client.send_message(ask)))
        assert "session reset to before step s0001" in done.parts[0].text
        rolled = frames_of(done)["rolledback"]
        assert [c["tool"] for c in rolled["compensated"]] == ["record_payment"] * 2
        assert server.ledger.refs() == []
        assert server.ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]  # each once
        assert user_inputs(server, "ctx-pay") == []
    finally:
        await http.aclose()
    assert "Traceback" not in server.logs()


async def test_a2a_rollback_past_an_irreversible_effect_needs_its_acceptance(
    ledger_server: Any,
) -> None:
    server = ledger_server(IRREVERSIBLE)
    client, http = await open_client(server)
    try:
        await collect(client.send_message(message("pay", "m-1", context="ctx-mail")))
        shown = answer_of(
            await collect(
                client.send_message(message("/rollback s0001", "m-2", context="ctx-mail"))
            )
        )
        assert "NOT undone — they stay done (1)" in shown.parts[0].text
        assert "--accept-irreversible" in shown.parts[0].text

        for refused in (
            message("/rollback s0001 --confirm", "m-3", context="ctx-mail"),
            message("", "m-4", context="ctx-mail"),
        ):
            if not refused.message.parts[0].text:
                refused.message.metadata.update({"rollback": {"stepId": "s0001", "confirm": True}})
            with pytest.raises(A2AError) as error:
                await collect(client.send_message(refused))
            assert "record_payment_unchecked" in str(error.value), error.value
            assert server.ledger.refs() == ["A", "M"]  # nothing done
        # On the wire: invalid request, the xclaw code in the error's details.
        send = call(
            "SendMessage",
            {
                "message": {
                    "messageId": "m-raw",
                    "role": "ROLE_USER",
                    "contextId": "ctx-mail",
                    "parts": [{"text": "/rollback s0001 --confirm"}],
                }
            },
        )
        wire = (await asyncio.to_thread(rpc, server, send)).json()["error"]
        assert wire["code"] == -32600 and wire["message"].startswith("/rollback: "), wire
        assert wire["data"][0]["metadata"] == {"code": "irreversible_effects"}, wire
        assert server.ledger.refs() == ["A", "M"]

        accepted = message("", "m-5", context="ctx-mail")
        accepted.message.metadata.update(
            {"rollback": {"stepId": "s0001", "acceptIrreversible": True}}
        )
        done = answer_of(await collect(client.send_message(accepted)))
        rolled = frames_of(done)["rolledback"]
        assert [c["tool"] for c in rolled["compensated"]] == ["record_payment"]
        assert [e["tool"] for e in rolled["notUndone"]] == ["record_payment_unchecked"]
        assert server.ledger.refs() == ["M"]
        assert server.ledger.calls() == ["pay A", "pay M", "undo A"]
    finally:
        await http.aclose()


async def test_a2a_another_member_cannot_roll_back_the_context(ledger_server: Any) -> None:
    server = ledger_server(PAYMENTS)
    client, http = await open_client(server)
    try:
        await collect(client.send_message(message("pay A then B", "m-1", context="ctx-own")))
    finally:
        await http.aclose()
    eve = add_user(server, "eve")
    client, http = await open_client(server, eve)
    try:
        with pytest.raises(A2AError) as theirs:
            await collect(
                client.send_message(message("/rollback s0001 --confirm", "e-1", context="ctx-own"))
            )
        assert "no context 'ctx-own'" in str(theirs.value), theirs.value
        share(server, "ctx-own", "eve", "viewer")
        with pytest.raises(A2AError) as viewer:
            await collect(
                client.send_message(message("/rollback s0001 --confirm", "e-2", context="ctx-own"))
            )
        assert "you are a viewer" in str(viewer.value), viewer.value
        # Shared to act: a collaborator rolls back as the owner would (the preview first).
        share(server, "ctx-own", "eve", "collaborator")
        await asyncio.sleep(CACHE_S)  # (the gateway asks again after its cache's second)
        shown = answer_of(
            await collect(client.send_message(message("/rollback s0001", "e-3", context="ctx-own")))
        )
        assert frames_of(shown)["rollback_preview"]["stepId"] == "s0001"
    finally:
        await http.aclose()
    assert server.ledger.refs() == ["A", "B"]
    assert server.ledger.calls() == ["pay A", "pay B"]
    assert len(user_inputs(server, "ctx-own")) == 1


async def test_agui_and_a2a_answer_ps_as_every_client_does(
    ledger_server: Any, tmp_path: Path
) -> None:
    """`/ps` (docs/containers.md) is one of the session's commands on both protocols: answered
    by the gateway's list, never sent to the model. Here a session without a container: an
    empty list, and why."""
    server = ledger_server(PAYMENTS)
    agui = AguiClient(server, "thread-ps", tmp_path / "client.json")
    assert (await agui.run({"say": "pay A then B"})).result == "Paid."
    recorded = steps(server, "thread-ps")
    ps = await agui.run({"say": "/ps"})
    assert ps.error is None and ps.outcome == {"type": "success"}, ps.error
    assert said(ps).startswith("[ps] no background process: this session runs no container")
    client, http = await open_client(server)
    try:
        shown = answer_of(
            await collect(client.send_message(message("/ps", "m-ps", context="thread-ps")))
        )
        assert shown.context_id == "thread-ps" and not shown.task_id
        assert shown.parts[0].text == said(ps)
        card = await A2ACardResolver(http, server.http).get_agent_card()
        commands = next(s for s in card.skills if s.id == "xclaw.commands")
        assert "/ps" in commands.examples  # said on the card with the other commands
    finally:
        await http.aclose()
    assert steps(server, "thread-ps") == recorded  # neither reached the model
