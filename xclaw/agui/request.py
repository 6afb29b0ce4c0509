"""[agui] What a `POST /agui` asks for, read from its `RunAgentInput` (the `ag-ui-protocol`
package's model) and checked like every client frame: hostile until proven otherwise, refused with a
sentence, never a traceback.

Of the client's conversation only its end counts — a new user message, the results of
front-end tool calls — and its answers to interrupts (`resume`): the record is the
conversation, and the client's copy of the rest is ignored (docs/ag-ui.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from xclaw.errors import BadRequest
from xclaw.store.steps.rows import check_session_id, valid_unicode
from xclaw.tools.client import BadClientTool, ClientToolSpec, client_tool_spec
from xclaw.wire.protocol import MAX_FRAME_BYTES

# A run carries the client's whole conversation: more than a WebSocket frame, bounded still.
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_TEXT_CHARS = MAX_FRAME_BYTES
# The ids of the messages the record gives clients (MESSAGES_SNAPSHOT): a client's own ids
# (UUIDs) never look like these.
RECORD_ID_PREFIX = "xclaw:"


@dataclass(frozen=True, slots=True)
class Answer:
    """A resume entry: the answer to the approval `step_id`."""

    step_id: str
    approve: bool


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A front-end tool's result, from a `tool` message of the client."""

    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True)
class RunRequest:
    thread_id: str
    run_id: str
    # The user's new message (its id and text), when the conversation ends with one.
    message_id: str | None = None
    text: str | None = None
    tool_answers: list[ToolAnswer] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    tools: list[ClientToolSpec] | None = None  # None: the client said nothing of them
    # `forwardedProps.agent`: the declared agent (xclaw.yaml's `agents:`) the message runs.
    agent: str | None = None


def read_request(raw: bytes, *, server_tools: list[str]) -> RunRequest:
    """The run asked for; BadRequest saying what is wrong."""
    from ag_ui.core import RunAgentInput

    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    try:
        data = valid_unicode(json.loads(raw))
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object (a RunAgentInput)")
    try:
        run = RunAgentInput.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequest(f"not a RunAgentInput: {where}: {first['msg']}") from None
    except RecursionError:
        raise BadRequest("request body is nested too deeply") from None
    try:
        check_session_id(run.thread_id)
    except ValueError as e:
        raise BadRequest(f"threadId: {e}") from None
    if not run.run_id or len(run.run_id) > 200:
        raise BadRequest("runId must be 1-200 characters")
    message_id, text, tool_answers = _conversation_end(run.messages)
    return RunRequest(
        thread_id=run.thread_id,
        run_id=run.run_id,
        message_id=message_id,
        text=text,
        tool_answers=tool_answers,
        answers=[_answer(e) for e in run.resume or ()],
        tools=None if run.tools is None else _tools(run.tools, server_tools),
        agent=_agent(run.forwarded_props),
    )


def _agent(props: Any) -> str | None:
    """`forwardedProps.agent`, the declared agent the message runs (absent: the one the
    thread runs, xclaw's own for a new one)."""
    if not isinstance(props, dict) or props.get("agent") is None:
        return None
    name = props["agent"]
    if not isinstance(name, str) or not 0 < len(name) <= 200:
        raise BadRequest("forwardedProps.agent must be the name of a declared agent")
    return name


def _conversation_end(messages: list[Any]) -> tuple[str | None, str | None, list[ToolAnswer]]:
    """The new user message at the end of the conversation (if any), and the tool results
    that end it (before that message, or alone)."""
    tail = list(messages)
    message_id = text = None
    if tail and tail[-1].role == "user":
        last = tail.pop()
        message_id, text = last.id, _text(last.content, "user message")
        if not text.strip():
            raise BadRequest("the user message is empty")
    answers: list[ToolAnswer] = []
    while tail and tail[-1].role == "tool":
        m = tail.pop()
        content = _text(m.content, "tool message")
        answers.append(ToolAnswer(m.tool_call_id, content or (m.error or ""), m.error is not None))
    answers.reverse()
    return message_id, text, answers


def _text(content: Any, what: str) -> str:
    if isinstance(content, str):
        text = content
    else:
        kinds = {getattr(p, "type", "?") for p in content}
        if kinds - {"text"}:
            raise BadRequest(
                f"{what}: only text content is supported (got {', '.join(sorted(kinds))})"
            )
        text = "".join(p.text for p in content)
    if len(text) > MAX_TEXT_CHARS:
        raise BadRequest(f"{what} too long ({len(text)} characters; limit {MAX_TEXT_CHARS})")
    return text


def _answer(entry: Any) -> Answer:
    """`resolved` with `{"approved": BOOL}` (or a bare boolean) answers; `cancelled` denies."""
    if entry.status == "cancelled":
        return Answer(entry.interrupt_id, False)
    payload = entry.payload
    approved = payload.get("approved") if isinstance(payload, dict) else payload
    if not isinstance(approved, bool):
        raise BadRequest(
            f"resume entry {entry.interrupt_id!r}: a resolved approval needs the payload "
            '{"approved": true|false}'
        )
    return Answer(entry.interrupt_id, approved)


def _tools(tools: list[Any], server_tools: list[str]) -> list[ClientToolSpec]:
    from xclaw.tools.client import MAX_TOOLS

    if len(tools) > MAX_TOOLS:
        raise BadRequest(f"too many tools ({len(tools)}; limit {MAX_TOOLS})")
    specs: dict[str, ClientToolSpec] = {}
    for t in tools:
        try:
            spec = client_tool_spec(t.name, t.description, t.parameters, taken=server_tools)
        except BadClientTool as e:
            raise BadRequest(str(e)) from None
        if spec.name in specs:
            raise BadRequest(f"tool name {spec.name!r} is given twice")
        specs[spec.name] = spec
    return list(specs.values())
