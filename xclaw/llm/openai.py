"""[llm] OpenAI chat completions, and every OpenAI-compatible server (Ollama, vLLM, llama.cpp,
DeepSeek...) through `base_url`, with the official `openai` SDK and native function calling.

The SDK (xclaw/llm/openai_client.py) is imported by the first request: over 1 s of CPU, which
most processes that import this module (each test worker collecting the provider's tests)
never need. The SDK's own retries are off (`max_retries=0`): retrying is RetryingModel's job.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from xclaw.errors import XclawError
from xclaw.llm.base import LLMRequest, LLMResponse, ProviderError
from xclaw.llm.builtin_providers import OpenAIProvider
from xclaw.llm.context import estimated_usage
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
from xclaw.llm.server_info import ServerDown, reported_context_window
from xclaw.llm.settings import DEFAULT_LLM_TIMEOUT_S
from xclaw.llm.wire import (
    parse_tool_arguments,
    portable_id,
    provider_error,
    public_endpoint,
    tls_context,
)

if TYPE_CHECKING:
    from openai import AsyncStream
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletionChunk

# OpenAI-compatible servers without auth still need a non-empty key for the SDK.
NO_KEY = "not-needed"

# A 200 with an empty event stream: how llama-cpp-python's server answers a request that
# fails inside it once the response has begun (its log has the error).
EMPTY_STREAM_HINT = (
    " — an empty event stream: llama-cpp-python's server sends one when the request fails "
    "inside it, e.g. a prompt longer than its context window (--n_ctx: set "
    "context_window_tokens to it) or `tool_choice: auto` answered with a tool call while "
    "streaming; the server's log says which"
)
_MAX_CONTEXT = re.compile(r"maximum context length is (\d+) tokens")


def openai_messages(
    system: str, messages: tuple[Message, ...] | list[Message]
) -> list[dict[str, Any]]:
    """Provider-neutral messages -> chat `messages`: the system prompt first, assistant
    `tool_calls` with JSON-string arguments, one `tool` message per result."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    # Tool messages carry text only: images a tool returned follow the group of tool
    # messages as one user message of image_url data URLs.
    images: list[dict[str, Any]] = []

    def flush_images() -> None:
        if images:
            out.append({"role": "user", "content": list(images)})
            images.clear()

    for m in messages:
        if not isinstance(m, ToolResultMessage):
            flush_images()
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            # Never `content: null`: OpenAI takes it beside tool_calls, llama-cpp-python's
            # server refuses it (HTTP 500); an empty string suits every server.
            msg: dict[str, Any] = {"role": "assistant", "content": m.text or ""}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": portable_id(c.id),
                        "type": "function",
                        # Always valid JSON, even for a call whose arguments were malformed
                        # (its input then holds `_raw_arguments`): servers that render
                        # chat templates parse this string.
                        "function": {"name": c.name, "arguments": json.dumps(c.input)},
                    }
                    for c in m.tool_calls
                ]
            out.append(msg)
        elif isinstance(m, ToolResultMessage):
            content = m.content
            # Chat completions has no error flag on tool messages; say it in words.
            if m.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"
            out.append(
                {"role": "tool", "tool_call_id": portable_id(m.tool_call_id), "content": content}
            )
            shown = [i for i in m.images if i.data]
            if shown:
                images.append(
                    {"type": "text", "text": f"The image(s) {m.name} returned ({m.content}):"}
                )
                images.extend(
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": f"data:{i.media_type};base64,"
                            + base64.b64encode(i.data).decode("ascii")
                        },
                    }
                    for i in shown
                )
    flush_images()
    return out


def openai_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
    ]


def openai_request(
    model: str,
    request: LLMRequest,
    *,
    official: bool = False,
    first_tool_choice: str | None = None,
) -> dict[str, Any]:
    """The JSON body we send (minus the streaming flags); also what the fake server validates.

    `official` (no base_url: api.openai.com) sends `max_completion_tokens`, which newer OpenAI
    models require; compatible servers get the classic `max_tokens` they all understand.
    `first_tool_choice` ("required" or a tool's name) becomes `tool_choice` on a turn's first
    call; otherwise none is sent (the server's default: `auto` on most servers)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": openai_messages(request.system, request.messages),
    }
    body["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
    if request.tools:
        body["tools"] = openai_tools(request.tools)
        if first_tool_choice and request.turn_start:
            body["tool_choice"] = tool_choice(first_tool_choice, request.tools)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.output is not None:  # the answer is a JSON object of this schema
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": re.sub(r"[^A-Za-z0-9_-]", "_", request.output.name)[:64] or "output",
                "schema": dict(request.output.schema),
            },
        }
    return body


class UnknownToolChoice(ValueError):
    """`first_tool_choice` names a tool the request does not offer."""


def tool_choice(choice: str, tools: tuple[ToolSpec, ...]) -> str | dict[str, Any]:
    """`required`, or the named-function form every compatible server understands (the only
    form llama-cpp-python's `chatml-function-calling` streams)."""
    if choice == "required":
        return choice
    names = [t.name for t in tools]
    if choice not in names:
        raise UnknownToolChoice(
            f"first_tool_choice names {choice!r}, which is not one of the tools here "
            f"({', '.join(names)})"
        )
    return {"type": "function", "function": {"name": choice}}


class OpenAIModel:
    """`openai:<model>` against api.openai.com or any compatible `base_url`. One SDK client per
    call: no connection outlives the event loop that opened it."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        first_tool_choice: str | None = None,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        # Asked for structured output, it answers with `response_format` (docs/agents.md).
        self.structured_output = True
        self._api_key = api_key or NO_KEY
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._first_tool_choice = first_tool_choice
        self.endpoint = public_endpoint(base_url)
        self._window: int | None = None
        # The vendors' own APIs report none: only other servers are asked.
        self._window_known = OpenAIProvider.own_api(self.endpoint)

    async def context_window(self) -> int | None:
        """The window the server reports for this model (xclaw.llm.server_info), asked once;
        None when it reports none. A server that is down is asked again next time."""
        if not self._window_known and self._base_url:
            try:
                self._window = await reported_context_window(
                    self._base_url,
                    self.model,
                    api_key=None if self._api_key == NO_KEY else self._api_key,
                )
            except ServerDown:
                return None
            self._window_known = True
        return self._window

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        try:
            body = openai_request(
                self.model,
                request,
                official=self._base_url is None,
                first_tool_choice=self._first_tool_choice,
            )
        except UnknownToolChoice as e:  # a configuration mistake: asking again cannot help
            raise ProviderError(f"{self.name}: {e}", provider=self.name) from e
        request_id = ""
        try:
            from xclaw.llm.openai_client import Client, DefaultAsyncHttpxClient

            async with Client(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
                http_client=DefaultAsyncHttpxClient(verify=tls_context()),
            ) as client:
                stream = await client.chat.completions.create(
                    **body, stream=True, stream_options={"include_usage": True}
                )
                request_id = request_id_of(stream.response.headers)
                events: list[int] = [0]
                response = await self._read(stream, on_event, request, events)
                if not response.stop_reason and not client.saw_done():
                    # Nothing of this reply may run or be recorded: a tool call may be cut.
                    got = (
                        f"{len(response.text)} character(s) of text, "
                        f"{len(response.tool_calls)} tool call(s) started"
                    )
                    if not events[0] and self._base_url:
                        got += EMPTY_STREAM_HINT
                    headers = stream.response.headers
                    raise cut_off(self.name, "a finish_reason or [DONE]", got=got, headers=headers)
                return replace(response, request_id=request_id, endpoint=self.endpoint)
        except ProviderError as e:  # found reading the stream (a cut-off reply)
            stamp_request_id(e, request_id)  # in place: the same error goes on
            raise
        except (asyncio.CancelledError, XclawError):
            raise  # cancellation, or an error from on_event (e.g. Cancelled): not the provider's
        except Exception as e:
            error = provider_error(e, self.name, request_id=request_id)
            self._learn_window_from(error)
            raise error from e

    def _learn_window_from(self, error: ProviderError) -> None:
        """A refused prompt that names the window ("This model's maximum context length is
        4096 tokens": OpenAI, vLLM, llama-cpp-python): the next run fits into it."""
        found = _MAX_CONTEXT.search(error.message) if error.status == 400 else None
        if found:
            self._window = int(found.group(1))
            self._window_known = True

    async def _read(
        self,
        stream: AsyncStream[ChatCompletionChunk],
        on_event: EventSink | None,
        request: LLMRequest,
        events: list[int],
    ) -> LLMResponse:
        """The streamed chunks, as the SDK types them. The SDK builds them without checking
        the server's JSON, so a field a server left out reads as None: each is read with a
        fallback; what the type does not declare (`reasoning_content`) is in `model_extra`.
        `events[0]` counts the chunks (0: an empty stream)."""
        text: list[str] = []
        # Streamed tool calls arrive as fragments keyed by `index`; some servers send whole
        # calls with no index, so fall back to the id, then to arrival order.
        calls: dict[Any, dict[str, str]] = {}
        # `reasoning_content` (DeepSeek, vLLM; `reasoning` on some servers): recorded and
        # shown, never sent back (DeepSeek rejects it in input messages).
        reasoning: list[str] = []
        shown = False
        usage: Usage | None = None
        finish = ""
        response_id = ""  # every chunk carries the completion's id
        async for chunk in stream:
            events[0] += 1
            response_id = response_id or str(chunk.id or "")
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            for choice in chunk.choices or ():
                if choice.index not in (0, None):
                    continue
                finish = choice.finish_reason or finish
                delta = choice.delta
                if delta is None:
                    continue
                extra = delta.model_extra or {}
                thought = extra.get("reasoning_content") or extra.get("reasoning")
                if isinstance(thought, str) and thought:
                    reasoning.append(thought)
                content = delta.content
                if reasoning and not shown and (content or delta.tool_calls):
                    shown = True  # the reasoning is over: show it before the answer
                    await emit(on_event, Thinking(ThinkingBlock("reasoning", "".join(reasoning))))
                if content:
                    text.append(content)
                    await emit(on_event, TextDelta(content))
                for frag in delta.tool_calls or ():
                    index, fid = frag.index, frag.id
                    key = index if index is not None else (fid or len(calls))
                    entry = calls.setdefault(key, {"id": "", "name": "", "arguments": ""})
                    if fid:
                        entry["id"] = fid
                    fn = frag.function
                    if fn is not None:
                        if fn.name:
                            entry["name"] = fn.name
                        if fn.arguments:
                            entry["arguments"] += fn.arguments
        if reasoning and not shown:
            await emit(on_event, Thinking(ThinkingBlock("reasoning", "".join(reasoning))))
        tool_calls = tuple(
            ToolCall(
                id=c["id"] or f"call_{uuid.uuid4().hex[:24]}",
                name=c["name"],
                input=parse_tool_arguments(c["arguments"]),
            )
            for c in calls.values()
        )
        if usage is None:  # the server sent no usage (llama-cpp-python while streaming)
            usage = estimated_usage(request, "".join(text), tool_calls, "".join(reasoning))
        return LLMResponse(
            text="".join(text),
            tool_calls=tool_calls,
            usage=usage,
            model=self.name,
            stop_reason=finish,
            thinking=(
                (ThinkingBlock(type="reasoning", thinking="".join(reasoning)),) if reasoning else ()
            ),
            response_id=response_id,
        )


def _usage(u: CompletionUsage) -> Usage:
    """`prompt_tokens` includes the cached ones (`prompt_tokens_details.cached_tokens`);
    `completion_tokens` includes `completion_tokens_details.reasoning_tokens`."""

    def count(v: object) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0

    cached = u.prompt_tokens_details
    thought = u.completion_tokens_details
    return Usage(
        prompt_tokens=count(u.prompt_tokens),
        completion_tokens=count(u.completion_tokens),
        cache_read_tokens=count(cached.cached_tokens) if cached is not None else 0,
        reasoning_tokens=count(thought.reasoning_tokens) if thought is not None else 0,
    )
