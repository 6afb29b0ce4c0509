"""[llm] Retries with backoff, and a fallback chain of providers: the two ways a call survives a
flaky network or a provider outage. Both wrap any Model and are Models themselves.

Streamed text cannot be taken back. So a retry (or a fallback) happens only while no text of
the failed attempt has gone to the caller's event sink; once text went out, the failure is
final for this call (PartialReplyError) and the session can be resumed, which re-issues the
call. Thinking shown by a failed attempt is taken back (a `ThinkingDiscarded` event: clients
drop it) before the next attempt thinks again, so it is never shown twice.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from xclaw.errors import LLMError
from xclaw.llm.base import (
    LLMRequest,
    LLMResponse,
    Model,
    ProviderError,
    Served,
    WindowReporting,
    structured,
)
from xclaw.llm.events import (
    CallNotice,
    EventSink,
    ModelEvent,
    TextDelta,
    Thinking,
    ThinkingDiscarded,
    emit,
)
from xclaw.llm.legacy import event_model

log = logging.getLogger("xclaw.llm")

Sleep = Callable[[float], Awaitable[None]]


class _Watch:
    """Passes a call's events on to the caller's sink, counting what went out: the text of
    the current attempt (never taken back) and the thinking shown since the call began or
    was last taken back. Watches nest (a fallback chain of retrying models): a discard from
    inside passes through the outer watch, which then has nothing left to take back, so each
    block is taken back once."""

    def __init__(self, outer: EventSink | None) -> None:
        self.outer = outer
        self.text = 0
        self.thinking = 0

    async def __call__(self, event: ModelEvent) -> None:
        if isinstance(event, TextDelta):
            self.text += 1
        elif isinstance(event, Thinking):
            self.thinking += 1
        elif isinstance(event, ThinkingDiscarded):
            self.thinking = 0
        await emit(self.outer, event)

    def attempt(self) -> _Watch:
        """A new attempt begins: none of its text went out yet."""
        self.text = 0
        return self

    async def discard(self) -> None:
        """The attempt failed and another follows: take back what it showed, if anything."""
        if self.thinking:
            self.thinking = 0
            await emit(self.outer, ThinkingDiscarded())


class PartialReplyError(LLMError):
    """The reply broke off after some of its text was streamed: retrying or falling back
    would show the user a second, different beginning, so this failure is final."""


def _final(err: LLMError, provider: str, message: str, *, partial: bool = False) -> LLMError:
    cls = PartialReplyError if partial else LLMError
    return cls(
        message,
        retryable=err.retryable,
        provider=err.provider or provider,
        request_id=err.request_id,
    )


# How often a server that is still starting is asked again (seconds).
STARTUP_POLL_S = 1.0


class RetryingModel:
    """Retries `inner` on retryable LLMErrors (429, 5xx, timeouts, connection errors) with
    exponential backoff and jitter, honouring the server's Retry-After up to `max_retry_after`.
    `retries` is the number of extra attempts (3 -> up to 4 calls).

    A server that is still starting (ProviderError.starting: connection refused, or a 503
    saying it is loading its model) is asked again every second for up to `startup_wait`
    seconds, with one notice to the user, without spending the retries: a local model
    server takes seconds to minutes to load, and the first request of a run must not fail
    for it. 0 (the default here; xclaw.yaml's `llm_startup_wait_s` otherwise) turns it off."""

    def __init__(
        self,
        inner: Model,
        retries: int = 3,
        base_delay: float = 0.5,
        max_delay: float = 8.0,
        *,
        max_retry_after: float = 30.0,
        startup_wait: float = 0.0,
        sleep: Sleep = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = event_model(inner)
        self.name = inner.name
        # The provider's own structured output, when it has one (xclaw.llm.base.structured).
        self.structured_output = structured(inner)
        self.retries = max(0, retries)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        self.startup_wait = max(0.0, startup_wait)
        self._sleep = sleep
        self._jitter = jitter
        self._clock = clock

    def delay(self, retry: int, err: LLMError) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        hint = err.retry_after if isinstance(err, ProviderError) else None
        if hint is not None:
            return min(float(hint), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * (2.0**retry))
        return ceiling / 2 + self._jitter() * ceiling / 2  # "equal jitter": never near zero

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        attempts = self.retries + 1
        attempt = 0
        waiting_since: float | None = None  # when the server was first found still starting
        watch = _Watch(on_event)
        while True:
            try:
                return await self.inner.complete(request, watch.attempt())
            except LLMError as err:
                if watch.text:
                    raise _final(
                        err,
                        self.name,
                        f"{err.message} (the reply broke off after partial output; not retried)",
                        partial=True,
                    ) from err
                if not err.retryable:
                    raise
                if self.startup_wait and isinstance(err, ProviderError) and err.starting:
                    now = self._clock()
                    if waiting_since is None:
                        waiting_since = now
                        await emit(on_event, CallNotice(self._starting_notice(err)))
                    if now - waiting_since < self.startup_wait:
                        wait = min(STARTUP_POLL_S, waiting_since + self.startup_wait - now)
                        log.info("%s: server not up yet (%s)", self.name, err.message)
                        await self._sleep(max(0.5, wait))
                        continue
                    raise _final(
                        err,
                        self.name,
                        f"{err.message} (the model server did not come up within "
                        f"{self.startup_wait:g} s)",
                    ) from err
                attempt += 1
                if attempt >= attempts:
                    raise _final(
                        err, self.name, f"{err.message} (gave up after {attempts} attempts)"
                    ) from err
                wait = self.delay(attempt - 1, err)
                log.warning(
                    "%s failed (%s); retry %d/%d in %.2fs",
                    self.name,
                    err.message,
                    attempt,
                    self.retries,
                    wait,
                )
                await watch.discard()  # the next attempt thinks again
                await self._sleep(wait)

    async def context_window(self) -> int | None:
        """The inner model's reported window (None: not reported, or it cannot say)."""
        return await context_window_of(self.inner)

    def _starting_notice(self, err: LLMError) -> str:
        where = (self.inner.endpoint if isinstance(self.inner, Served) else "") or self.name
        why = err.message.removeprefix(f"{self.name}: ")
        return (
            f"[model] {self.name}: the model server at {where} is not answering yet ({why}); "
            f"waiting up to {self.startup_wait:g} s for it to start (llm_startup_wait_s)"
        )


async def context_window_of(model: Model) -> int | None:
    """A model's reported context window, for models that can say (OpenAI-compatible servers
    through xclaw.llm.server_info); None for the others."""
    return await model.context_window() if isinstance(model, WindowReporting) else None


class FallbackChain:
    """Tries each model in order; the first that answers wins and its name is the response's
    `model`. A model that failed after streaming partial text ends the chain (see module doc)."""

    def __init__(self, models: Sequence[Model]) -> None:
        if not models:
            raise ValueError("FallbackChain needs at least one model")
        self.models = tuple(event_model(m) for m in models)
        self.name = ",".join(m.name for m in self.models)
        # Whichever answers must give it: only when every link has structured output.
        self.structured_output = all(structured(m) for m in self.models)

    async def context_window(self) -> int | None:
        """The smallest window any link reports: the conversation must fit whichever answers."""
        known = [w for w in [await context_window_of(m) for m in self.models] if w]
        return min(known) if known else None

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        failures: list[str] = []
        last: LLMError | None = None
        watch = _Watch(on_event)
        for i, model in enumerate(self.models):
            try:
                response = await model.complete(request, watch.attempt())
            except LLMError as err:
                last = err
                failures.append(f"{model.name}: {err.message}")
                if watch.text or isinstance(err, PartialReplyError):
                    raise
                if i + 1 < len(self.models):
                    log.warning(
                        "%s failed (%s); falling back to %s",
                        model.name,
                        err.message,
                        self.models[i + 1].name,
                    )
                    await watch.discard()  # the next provider thinks again
                continue
            return response if response.model else replace(response, model=model.name)
        assert last is not None
        if len(failures) == 1:
            raise last
        raise LLMError(
            "every provider failed: " + "; ".join(failures),
            retryable=last.retryable,
            provider=last.provider,
        ) from last
