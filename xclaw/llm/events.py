"""[llm] What a model call tells its caller while it runs: one typed event sink.

`Model.complete(request, on_event)` passes every event of the call in flight through the one
sink it is given: the answer's text as it streams, each reasoning block once complete, "the
thinking shown so far is void" (a retry or a fallback is about to think again), and lines
for the user about the call (a model server still starting). The retry and fallback wrappers
pass the sink along (watching what went out: xclaw/llm/retry.py); nothing is found through
the task's context.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from xclaw.llm.messages import ThinkingBlock


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as it streams in. Never taken back: once one went out,
    a failure of the call is final (PartialReplyError)."""

    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    """A reasoning block, as soon as it is complete (before the answer's text). The whole set
    also comes back in LLMResponse.thinking, which is what is recorded."""

    block: ThinkingBlock


@dataclass(frozen=True, slots=True)
class ThinkingDiscarded:
    """The thinking shown so far came from an attempt that failed and is made again (a
    retry, a fallback): void; the new attempt's follows."""


@dataclass(frozen=True, slots=True)
class CallNotice:
    """A line for the user about the call in flight (a model server still starting)."""

    text: str


ModelEvent = TextDelta | Thinking | ThinkingDiscarded | CallNotice

# Called with each event of a call, in order, awaited by the provider.
EventSink = Callable[[ModelEvent], Awaitable[None]]


async def emit(sink: EventSink | None, event: ModelEvent) -> None:
    """Pass `event` to `sink`, if the caller gave one."""
    if sink is not None:
        await sink(event)
