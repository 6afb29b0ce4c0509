"""[agui] The record as AG-UI snapshots: the conversation (MESSAGES_SNAPSHOT) from the `history`
frame's messages, and the session's state, usage and cost (STATE_SNAPSHOT).

Message ids come from the record (`xclaw:` + position, `xclaw:result:` + call id), so two
snapshots of one session name its messages alike, and a client sending them back is known
to be sending what the record already holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from xclaw.agui.request import RECORD_ID_PREFIX
from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import Session, Status, Step, state_of
from xclaw.views.record import session_cost


def args_json(value: Any) -> str:
    """A tool call's arguments as JSON text, alike in snapshots and live events (orjson; the
    standard encoder for what it refuses)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=str)


def result_id(call_id: str) -> str:
    """The id of the tool message holding a call's result (snapshot and live stream alike)."""
    return f"{RECORD_ID_PREFIX}result:{call_id}"


def snapshot_messages(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI messages (camelCase JSON) from a history frame's `messages`; the calls of a run
    in flight (`running`) have no result yet, so no tool message."""
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        mid = f"{RECORD_ID_PREFIX}{i}"
        kind = item.get("kind")
        if kind == "user":
            out.append({"id": mid, "role": "user", "content": str(item.get("text", ""))})
        elif kind == "summary":
            text = f"Summary of the earlier conversation: {item.get('text', '')}"
            out.append({"id": mid, "role": "system", "content": text})
        elif kind == "assistant":
            thoughts = [
                str(b.get("thinking"))
                for b in item.get("thinking") or ()
                if isinstance(b, dict) and b.get("thinking")
            ]
            if thoughts:
                out.append(
                    {
                        "id": f"{mid}:reasoning",
                        "role": "reasoning",
                        "content": "\n\n".join(thoughts),
                    }
                )
            message: dict[str, Any] = {"id": mid, "role": "assistant"}
            if item.get("text"):
                message["content"] = str(item["text"])
            calls = [
                {
                    "id": str(c.get("id")),
                    "type": "function",
                    "function": {
                        "name": str(c.get("name")),
                        "arguments": args_json(c.get("input") or {}),
                    },
                }
                for c in item.get("tool_calls") or ()
                if isinstance(c, dict)
            ]
            if calls:
                message["toolCalls"] = calls
            out.append(message)
        elif kind == "tool_result" and not item.get("running"):
            call_id = str(item.get("tool_call_id"))
            tool: dict[str, Any] = {
                "id": result_id(call_id),
                "role": "tool",
                "toolCallId": call_id,
                "content": str(item.get("content", "")),
            }
            if item.get("is_error"):
                tool["error"] = str(item.get("content", "")) or "failed"
            out.append(tool)
    return out


def messages_snapshot(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The MESSAGES_SNAPSHOT event of a history frame's `messages`."""
    return {"type": "MESSAGES_SNAPSHOT", "messages": snapshot_messages(items)}


def answered_calls(items: Sequence[dict[str, Any]]) -> set[str]:
    """The tool calls a history frame's messages hold a result for."""
    return {
        str(i.get("tool_call_id"))
        for i in items
        if i.get("kind") == "tool_result" and not i.get("running")
    }


def asked_calls(items: Sequence[dict[str, Any]]) -> set[str]:
    """The tool calls the history frame's assistant messages made."""
    return {
        str(c.get("id"))
        for i in items
        if i.get("kind") == "assistant"
        for c in i.get("tool_calls") or ()
        if isinstance(c, dict)
    }


def state_value(
    session_id: str,
    title: str,
    status: Status,
    *,
    busy: bool,
    awaiting_input: bool = False,
    forked: bool = False,
    cost: dict[str, Any],
) -> dict[str, Any]:
    """The STATE_SNAPSHOT's value: where the session is, and what its model calls cost
    (views.SessionCost.to_json's figures)."""
    state = state_of(status, busy=busy, awaiting_input=awaiting_input, forked=forked)
    return {
        "sessionId": session_id,
        "title": title,
        "status": status.value,
        "state": state.key,
        "stateText": state.text,
        "busy": busy,
        **cost,
    }


def state_from_record(
    session: Session, steps: Sequence[Step], prices: PriceTable, *, busy: bool
) -> dict[str, Any]:
    return state_value(
        session.session_id,
        session.title,
        session.status,
        busy=busy,
        awaiting_input=session.awaiting_input,
        forked=session.is_forked,
        cost=session_cost(steps, prices).to_json(),
    )
