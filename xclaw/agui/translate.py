"""The gateway's frames (xclaw/frames.py, docs/protocol.md) as AG-UI events, for one stream.

A `Translator` follows one session's frames and says, for each, the AG-UI events it makes
and whether the AG-UI run ends there:

| frame | events |
|---|---|
| `delta` (main agent) | TEXT_MESSAGE_START on the first, TEXT_MESSAGE_CONTENT |
| `thinking` | a reasoning span: REASONING_START, REASONING_MESSAGE_START/CONTENT/END, REASONING_END |
| `step` | STEP_STARTED / STEP_FINISHED (named `s0005 tool_call shell`); an `llm_call` of the main agent completed: TEXT_MESSAGE_END, and TOOL_CALL_START/ARGS/END for each tool call it made |
| `tool` completed / failed | TOOL_CALL_RESULT |
| `tool` running, of a front-end tool | the run ends: RUN_FINISHED, `pendingToolCallIds` |
| `approval_request` | the run ends: RUN_FINISHED with the interrupt outcome |
| `reply` | the run ends: RUN_FINISHED (success, `result` the answer) |
| `status` after a cancel | the run ends: RUN_FINISHED with the cancelled outcome |
| `error` | the run ends: RUN_ERROR |
| `notice` | CUSTOM `xclaw.notice` |
| `history` (a rollback) | MESSAGES_SNAPSHOT |

What a client already has is not sent again: a stream that began with a MESSAGES_SNAPSHOT
(`seen`) skips the calls and results it holds, and the deltas of a model call already under
way when it joined (that call's text comes whole when the call completes). The text streamed
is checked against the text recorded when the call completes; the rest, or a new snapshot
if they disagree, makes the client's copy the record's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from xclaw.agui.snapshot import messages_snapshot, result_id

# The marker of a stream to bring back in line with the record (a MESSAGES_SNAPSHOT).
RESYNC = "xclaw.resync"
EndKind = Literal["success", "interrupt", "pending_tools", "cancelled", "error"]
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


@dataclass(frozen=True)
class Ended:
    """Why the AG-UI run ends, and what its last event carries."""

    kind: EndKind
    result: str | None = None
    interrupts: tuple[Interrupt, ...] = ()
    pending: tuple[str, ...] = ()
    error: str = ""
    code: str | None = None


def interrupt_of(frame: dict[str, Any]) -> Interrupt:
    """An `approval_request` frame as the interrupt that asks it: answered by the next run's
    resume entry `{"interruptId": stepId, "status": "resolved", "payload": {"approved": …}}`."""
    reason = str(frame.get("reason") or "approval required")
    return Interrupt(
        id=str(frame.get("stepId")),
        reason="tool_approval",
        message=f"{frame.get('name')}: {reason}",
        tool_call_id=frame.get("callId"),
        response_schema=APPROVAL_SCHEMA,
        metadata={
            "tool": frame.get("name"),
            "input": frame.get("input"),
            "maybeRepeated": bool(frame.get("maybeRepeated")),
        },
    )


@dataclass
class Translator:
    run_id: str
    is_client_tool: Callable[[str], bool]
    # What the client holds already (a MESSAGES_SNAPSHOT this stream began with).
    asked: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    # Approvals the request being served answered (their requests may still be queued).
    approved: set[str] = field(default_factory=set)
    # Joined while a model call was under way: its deltas are partial here.
    skip_deltas: bool = False
    ended: Ended | None = None
    _text_id: str | None = None
    _streamed: list[str] = field(default_factory=list)
    _steps: dict[str, str] = field(default_factory=dict)
    _messages: int = 0
    _pending_client: list[str] = field(default_factory=list)

    # --- ids --------------------------------------------------------------------------------
    def _new_id(self, kind: str) -> str:
        self._messages += 1
        return f"{self.run_id}:{kind}{self._messages}"

    # --- frames -----------------------------------------------------------------------------
    def frame(self, frame: dict[str, Any]) -> list[BaseEvent]:
        """The events `frame` makes; `ended` is set when the AG-UI run ends with it."""
        if self.ended is not None:
            return []
        kind = frame.get("type")
        if kind == "delta":
            return self._delta(str(frame.get("content", "")))
        if kind == "thinking":
            return self._thinking(str(frame.get("content", "")))
        if kind == "step" and isinstance(frame.get("step"), dict):
            return self._step(frame["step"])
        if kind == "tool":
            return self._tool(frame)
        if kind == "approval_request":
            if frame.get("stepId") in self.approved:
                return []  # asked again after a restart, and answered by this very request
            self.ended = Ended("interrupt", interrupts=(interrupt_of(frame),))
            return []
        if kind == "reply":
            self.ended = Ended("success", result=str(frame.get("content", "")))
            return []
        if kind == "error":
            self.ended = Ended(
                "error", error=str(frame.get("content", "")), code=str(frame.get("code"))
            )
            return []
        if kind == "status" and frame.get("busy") is False and frame.get("awaitingInput"):
            self.ended = Ended("cancelled")  # stopped: the session waits for an instruction
            return []
        if kind == "notice":
            return [CustomEvent(name="xclaw.notice", value=str(frame.get("content", "")))]
        if kind == "history" and isinstance(frame.get("messages"), list):
            return [messages_snapshot(frame["messages"])]
        return []

    def _delta(self, text: str) -> list[BaseEvent]:
        if self.skip_deltas or not text:
            return []
        out: list[BaseEvent] = []
        if self._text_id is None:
            self._text_id = self._new_id("m")
            out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
        self._streamed.append(text)
        out.append(TextMessageContentEvent(message_id=self._text_id, delta=text))
        return out

    def _thinking(self, text: str) -> list[BaseEvent]:
        if not text:
            return []
        rid = self._new_id("r")
        return [
            ReasoningStartEvent(message_id=rid),
            ReasoningMessageStartEvent(message_id=rid),
            ReasoningMessageContentEvent(message_id=rid, delta=text),
            ReasoningMessageEndEvent(message_id=rid),
            ReasoningEndEvent(message_id=rid),
        ]

    def _step(self, step: dict[str, Any]) -> list[BaseEvent]:
        sid = str(step.get("id"))
        name = f"{sid} {step.get('type')} {step.get('name')}"
        status = step.get("status")
        out: list[BaseEvent] = []
        if sid not in self._steps:
            self._steps[sid] = name
            out.append(StepStartedEvent(step_name=name))
        main = step.get("agent") == "main"
        if step.get("type") == "llm_call" and main and status != "running":
            out += self._model_call_ended(step)
        if status != "running":
            out.append(StepFinishedEvent(step_name=self._steps.pop(sid)))
        return out

    def _model_call_ended(self, step: dict[str, Any]) -> list[BaseEvent]:
        """The main agent's model call ended: its text made whole, its tool calls said."""
        self.skip_deltas = False
        raw = step.get("output")
        output: dict[str, Any] = raw if isinstance(raw, dict) else {}
        calls = [c for c in output.get("tool_calls") or () if isinstance(c, dict)]
        if step.get("status") != "completed" or output.get("compaction"):
            return self._end_text()
        text = str(output.get("text") or "")
        streamed = "".join(self._streamed)
        out: list[BaseEvent] = []
        if streamed and not text.startswith(streamed):
            # What streamed here is not the start of what was recorded (a stream joined
            # half-way): the record's conversation, this call included, replaces the
            # client's (the endpoint reads it for this marker).
            out += self._end_text()
            self.asked |= {str(c.get("id")) for c in calls}
            out.append(CustomEvent(name=RESYNC, value=step.get("id")))
            return out
        rest = text[len(streamed) :]
        if rest:
            if self._text_id is None:
                self._text_id = self._new_id("m")
                out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
            out.append(TextMessageContentEvent(message_id=self._text_id, delta=rest))
        parent = self._text_id
        out += self._end_text()
        for call in calls:
            out += self._announce(
                str(call.get("id")), str(call.get("name")), call.get("input"), parent
            )
        return out

    def _announce(self, call_id: str, name: str, args: Any, parent: str | None) -> list[BaseEvent]:
        if call_id in self.asked:
            return []
        self.asked.add(call_id)
        if parent is None:
            parent = self._new_id("m")  # a call with no text: its assistant message
        return [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent),
            ToolCallArgsEvent(
                tool_call_id=call_id, delta=json.dumps(args or {}, ensure_ascii=False)
            ),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    def _end_text(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._text_id is not None:
            out.append(TextMessageEndEvent(message_id=self._text_id))
        self._text_id = None
        self._streamed = []
        return out

    def _tool(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id = frame.get("callId")
        if not isinstance(call_id, str):
            return []
        state = frame.get("state")
        name = str(frame.get("name"))
        if state == "running":
            if not self.is_client_tool(name) or call_id in self.answered:
                return []
            # A front-end tool's call (a sub-agent's, perhaps, never announced): the client
            # runs it; the AG-UI run ends, naming the calls it is to answer.
            out = self._announce(call_id, name, frame.get("input"), None)
            if call_id not in self.answered and call_id not in self._pending_client:
                self._pending_client.append(call_id)
            self.ended = Ended("pending_tools", pending=tuple(self._pending_client))
            return out
        if call_id in self.answered or frame.get("agent"):
            return []
        self.answered.add(call_id)
        out = self._announce(call_id, name, frame.get("input"), None)
        output = frame.get("output")
        return [
            *out,
            ToolCallResultEvent(
                message_id=result_id(call_id),
                tool_call_id=call_id,
                content="" if output is None else str(output),
                role="tool",
            ),
        ]

    # --- the end ----------------------------------------------------------------------------
    def closing(self) -> list[BaseEvent]:
        """What an AG-UI run must close before it finishes: its text, its steps."""
        out = self._end_text()
        out += [StepFinishedEvent(step_name=name) for name in self._steps.values()]
        self._steps.clear()
        return out
