"""The LLM provider seam: one Protocol that Anthropic, OpenAI-compatible servers and the
scripted model all implement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol, runtime_checkable

from xclaw.messages import Message, ToolCall, ToolSpec, Usage

# Called with each piece of assistant text as it streams in.
DeltaSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LLMRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    # "main" for the session's main agent, otherwise the sub-agent's id. The scripted model
    # uses it to pick its script; real providers ignore it.
    agent: str = "main"


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""  # the model that actually answered (after fallbacks)
    stop_reason: str = ""


@runtime_checkable
class Model(Protocol):
    """An LLM provider. `complete` streams text through `on_delta` and returns the whole
    response; it raises xclaw.errors.LLMError (retryable or not) on failure."""

    name: str  # e.g. "anthropic:claude-sonnet-4-5", "script:demo.json"

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse: ...
