"""[llm] The LLM provider seam: one Protocol that Anthropic, OpenAI-compatible servers and the
scripted model all implement."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from xclaw.errors import LLMError
from xclaw.llm.events import EventSink
from xclaw.llm.messages import Message, ThinkingBlock, ToolCall, ToolSpec, Usage
from xclaw.llm.playback import MAIN, Playback

# The model's output limit per call (`max_tokens` in xclaw.yaml: xclaw/llm/settings.py).
DEFAULT_MAX_TOKENS = 4096

# The earlier seam's sink: each piece of assistant text as it streams in. A model written
# for it (`complete(request, on_delta)`) still works: xclaw/llm/legacy.py adapts it.
DeltaSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """The final answer's JSON schema, for a provider with structured output of its own
    (a Model with `structured_output = True`: OpenAI's `response_format`). `name`: letters,
    digits, `_` and `-`."""

    name: str
    schema: Mapping[str, Any]


def structured(model: Any) -> bool:
    """The model gives structured output itself when asked (`LLMRequest.output`); else the
    loop offers a final-answer tool (xclaw/agents/output.py)."""
    return getattr(model, "structured_output", False) is True


@dataclass(frozen=True, slots=True)
class LLMRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    # The first call of a turn: it answers the user's message (or a sub-agent's task), not a
    # tool result or a summary request. A provider's `first_tool_choice` forces a tool call
    # on this call only (forcing every call, the model could never give its final answer).
    turn_start: bool = False
    # Set only for a model with structured output of its own: the answer must be a JSON
    # object of this schema.
    output: OutputFormat | None = None
    # The loop's estimate of the prompt's tokens (the messages and instructions): with
    # `max_tokens`, the request's maximum cost, which a budget reserves (docs/budgets.md).
    prompt_estimate: int = 0
    # Who asks and the whole conversation, for the models that play answers back (the
    # scripted model, a record's replay: xclaw/llm/playback.py); real providers ignore it.
    playback: Playback = MAIN


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""  # the model that actually answered (after fallbacks)
    stop_reason: str = ""
    # Reasoning blocks before the answer (Anthropic thinking, OpenAI-compatible reasoning).
    thinking: tuple[ThinkingBlock, ...] = ()
    # The provider's id of the HTTP request that answered (`request-id` / `x-request-id`).
    request_id: str = ""
    # The provider's id of the response itself: Anthropic's message id (`msg_…`), an
    # OpenAI-compatible completion's id (`chatcmpl-…`); OpenTelemetry's gen_ai.response.id.
    response_id: str = ""
    # The server that answered when a base URL was configured (xclaw.llm.wire.public_endpoint:
    # no credentials); "" for the provider's own API. Prices depend on it (llm/prices.py).
    endpoint: str = ""


@runtime_checkable
class Model(Protocol):
    """An LLM provider. `complete` passes what happens during the call through `on_event`
    (streamed text, thinking blocks, notices: xclaw/llm/events.py) and returns the whole
    response; it raises xclaw.errors.LLMError (retryable or not) on failure."""

    name: str  # e.g. "anthropic:claude-sonnet-4-5", "script:demo.json"

    async def complete(
        self, request: LLMRequest, on_event: EventSink | None = None
    ) -> LLMResponse: ...


@runtime_checkable
class WindowReporting(Protocol):
    """A model that can say its context window (an OpenAI-compatible server reporting its
    own, xclaw.llm.server_info; the retry and fallback wrappers pass it on)."""

    async def context_window(self) -> int | None:
        """The window in tokens; None when the server reports none."""
        ...


@runtime_checkable
class Served(Protocol):
    """A model answered by a server a base URL names: `endpoint` is that URL as it may be
    recorded and shown (xclaw.llm.wire.public_endpoint); "" for the provider's own API."""

    endpoint: str


class ProviderError(LLMError):
    """An LLMError raised inside a provider, carrying what the retry policy needs: the HTTP
    status (if any) and the server's Retry-After hint in seconds (if any)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        provider: str = "",
        status: int | None = None,
        retry_after: float | None = None,
        request_id: str = "",
        starting: bool = False,
    ) -> None:
        super().__init__(message, retryable=retryable, provider=provider, request_id=request_id)
        self.status = status
        self.retry_after = retry_after
        # The server is not up yet: nothing listens on its port (a llama-cpp-python or vLLM
        # server loading its model) or it says it is loading (llama-server's 503). Waited
        # for up to `llm_startup_wait_s`, apart from the retries (RetryingModel).
        self.starting = starting


def retryable_status(status: int) -> bool:
    """429 and 5xx are transient; so are 408 (request timeout) and 409 (lock contention),
    which both SDKs' own retry policies also retry."""
    return status in (408, 409, 429) or status >= 500


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date), else None."""
    if headers is None:
        return None
    get = headers.get
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
