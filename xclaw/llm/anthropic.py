"""Anthropic Messages API through the official `anthropic` SDK, with native tool use.

The SDK's own retries are off (`max_retries=0`): retrying is RetryingModel's job, so one policy
covers every provider and every attempt is visible to us.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from anthropic import AsyncAnthropic

from xclaw.errors import XclawError
from xclaw.llm.base import DeltaSink, LLMRequest, LLMResponse, ProviderError
from xclaw.llm.faults import cut_off, request_id_of, stamp_request_id
from xclaw.llm.wire import parse_tool_arguments, portable_id, provider_error
from xclaw.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

EMPTY = "(empty)"


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
            blocks: list[dict[str, Any]] = []
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
            add("assistant", blocks)
        elif isinstance(m, ToolResultMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": portable_id(m.tool_call_id),
                "content": m.content or EMPTY,
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


def anthropic_request(model: str, request: LLMRequest) -> dict[str, Any]:
    """The JSON body we send (minus `stream`); also what the fake server validates."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": anthropic_messages(request.messages),
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = anthropic_tools(request.tools)
    if request.temperature is not None:
        body["temperature"] = request.temperature
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
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        body = anthropic_request(self.model, request)
        # This SDK version has no `temperature` keyword; pass it through the body as-is.
        extra = {"temperature": body.pop("temperature")} if "temperature" in body else None
        request_id = ""
        try:
            async with AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
            ) as client:
                stream = await client.messages.create(**body, stream=True, extra_body=extra)
                request_id = request_id_of(getattr(stream.response, "headers", None))
                response = await self._read(stream, on_delta)
                return replace(response, request_id=request_id)
        except ProviderError as e:  # found reading the stream (a cut-off reply)
            raise stamp_request_id(e, request_id)
        except (asyncio.CancelledError, XclawError):
            raise  # cancellation, or an error from on_delta (e.g. Cancelled): not the provider's
        except Exception as e:
            raise provider_error(e, self.name, request_id=request_id) from e

    async def _read(self, stream: Any, on_delta: DeltaSink | None) -> LLMResponse:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        order: list[int] = []
        input_tokens = output_tokens = 0
        stop_reason = ""
        finished = False  # `message_stop` seen: the only proof that the reply is whole
        events = 0
        async for event in stream:
            kind = getattr(event, "type", "")
            events += 1
            if kind == "message_stop":
                finished = True
            elif kind == "message_start":
                u = event.message.usage
                input_tokens = _input_tokens(u)
                output_tokens = getattr(u, "output_tokens", 0) or 0
            elif kind == "content_block_start":
                block = event.content_block
                if getattr(block, "type", "") == "tool_use":
                    calls[event.index] = {
                        "id": block.id,
                        "name": block.name,
                        "json": "",
                        "input": dict(getattr(block, "input", None) or {}),
                    }
                    order.append(event.index)
                elif getattr(block, "type", "") == "text" and getattr(block, "text", ""):
                    text.append(block.text)
                    if on_delta is not None:
                        await on_delta(block.text)
            elif kind == "content_block_delta":
                delta = event.delta
                dtype = getattr(delta, "type", "")
                if dtype == "text_delta" and delta.text:
                    text.append(delta.text)
                    if on_delta is not None:
                        await on_delta(delta.text)
                elif dtype == "input_json_delta" and event.index in calls:
                    calls[event.index]["json"] += delta.partial_json or ""
            elif kind == "message_delta":
                stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
                u = event.usage
                output_tokens = getattr(u, "output_tokens", None) or output_tokens
                if getattr(u, "input_tokens", None):
                    input_tokens = _input_tokens(u)
        if not finished:
            # Nothing of this reply may run or be recorded: its tool calls may be cut in half.
            got = f"{events} event(s), {len(order)} tool call(s) started" if events else "nothing"
            headers = getattr(getattr(stream, "response", None), "headers", None)
            raise cut_off(self.name, "message_stop", got=got, headers=headers)
        tool_calls = []
        for i in order:
            c = calls[i]
            args = parse_tool_arguments(c["json"]) if c["json"] else c["input"]
            tool_calls.append(ToolCall(id=c["id"], name=c["name"], input=args))
        return LLMResponse(
            text="".join(text),
            tool_calls=tuple(tool_calls),
            usage=Usage(prompt_tokens=input_tokens, completion_tokens=output_tokens),
            model=self.name,
            stop_reason=stop_reason,
        )


def _input_tokens(u: Any) -> int:
    """Anthropic splits input into uncached, cache-write and cache-read; all were sent."""
    return sum(
        getattr(u, k, None) or 0
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
