"""The LLM provider seam: one Protocol that Anthropic, OpenAI-compatible servers and the
scripted model all implement."""

from __future__ import annotations

import contextvars
import email.utils
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from xclaw.errors import LLMError
from xclaw.messages import Message, ThinkingBlock, ToolCall, ToolSpec, Usage

# The model's output limit per call (`max_tokens` in xclaw.yaml: xclaw/llm/settings.py).
DEFAULT_MAX_TOKENS = 4096

# Called with each piece of assistant text as it streams in.
DeltaSink = Callable[[str], Awaitable[None]]
# Called with each reasoning block as soon as it is complete, before the answer streams.
ThinkingSink = Callable[[ThinkingBlock], Awaitable[None]]

# Set by the agent loop around a call (a context variable, so the retry and fallback wrappers
# between the loop and the provider need not pass it along). Providers report each finished
# thinking block through `show_thinking`; the whole set also comes back in
# LLMResponse.thinking, which is what is recorded.
thinking_sink: contextvars.ContextVar[ThinkingSink | None] = contextvars.ContextVar(
    "xclaw_thinking_sink", default=None
)


async def show_thinking(block: ThinkingBlock) -> None:
    sink = thinking_sink.get()
    if sink is not None:
        await sink(block)


# Called with a line for the user about the call in flight (e.g. waiting for a model server
# that is still starting), set by the agent loop like `thinking_sink`.
NoticeSink = Callable[[str], Awaitable[None]]
notice_sink: contextvars.ContextVar[NoticeSink | None] = contextvars.ContextVar(
    "xclaw_notice_sink", default=None
)


async def show_notice(text: str) -> None:
    sink = notice_sink.get()
    if sink is not None:
        await sink(text)


# Set beside thinking_sink: told when the thinking shown so far belongs to an attempt that
# failed and is made again (a retry, a fallback). What was shown is void; the new attempt's
# thinking follows. (Streamed text is never retried: see xclaw/llm/retry.py.)
thinking_discard: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = (
    contextvars.ContextVar("xclaw_thinking_discard", default=None)
)


class ThinkingWatch:
    """Counts the thinking blocks shown during the attempts of a call (`with`, in the task
    that makes them), so a retry or a fallback knows whether anything must be taken back.
    Watches nest (a fallback chain of retrying models): a discard inside voids the counts
    outside too, so each block is taken back once."""

    def __init__(self) -> None:
        self.shown = 0
        self._outer_show: ThinkingSink | None = None
        self._outer_discard: Callable[[], Awaitable[None]] | None = None
        self._tokens: tuple[contextvars.Token[Any], contextvars.Token[Any]] | None = None

    async def _show(self, block: ThinkingBlock) -> None:
        self.shown += 1
        if self._outer_show is not None:
            await self._outer_show(block)

    async def _discarded(self) -> None:
        self.shown = 0
        if self._outer_discard is not None:
            await self._outer_discard()

    def __enter__(self) -> ThinkingWatch:
        self._outer_show, self._outer_discard = thinking_sink.get(), thinking_discard.get()
        self._tokens = (thinking_sink.set(self._show), thinking_discard.set(self._discarded))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._tokens is not None
        thinking_sink.reset(self._tokens[0])
        thinking_discard.reset(self._tokens[1])

    async def discard(self) -> None:
        """The attempt failed and another follows: take back what it showed, if anything."""
        if self.shown:
            await self._discarded()


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
    # "main" for the session's main agent, otherwise the sub-agent's id. The scripted model
    # uses it to pick its script; real providers ignore it.
    agent: str = "main"
    # The whole conversation before it was trimmed to fit the window (None: `messages` is
    # all of it). The scripted model counts its turns here, so that a long session whose
    # oldest turns were trimmed does not replay its script; real providers ignore it.
    history: tuple[Message, ...] | None = None
    # The first call of a turn: it answers the user's message (or a sub-agent's task), not a
    # tool result or a summary request. A provider's `first_tool_choice` forces a tool call
    # on this call only (forcing every call, the model could never give its final answer).
    turn_start: bool = False
    # The last message is the runtime's resume note (the run was interrupted: continue, do
    # not repeat), not what a person said. The scripted model's branches skip it; real
    # providers send it as it is.
    resumed: bool = False
    # The declared agent that asks (docs/agents.md); the scripted model picks a named
    # sub-agent's script by it. "default": xclaw's own.
    agent_name: str = "default"
    # Set only for a model with structured output of its own: the answer must be a JSON
    # object of this schema.
    output: OutputFormat | None = None
    # The loop's estimate of the prompt's tokens (the messages and instructions): with
    # `max_tokens`, the request's maximum cost, which a budget reserves (docs/budgets.md).
    prompt_estimate: int = 0


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
    """An LLM provider. `complete` streams text through `on_delta` and returns the whole
    response; it raises xclaw.errors.LLMError (retryable or not) on failure."""

    name: str  # e.g. "anthropic:claude-sonnet-4-5", "script:demo.json"

    async def complete(
        self, request: LLMRequest, on_delta: DeltaSink | None = None
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
