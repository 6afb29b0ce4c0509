"""Every frame a real gateway sends, and every answer of its HTTP API, follows its declaration
(xclaw/wire/frames.py, xclaw/wire/http_bodies.py) exactly — no field the class does not declare, none
it requires missing — and validates against the published JSON Schema
(docs/frames.schema.json, /api/openapi.json) with a third-party validator. The gateway builds
its frames as dicts on the hot path: this is what holds those builders to the declaration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.gateway.conftest import ServerFactory
from tests.gateway.harness import Client
from xclaw.wire.frames import BY_TYPE, SessionInfo, undeclared, undeclared_in
from xclaw.wire.http_bodies import (
    ForkAnswer,
    Health,
    HistoryAnswer,
    RollbackAnswer,
    SessionList,
    StepList,
    StepTree,
    ToolList,
)

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "frames.schema.json").read_text()
)

pytestmark = pytest.mark.slow


def _validator() -> Any:
    server = {**SCHEMA, "oneOf": [{"$ref": "#/$defs/ServerFrame"}]}
    return jsonschema.Draft202012Validator(server)


async def test_every_frame_of_a_conversation_follows_its_declaration(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(
        [
            {
                "thinking": "first a file",
                "text": "Writing it.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi > a.txt"}}],
            },
            {"text": "Done."},
        ],
        approval="ask",
    )
    c = await Client.open(server)
    await c.attach(None)
    await c.send({"type": "ping"})
    await c.until_type("pong")
    await c.send({"type": "message", "sessionId": c.session_id, "content": "write a file"})
    asked = await c.until_type("approval_request")
    # A message while the run waits: queued (docs/protocol.md, input while a run is busy).
    later = {"type": "message", "sessionId": c.session_id, "content": "then this"}
    await c.send({**later, "messageId": "q1", "busy": "queue"})
    await c.until_type("queued")
    approve = {"type": "approval", "sessionId": c.session_id, "approve": True}
    await c.send({**approve, "stepId": asked["stepId"]})
    await c.until_type("reply")
    await c.until_type("reply")  # the queued message's run
    # A message with the client's id: acknowledged, then its run (docs/protocol.md).
    once = {"type": "message", "sessionId": c.session_id, "content": "once", "messageId": "m1"}
    await c.send(once)
    await c.until_type("ack")
    await c.until_type("reply")
    for command in ("/steps 5", "/title frames", "/help", "/sessions", "/tools", "/queue"):
        await c.send({"type": "message", "sessionId": c.session_id, "content": command})
        await c.until_type("notice")
    await c.send({"type": "message", "sessionId": c.session_id, "content": "/fork s0003 other"})
    await c.until_type("forked")
    await c.send({"type": "message", "sessionId": c.session_id, "content": "/rollback s0005"})
    await c.until_type("history")
    await c.send({"type": "cancel", "sessionId": c.session_id})
    await c.until_type("notice")
    await c.send(
        {"type": "approval", "sessionId": c.session_id, "stepId": "s0001", "approve": True}
    )
    await c.until_type("error")
    await c.send("{not json")
    await c.until(lambda f: f.get("type") == "error" and f.get("code") == "bad_frame")
    await c.attach(c.session_id)  # session, history (after a rollback), status with busy

    seen = {f["type"] for f in c.seen}
    # Every type but thinking_discarded (a retried model call after its thinking: its
    # builder is checked in tests/runtime) and rollback_preview (a rollback past outside
    # effects: checked in tests/runtime/test_rollback_effects.py) came by.
    assert seen >= set(BY_TYPE) - {"thinking_discarded", "rollback_preview"}, set(BY_TYPE) - seen
    validator = _validator()
    for frame in c.seen:
        assert undeclared(frame) == [], frame
        errors = [e.message for e in validator.iter_errors(frame)]
        assert errors == [], (frame, errors)

    # The HTTP API's answers, read with the classes the OpenAPI document is generated from.
    sid = c.session_id
    assert sid is not None
    headers = {"Authorization": f"Bearer {server.token}"}
    async with httpx.AsyncClient(base_url=server.http + "/api", headers=headers) as api:
        spec = (await api.get("/openapi.json")).json()
        components = spec["components"]["schemas"]
        answers: list[tuple[Any, str, Any]] = [
            (Health, "Health", (await api.get("/health")).json()),
            (SessionList, "SessionList", (await api.get("/sessions")).json()),
            (SessionInfo, "Session", (await api.get(f"/sessions/{sid}")).json()),
            (StepList, "StepList", (await api.get(f"/sessions/{sid}/steps?n=0")).json()),
            (StepTree, "StepTree", (await api.get(f"/sessions/{sid}/tree")).json()),
            (HistoryAnswer, "HistoryAnswer", (await api.get(f"/sessions/{sid}/history")).json()),
            (ToolList, "ToolList", (await api.get("/tools")).json()),
            (
                ForkAnswer,
                "ForkAnswer",
                (await api.post(f"/sessions/{sid}/fork", json={"stepId": "s0001"})).json(),
            ),
            (
                RollbackAnswer,
                "RollbackAnswer",
                (await api.post(f"/sessions/{sid}/rollback", json={"stepId": "s0002"})).json(),
            ),
        ]
        for cls, name, body in answers:
            assert undeclared_in(cls, body) == [], (name, body)
            schema = {**components[name], "components": spec["components"]}
            validator = jsonschema.Draft202012Validator(schema)
            assert [e.message for e in validator.iter_errors(body)] == [], (name, body)
