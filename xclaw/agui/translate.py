"""[agui] The gateway's frames (xclaw/wire/frames.py, docs/protocol.md) as AG-UI events, for one
stream.

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
(`asked`, `answered`) skips the calls and results it holds, and the deltas of a model call
already under way when it joined (that call's text comes whole when the call completes). The
text streamed is checked against the text recorded when the call completes; the rest, or a
new snapshot if they disagree, makes the client's copy the record's.

Events are plain dicts in the wire's shape (camelCase, optional fields left out), as the
`ag-ui-protocol` package's models serialise them: a step costs several events, and a model
per event cost more CPU than the rest of the adapter (bench/README.md). The package's models
are their declaration: the tests validate every event a real gateway streams against them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from xclaw.agui.snapshot import args_json, messages_snapshot, result_id

Event = dict[str, Any]
# The marker of a stream to bring back in line with the record (a MESSAGES_SNAPSHOT).
RESYNC = "xclaw.resync"
EndKind = Literal["success", "interrupt", "pending_tools", "cancelled", "error"]
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}
USAGE_KEYS = ("input", "output", "cache_read", "cache_write", "reasoning")


@dataclass(frozen=True)
class Ended:
    """Why the AG-UI run ends, and what its last event carries."""

    kind: EndKind
    result: str | None = None
    interrupts: tuple[dict[str, Any], ...] = ()
    pending: tuple[str, ...] = ()
    error: str = ""
    code: str | None = None


def interrupt_of(frame: Mapping[str, Any]) -> dict[str, Any]:
    """An `approval_request` frame as the interrupt that asks it: answered by the next run's
    resume entry `{"interruptId": stepId, "status": "resolved", "payload": {"approved": …}}`."""
    reason = str(frame.get("reason") or "approval required")
    out: dict[str, Any] = {
        "id": str(frame.get("stepId")),
        "reason": "tool_approval",
        "message": f"{frame.get('name')}: {reason}",
        "responseSchema": APPROVAL_SCHEMA,
        "metadata": {
            "tool": frame.get("name"),
            "input": frame.get("input"),
            "maybeRepeated": bool(frame.get("maybeRepeated")),
        },
    }
    if isinstance(frame.get("callId"), str):
        out["toolCallId"] = frame["callId"]
    return out


@dataclass
class Spent:
    """What the model calls seen in a stream cost (every agent's): STATE_SNAPSHOT's figures."""

    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    estimated: bool = False
    cost: float | None = None
    calls: int = 0
    unpriced: int = 0

    def add(self, step: dict[str, Any]) -> None:
        usage = step.get("usage")
        if not isinstance(usage, dict):
            return
        self.calls += 1
        for key in USAGE_KEYS:
            value = usage.get(key)
            if isinstance(value, int):
                self.usage[key] += value
        self.estimated = self.estimated or bool(usage.get("estimated"))
        cost = step.get("cost")
        if isinstance(cost, (int, float)):
            self.cost = (self.cost or 0.0) + float(cost)
        elif usage.get("input") or usage.get("output"):
            self.unpriced += 1

    def plus(self, before: dict[str, Any]) -> dict[str, Any]:
        """These figures over a session's before the stream (views.SessionCost.to_json)."""
        usage: dict[str, Any] = dict(self.usage)
        raw = before.get("usage")
        earlier: dict[str, Any] = raw if isinstance(raw, dict) else {}
        for key in USAGE_KEYS:
            usage[key] += int(earlier.get(key) or 0)
        if self.estimated or earlier.get("estimated"):
            usage["estimated"] = True
        costs = [c for c in (before.get("cost"), self.cost) if isinstance(c, (int, float))]
        return {
            "usage": usage,
            "cost": round(sum(costs), 6) if costs else None,
            "llmCalls": int(before.get("llmCalls") or 0) + self.calls,
            "unpricedCalls": int(before.get("unpricedCalls") or 0) + self.unpriced,
        }


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
    spent: Spent = field(default_factory=Spent)
    title: str | None = None  # the session's, when a `renamed` frame said it
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
    def frame(self, frame: dict[str, Any]) -> list[Event]:
        """The events `frame` makes; `ended` is set when the AG-UI run ends with it."""
        if self.ended is not None:
            return []
        kind = frame.get("type")
        if kind == "step":  # the most frequent first: this runs for every frame
            step = frame.get("step")
            return self._step(step) if isinstance(step, dict) else []
        if kind == "tool":
            return self._tool(frame)
        if kind == "delta":
            return self._delta(str(frame.get("content", "")))
        if kind == "thinking":
            return self._thinking(str(frame.get("content", "")))
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
        if kind == "renamed":
            self.title = str(frame.get("title", ""))
            return []
        if kind == "notice":
            return [{"type": "CUSTOM", "name": "xclaw.notice", "value": frame.get("content", "")}]
        if kind == "history" and isinstance(frame.get("messages"), list):
            return [messages_snapshot(frame["messages"])]
        return []

    def _delta(self, text: str) -> list[Event]:
        if self.skip_deltas or not text:
            return []
        out: list[Event] = []
        if self._text_id is None:
            self._text_id = self._new_id("m")
            out.append(
                {"type": "TEXT_MESSAGE_START", "messageId": self._text_id, "role": "assistant"}
            )
        self._streamed.append(text)
        out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self._text_id, "delta": text})
        return out

    def _thinking(self, text: str) -> list[Event]:
        if not text:
            return []
        rid = self._new_id("r")
        return [
            {"type": "REASONING_START", "messageId": rid},
            {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": rid, "delta": text},
            {"type": "REASONING_MESSAGE_END", "messageId": rid},
            {"type": "REASONING_END", "messageId": rid},
        ]

    def _step(self, step: dict[str, Any]) -> list[Event]:
        sid: str = step.get("id") or ""
        kind = step.get("type")
        status = step.get("status")
        steps = self._steps
        name = steps.get(sid)
        if status == "running":
            if name is not None:
                return []
            steps[sid] = name = f"{sid} {kind} {step.get('name')}"
            return [{"type": "STEP_STARTED", "stepName": name}]
        out: list[Event] = []
        if name is None:
            name = f"{sid} {kind} {step.get('name')}"
            out.append({"type": "STEP_STARTED", "stepName": name})
        else:
            del steps[sid]
        if kind == "llm_call":
            if status == "completed":
                self.spent.add(step)
            if step.get("agent") == "main":
                out += self._model_call_ended(step)
        out.append({"type": "STEP_FINISHED", "stepName": name})
        return out

    def _model_call_ended(self, step: dict[str, Any]) -> list[Event]:
        """The main agent's model call ended: its text made whole, its tool calls said."""
        self.skip_deltas = False
        raw = step.get("output")
        output: dict[str, Any] = raw if isinstance(raw, dict) else {}
        calls = [c for c in output.get("tool_calls") or () if isinstance(c, dict)]
        if step.get("status") != "completed" or output.get("compaction"):
            return self._end_text()
        text = str(output.get("text") or "")
        streamed = "".join(self._streamed)
        out: list[Event] = []
        if streamed and not text.startswith(streamed):
            # What streamed here is not the start of what was recorded (a stream joined
            # half-way): the record's conversation, this call included, replaces the
            # client's (the endpoint reads it for this marker).
            out += self._end_text()
            self.asked |= {str(c.get("id")) for c in calls}
            out.append({"type": "CUSTOM", "name": RESYNC, "value": step.get("id")})
            return out
        rest = text[len(streamed) :]
        if rest:
            if self._text_id is None:
                self._text_id = self._new_id("m")
                out.append(
                    {"type": "TEXT_MESSAGE_START", "messageId": self._text_id, "role": "assistant"}
                )
            out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": self._text_id, "delta": rest})
        parent = self._text_id
        out += self._end_text()
        for call in calls:
            out += self._announce(
                str(call.get("id")), str(call.get("name")), call.get("input"), parent
            )
        return out

    def _announce(self, call_id: str, name: str, args: Any, parent: str | None) -> list[Event]:
        if call_id in self.asked:
            return []
        self.asked.add(call_id)
        if parent is None:
            parent = self._new_id("m")  # a call with no text: its assistant message
        return [
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": name,
                "parentMessageId": parent,
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args_json(args or {})},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
        ]

    def _end_text(self) -> list[Event]:
        out: list[Event] = []
        if self._text_id is not None:
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self._text_id})
        self._text_id = None
        self._streamed = []
        return out

    def _tool(self, frame: dict[str, Any]) -> list[Event]:
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
            if call_id not in self._pending_client:
                self._pending_client.append(call_id)
            self.ended = Ended("pending_tools", pending=tuple(self._pending_client))
            return out
        if call_id in self.answered or frame.get("agent"):
            return []
        self.answered.add(call_id)
        out = self._announce(call_id, name, frame.get("input"), None)
        output = frame.get("output")
        out.append(
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": result_id(call_id),
                "toolCallId": call_id,
                "content": "" if output is None else str(output),
                "role": "tool",
            }
        )
        return out

    # --- the end ----------------------------------------------------------------------------
    def closing(self) -> list[Event]:
        """What an AG-UI run must close before it finishes: its text, its steps."""
        out = self._end_text()
        out += [{"type": "STEP_FINISHED", "stepName": name} for name in self._steps.values()]
        self._steps.clear()
        return out
