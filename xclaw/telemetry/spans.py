"""[telemetry] One user turn's steps -> spans, by the OpenTelemetry GenAI semantic conventions.

    invoke_agent xclaw               the turn: from the user's message to its last step
      chat <model>                   each model call (tokens, finish reasons, cache tokens)
      execute_tool <tool>            each tool call (name, call id)
        invoke_agent <sub-agent>     a sub-agent under the spawn_agent call that started it
          chat … / execute_tool …

Every text a span carries — its name (`execute_tool <tool>`), attributes, events, status —
passes `redact` (the runtime's Redactor): the steps it comes from were redacted when they were
recorded, and this also covers a secret learned since. System alerts (approval, resume,
max_iterations) are events on their agent's span. Ids are
derived from the step ids, so exporting a turn twice (a failed turn resumed later) gives the
same trace and span ids, which receivers treat as the same spans. Pure: no OpenTelemetry
import, so the mapping is tested on its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from xclaw.store.steps.model import INTERRUPTED, MAIN_AGENT, Step, StepStatus, StepType

AGENT_NAME = "xclaw"
_CONTENT_CHARS = 8192

# Where an llm_call's output may carry prompt-cache token counts (the provider layer names
# them; read defensively so older records and other providers simply have none).
# Since prompt-cache accounting: output_data["usage"] = {input, output, cache_read, cache_write,
# reasoning} (docs/storage.md).
_CACHE_READ_KEYS = ("cache_read", "cache_read_tokens", "cache_read_input_tokens")
_CACHE_WRITE_KEYS = ("cache_write", "cache_write_tokens", "cache_creation_input_tokens")


@dataclass
class SpanEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class SpanData:
    name: str
    trace_id: int  # 128 bits
    span_id: int  # 64 bits
    parent_id: int | None
    start_ns: int
    end_ns: int
    kind: str  # internal | client
    attributes: dict[str, Any]
    error: str | None = None  # status description when the span failed
    events: list[SpanEvent] = field(default_factory=list)


def _id(text: str, bits: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[: bits // 8], "big")
    return value or 1  # an all-zero id is invalid


def _ns(ms: int | None) -> int:
    return int(ms or 0) * 1_000_000


def split_turns(steps: Sequence[Step]) -> list[list[Step]]:
    """The steps in seq order, cut before each main-agent user message (a turn's first
    step; a sub-agent's task is recorded as its own user message and stays in the turn);
    steps before the first user message are dropped."""
    turns: list[list[Step]] = []
    for s in steps:
        if s.step_type is StepType.USER_INPUT and s.agent == MAIN_AGENT:
            turns.append([s])
        elif turns:
            turns[-1].append(s)
    return turns


def turn_spans(
    session_id: str,
    turn: Sequence[Step],
    *,
    capture_content: bool = False,
    redact: Callable[[str], str] = lambda text: text,
) -> list[SpanData]:
    """Spans of one turn (its first step is the user message)."""
    if not turn or turn[0].step_type is not StepType.USER_INPUT:
        return []
    user = turn[0]
    trace_id = _id(f"trace:{user.step_id}", 128)
    common = {"gen_ai.conversation.id": session_id}
    sender = _user_of(user)
    if sender is not None:  # who sent the turn's message (docs/teams.md)
        common["enduser.id"] = sender

    def content(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = redact(text)
        return text if len(text) <= _CONTENT_CHARS else text[:_CONTENT_CHARS] + "…"

    by_id = {s.step_id: s for s in turn}
    end_of_turn = max((s.end_time or s.start_time) for s in turn)
    root = SpanData(
        name=f"invoke_agent {AGENT_NAME}",
        trace_id=trace_id,
        span_id=_id(f"span:{user.step_id}", 64),
        parent_id=None,
        start_ns=_ns(user.start_time),
        end_ns=_ns(end_of_turn),
        kind="internal",
        attributes={
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "xclaw.step.id": user.display_id,
        },
    )
    if capture_content:
        root.attributes["gen_ai.input.messages"] = content(
            [{"role": "user", "parts": [{"type": "text", "content": _text(user.input_data)}]}]
        )
    spans = [root]
    agent_spans: dict[str, SpanData] = {MAIN_AGENT: root}
    step_spans: dict[str, SpanData] = {}

    def agent_span(step: Step) -> SpanData:
        """The invoke_agent span of the step's agent (a sub-agent's is made on first use,
        under the spawn_agent call its first step hangs from)."""
        if step.agent in agent_spans:
            return agent_spans[step.agent]
        own = [s for s in turn if s.agent == step.agent]
        # A sub-agent's id is the display id of the spawn_agent step that started it.
        spawn = next((t for t in turn if t.display_id == step.agent), None)
        spawn = spawn or by_id.get(step.parent_step_id or "")
        parent = step_spans.get(spawn.step_id) if spawn is not None else None
        sub = SpanData(
            name=f"invoke_agent {step.agent}",
            trace_id=trace_id,
            span_id=_id(f"agent:{session_id}:{step.agent}:{user.step_id}", 64),
            parent_id=(parent or root).span_id,
            start_ns=_ns(min(s.start_time for s in own)),
            end_ns=_ns(max((s.end_time or s.start_time) for s in own)),
            kind="internal",
            attributes={
                **common,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": step.agent,
                "gen_ai.agent.id": step.agent,
            },
        )
        agent_spans[step.agent] = sub
        spans.append(sub)
        return sub

    last_answer: Step | None = None
    for s in turn[1:]:
        owner = agent_span(s)
        if s.step_type is StepType.SYSTEM_ALERT:
            attrs = {"xclaw.step.id": s.display_id, "xclaw.alert": s.name}
            if s.call_id:
                attrs["gen_ai.tool.call.id"] = s.call_id
            answerer = _user_of(s)
            if answerer is not None:  # who answered the approval
                attrs["enduser.id"] = answerer
            owner.events.append(SpanEvent(f"xclaw.{s.name}", _ns(s.start_time), attrs))
            continue
        if s.step_type is StepType.LLM_CALL:
            span = _chat_span(s, trace_id, owner.span_id, common, capture_content, content)
            if s.agent == MAIN_AGENT:
                last_answer = s
        elif s.step_type is StepType.TOOL_CALL:
            span = _tool_span(s, trace_id, owner.span_id, common, capture_content, content)
        else:  # a sub-agent's task (its user message)
            if capture_content:
                owner.attributes["gen_ai.input.messages"] = content(
                    [{"role": "user", "parts": [{"type": "text", "content": _text(s.input_data)}]}]
                )
            continue
        step_spans[s.step_id] = span
        spans.append(span)

    answered = (
        last_answer is not None
        and last_answer.status is StepStatus.COMPLETED
        and not _tool_calls(last_answer)
    )
    if not answered:
        root.error = "the turn ended without an answer (failed, cancelled or interrupted)"
    elif capture_content and last_answer is not None:
        out = last_answer.output_data if isinstance(last_answer.output_data, dict) else {}
        root.attributes["gen_ai.output.messages"] = content(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": str(out.get("text") or "")}],
                }
            ]
        )
    for span in spans:
        _scrub(span, redact)
    return spans


def _scrub(span: SpanData, redact: Callable[[str], str]) -> None:
    """Every text of the span redacted (contents were, before they were cut to length)."""

    def value(v: Any) -> Any:
        if isinstance(v, str):
            return redact(v)
        if isinstance(v, (list, tuple)):
            return [redact(x) if isinstance(x, str) else x for x in v]
        return v

    span.name = redact(span.name)
    span.attributes = {k: value(v) for k, v in span.attributes.items()}
    if span.error is not None:
        span.error = redact(span.error)
    for event in span.events:
        event.name = redact(event.name)
        event.attributes = {k: value(v) for k, v in event.attributes.items()}


def _chat_span(
    s: Step,
    trace_id: int,
    parent: int,
    common: dict[str, Any],
    capture: bool,
    content: Callable[[Any], str],
) -> SpanData:
    inp = s.input_data if isinstance(s.input_data, dict) else {}
    out = s.output_data if isinstance(s.output_data, dict) else {}
    spec = str(inp.get("model") or s.name)
    provider, _, model = spec.partition(":")
    if not model:
        provider, model = "", spec
    attrs: dict[str, Any] = {
        **common,
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "xclaw.step.id": s.display_id,
    }
    # Counts are facts in the GenAI conventions: a NULL column (the server reported none)
    # sends none; xclaw's estimate goes in its own attributes below.
    if s.token_usage_prompt is not None:
        attrs["gen_ai.usage.input_tokens"] = int(s.token_usage_prompt)
    if s.token_usage_completion is not None:
        attrs["gen_ai.usage.output_tokens"] = int(s.token_usage_completion)
    if provider:
        attrs["gen_ai.provider.name"] = provider
    raw_params = inp.get("params")
    params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    if isinstance(params.get("max_tokens"), int):
        attrs["gen_ai.request.max_tokens"] = params["max_tokens"]
    if isinstance(params.get("temperature"), (int, float)):
        attrs["gen_ai.request.temperature"] = float(params["temperature"])
    if out.get("model"):
        attrs["gen_ai.response.model"] = str(out["model"]).partition(":")[2] or str(out["model"])
    if out.get("response_id"):  # the provider's id of the reply: msg_…, chatcmpl-…
        attrs["gen_ai.response.id"] = str(out["response_id"])
    if out.get("request_id"):  # the provider's id of the HTTP request (its support asks)
        attrs["xclaw.provider.request_id"] = str(out["request_id"])
    if out.get("stop_reason"):
        attrs["gen_ai.response.finish_reasons"] = [str(out["stop_reason"])]
    raw_usage = out.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    if usage.get("estimated") is True:
        attrs["xclaw.usage.estimated"] = True
        for key, name in (("input", "input"), ("output", "output")):
            if isinstance(usage.get(key), int):
                attrs[f"xclaw.usage.estimated_{name}_tokens"] = usage[key]
    endpoint = out.get("endpoint")
    if isinstance(endpoint, str) and endpoint:
        where = urlsplit(endpoint)
        if where.hostname:
            attrs["server.address"] = where.hostname
        with contextlib.suppress(ValueError):
            if where.port is not None:
                attrs["server.port"] = where.port
    read = _first_int((usage, out), _CACHE_READ_KEYS)
    write = _first_int((usage, out), _CACHE_WRITE_KEYS)
    if isinstance(usage.get("reasoning"), int) and usage["reasoning"] > 0:
        attrs["xclaw.usage.reasoning_tokens"] = usage["reasoning"]
    if read is not None:
        attrs["gen_ai.usage.cache_read.input_tokens"] = read
    if write is not None:
        attrs["gen_ai.usage.cache_creation.input_tokens"] = write
    if capture and s.status is StepStatus.COMPLETED:
        parts: list[dict[str, Any]] = []
        if out.get("text"):
            parts.append({"type": "text", "content": str(out["text"])})
        for c in _tool_calls(s):
            parts.append(
                {
                    "type": "tool_call",
                    "id": c.get("id"),
                    "name": c.get("name"),
                    "arguments": c.get("input"),
                }
            )
        attrs["gen_ai.output.messages"] = content([{"role": "assistant", "parts": parts}])
    return _step_span(s, f"chat {model}", trace_id, parent, "client", attrs, "llm_error")


def _tool_span(
    s: Step,
    trace_id: int,
    parent: int,
    common: dict[str, Any],
    capture: bool,
    content: Callable[[Any], str],
) -> SpanData:
    attrs: dict[str, Any] = {
        **common,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": s.name,
        "gen_ai.tool.type": "function",
        "xclaw.step.id": s.display_id,
    }
    if s.call_id:
        attrs["gen_ai.tool.call.id"] = s.call_id
    if capture:
        attrs["gen_ai.tool.call.arguments"] = content(s.input_data)
        if s.output_data is not None:
            attrs["gen_ai.tool.call.result"] = content(s.output_data)
    return _step_span(
        s, f"execute_tool {s.name}", trace_id, parent, "internal", attrs, "tool_error"
    )


def _step_span(
    s: Step, name: str, trace_id: int, parent: int, kind: str, attrs: dict[str, Any], error: str
) -> SpanData:
    """The span of one step (a model call or a tool call): its id derives from the step id, so
    exporting a turn again after a resume gives the same span."""
    span = SpanData(
        name=name,
        trace_id=trace_id,
        span_id=_id(f"span:{s.step_id}", 64),
        parent_id=parent,
        start_ns=_ns(s.start_time),
        end_ns=_ns(s.end_time or s.start_time),
        kind=kind,
        attributes=attrs,
    )
    _fail(span, s, error)
    return span


def _fail(span: SpanData, s: Step, kind: str) -> None:
    if s.status is StepStatus.FAILED:
        span.attributes["error.type"] = INTERRUPTED if s.error_message == INTERRUPTED else kind
        span.error = (s.error_message or kind)[:500]
    elif s.status is StepStatus.RUNNING:
        span.attributes["error.type"] = "unfinished"
        span.error = "the step had not finished when the turn was exported"


def _tool_calls(s: Step) -> list[dict[str, Any]]:
    out = s.output_data if isinstance(s.output_data, dict) else {}
    return [c for c in out.get("tool_calls") or () if isinstance(c, dict)]


def _first_int(sources: Sequence[dict[str, Any]], keys: Sequence[str]) -> int | None:
    for src in sources:
        for k in keys:
            v = src.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


def _user_of(s: Step) -> str | None:
    """The user of a shared server named in a step's `by` (a message's sender, an approval's
    answerer); None: the server's token, or nobody."""
    out = s.output_data if isinstance(s.output_data, dict) else {}
    by = out.get("by")
    user = by.get("user") if isinstance(by, dict) else None
    return user if isinstance(user, str) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
