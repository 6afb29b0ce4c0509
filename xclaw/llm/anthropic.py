"""[llm] Anthropic Messages API through the official `anthropic` SDK, with native tool use.

The SDK is imported by the first request: importing it costs over 2 s of CPU (it defines
thousands of pydantic models), and most processes that import this module never send one
(each of the test suite's workers collects tests/llm/test_anthropic.py).
The SDK's own retries are off (`max_retries=0`): retrying is RetryingModel's job, so one policy
covers every provider and every attempt is visible to us.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from xclaw.errors import XclawError
from xclaw.llm.base import LLMRequest, LLMResponse, ProviderError
from xclaw.llm.events import EventSink, TextDelta, Thinking, emit
from xclaw.llm.faults import cut_off, request_id_of, stamp_request_id
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from xclaw.llm.settings import DEFAULT_LLM_TIMEOUT_S
from xclaw.llm.wire import (
    parse_tool_arguments,
    portable_id,
    provider_error,
    public_endpoint,
    tls_context,
)

if TYPE_CHECKING:
    from anthropic import AsyncStream
    from anthropic.types import MessageDeltaUsage, RawMessageStreamEvent
    from anthropic.types import Usage as AnthropicUsage

EMPTY = "(empty)"
# Anthropic allows at most four cache breakpoints per request.
MAX_CACHE_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}


def anthropic_messages(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    """Provider-neutral messages -> Anthropic `messages`.

    Consecutive tool results (and any user text after them) become ONE user message with the
    tool_result blocks first, as the API requires; roles strictly alternate; an empty assistant
    message is dropped (the API rejects empty content)."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            prev = out[-1]["content"]
            if role == "user":
                # tool_result blocks must precede text in a user message.
                results = [b for b in prev + blocks if b["type"] == "tool_result"]
                others = [b for b in prev + blocks if b["type"] != "tool_result"]
                out[-1]["content"] = results + others
            else:
                prev.extend(blocks)
            return
        out.append({"role": role, "content": blocks})

    for m in messages:
        if isinstance(m, UserMessage):
            add("user", [{"type": "text", "text": m.text if m.text.strip() else EMPTY}])
        elif isinstance(m, AssistantMessage):
            # Thinking first and verbatim: the API checks each signature byte for byte.
            # `reasoning` blocks (from an OpenAI-compatible server) carry no signature and
            # are not sent.
            blocks: list[dict[str, Any]] = [
                b.to_json() for b in m.thinking if b.type in ("thinking", "redacted_thinking")
            ]
            if m.text.strip():
                blocks.append({"type": "text", "text": m.text})
            for c in m.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": portable_id(c.id),
                        "name": c.name,
                        "input": dict(c.input),
                    }
                )
            if any(b["type"] not in ("thinking", "redacted_thinking") for b in blocks):
                add("assistant", blocks)  # thinking alone is no valid assistant turn
        elif isinstance(m, ToolResultMessage):
            content: Any = m.content or EMPTY
            if m.images:
                content = [{"type": "text", "text": content}] + [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": i.media_type,
                            "data": base64.b64encode(i.data).decode("ascii"),
                        },
                    }
                    for i in m.images
                    if i.data
                ]
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": portable_id(m.tool_call_id),
                "content": content,
            }
            if m.is_error:
                block["is_error"] = True
            add("user", [block])
    return out


def anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]


def _mark_last_block(message: dict[str, Any]) -> bool:
    """Put a cache breakpoint on the last block of `message` that can carry one (thinking
    blocks cannot); False when there is none."""
    for block in reversed(message["content"]):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            block["cache_control"] = dict(EPHEMERAL)
            return True
    return False


def add_cache_breakpoints(body: dict[str, Any]) -> None:
    """Anthropic's pattern for agents: breakpoints on the tool list, the system prompt and the
    moving end of the conversation, plus the previous user turn's end so the prefix cached by
    the last call is found again even when a call added many blocks. At most four."""
    used = 0
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = dict(EPHEMERAL)
        used += 1
    if isinstance(body.get("system"), str) and body["system"]:
        body["system"] = [
            {"type": "text", "text": body["system"], "cache_control": dict(EPHEMERAL)}
        ]
        used += 1
    users = [m for m in body["messages"] if m["role"] == "user"]
    for m in (users[-1:] + users[-2:-1]) if users else ():
        if used >= MAX_CACHE_BREAKPOINTS:
            break
        if _mark_last_block(m):
            used += 1


def anthropic_request(
    model: str,
    request: LLMRequest,
    *,
    thinking_budget: int | None = None,
    cache: bool = True,
) -> dict[str, Any]:
    """The JSON body we send (minus `stream`); also what the fake server validates.

    `thinking_budget` turns on extended thinking (the API then needs max_tokens above the
    budget and no temperature); `cache` puts prompt-cache breakpoints (add_cache_breakpoints)."""
    max_tokens = request.max_tokens
    if thinking_budget:
        max_tokens = max(max_tokens, thinking_budget + 1024)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": anthropic_messages(request.messages),
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    if thinking_budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    if cache:
        add_cache_breakpoints(body)
    return body


class AnthropicModel:
    """`anthropic:<model>`. One SDK client per call: no connection outlives the event loop
    that opened it, so nothing needs closing and no socket leaks between loops."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        thinking_budget: int | None = None,
        cache: bool = True,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self.endpoint = public_endpoint(base_url)
        self._timeout_s = timeout_s
        self._thinking_budget = thinking_budget
        self._cache = cache

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        body = anthropic_request(
            self.model, request, thinking_budget=self._thinking_budget, cache=self._cache
        )
        # This SDK version has no `temperature` keyword; pass it through the body as-is.
        extra = {"temperature": body.pop("temperature")} if "temperature" in body else None
        request_id = ""
        try:
            from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient

            async with AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
                http_client=DefaultAsyncHttpxClient(verify=tls_context()),
            ) as client:
                stream = await client.messages.create(**body, stream=True, extra_body=extra)
                request_id = request_id_of(stream.response.headers)
                response = await self._read(stream, on_event)
                return replace(response, request_id=request_id, endpoint=self.endpoint)
        except ProviderError as e:  # found reading the stream (a cut-off reply)
            stamp_request_id(e, request_id)  # in place: the same error goes on
            raise
        except (asyncio.CancelledError, XclawError):
            raise  # cancellation, or an error from on_event (e.g. Cancelled): not the provider's
        except Exception as e:
            raise provider_error(e, self.name, request_id=request_id) from e

    async def _read(
        self, stream: AsyncStream[RawMessageStreamEvent], on_event: EventSink | None
    ) -> LLMResponse:
        """The streamed events, as the SDK types them. The SDK builds them without checking
        the server's JSON, so a field a server left out reads as None: each is read with a
        fallback."""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        order: list[int] = []
        # Thinking blocks by index: {"type", "thinking", "signature", "data"}.
        thinking: dict[int, dict[str, str]] = {}
        usage = Usage()
        stop_reason = ""
        response_id = ""
        finished = False  # `message_stop` seen: the only proof that the reply is whole
        events = 0
        async for event in stream:
            events += 1
            if event.type == "message_stop":
                finished = True
            elif event.type == "message_start":
                message = event.message
                usage = _usage(message.usage, usage) if message is not None else usage
                response_id = str(message.id or "") if message is not None else ""
            elif event.type == "content_block_start":
                block = event.content_block
                if block.type == "thinking":
                    thinking[event.index] = {
                        "type": block.type,
                        "thinking": block.thinking or "",
                        "signature": block.signature or "",
                        "data": "",
                    }
                elif block.type == "redacted_thinking":
                    thinking[event.index] = {
                        "type": block.type,
                        "thinking": "",
                        "signature": "",
                        "data": block.data or "",
                    }
                elif block.type == "tool_use":
                    calls[event.index] = {
                        "id": block.id,
                        "name": block.name,
                        "json": "",
                        "input": dict(block.input or {}),
                    }
                    order.append(event.index)
                elif block.type == "text" and block.text:
                    text.append(block.text)
                    await emit(on_event, TextDelta(block.text))
            elif event.type == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta" and delta.text:
                    text.append(delta.text)
                    await emit(on_event, TextDelta(delta.text))
                elif delta.type == "input_json_delta" and event.index in calls:
                    calls[event.index]["json"] += delta.partial_json or ""
                elif delta.type == "thinking_delta" and event.index in thinking:
                    thinking[event.index]["thinking"] += delta.thinking or ""
                elif delta.type == "signature_delta" and event.index in thinking:
                    thinking[event.index]["signature"] += delta.signature or ""
            elif event.type == "content_block_stop" and event.index in thinking:
                await emit(on_event, Thinking(_block(thinking[event.index])))
            elif event.type == "message_delta":
                said = event.delta.stop_reason if event.delta is not None else None
                stop_reason = said or stop_reason
                usage = _usage(event.usage, usage)
        if not finished:
            # Nothing of this reply may run or be recorded: its tool calls may be cut in half.
            got = f"{events} event(s), {len(order)} tool call(s) started" if events else "nothing"
            raise cut_off(self.name, "message_stop", got=got, headers=stream.response.headers)
        tool_calls = []
        for i in order:
            c = calls[i]
            args = parse_tool_arguments(c["json"]) if c["json"] else c["input"]
            tool_calls.append(ToolCall(id=c["id"], name=c["name"], input=args))
        return LLMResponse(
            text="".join(text),
            tool_calls=tuple(tool_calls),
            usage=usage,
            model=self.name,
            stop_reason=stop_reason,
            thinking=tuple(_block(b) for _, b in sorted(thinking.items())),
            response_id=response_id,
        )


def _block(b: dict[str, str]) -> ThinkingBlock:
    return ThinkingBlock(
        type=b["type"],  # type: ignore[arg-type]
        thinking=b["thinking"],
        signature=b["signature"],
        data=b["data"],
    )


def _usage(u: AnthropicUsage | MessageDeltaUsage | None, before: Usage) -> Usage:
    """Usage from message_start or message_delta: a field the event leaves out (None) or
    reports as zero keeps the earlier value. Anthropic splits input into uncached,
    cache-write and cache-read tokens; `prompt_tokens` is their sum (all were sent), and the
    cache parts are kept apart as well."""
    if u is None:
        return before

    def field(v: object, old: int) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else old

    old_plain = before.prompt_tokens - before.cache_read_tokens - before.cache_write_tokens
    plain = field(u.input_tokens, old_plain)
    read = field(u.cache_read_input_tokens, before.cache_read_tokens)
    write = field(u.cache_creation_input_tokens, before.cache_write_tokens)
    return Usage(
        prompt_tokens=plain + read + write,
        completion_tokens=field(u.output_tokens, before.completion_tokens),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
