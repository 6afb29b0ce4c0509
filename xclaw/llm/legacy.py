"""[llm] Models written for the earlier seam, `complete(request, on_delta)`, still work.

Before the typed event sink (xclaw/llm/events.py) a model streamed its text as plain strings
through `on_delta` (docs/llm-providers.md kept that form for provider packages). `event_model`
wraps such a model so that its strings reach the caller as `TextDelta` events; a model whose
`complete` takes `on_event` is returned as it is. Every place a model enters xclaw goes
through it: a provider's `build`, the retry and fallback wrappers' links, the agent loop.
"""

from __future__ import annotations

import inspect
from typing import Any

from xclaw.llm.base import LLMRequest, LLMResponse, Model, WindowReporting, structured
from xclaw.llm.events import EventSink, ModelEvent, TextDelta, emit


def takes_events(model: Any) -> bool:
    """Whether `model.complete` is of this seam: its sink parameter is named `on_event`."""
    try:
        params = inspect.signature(model.complete).parameters
    except (TypeError, ValueError):  # a callable inspect cannot read: assume the current seam
        return True
    return "on_event" in params


def event_model(model: Any) -> Model:
    """`model` as a Model of the event seam (itself when it is one already)."""
    if isinstance(model, LegacyModel) or takes_events(model):
        return model  # type: ignore[no-any-return]
    return LegacyModel(model)


class LegacyModel:
    """A model of the earlier seam: its streamed strings become `TextDelta` events. (A wrapper
    of that seam around a model of this one passes the events it is given through as they
    are.) Everything else it has is reached through it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.structured_output = structured(inner)
        self.endpoint: str = getattr(inner, "endpoint", "") or ""

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        if on_event is None:
            response: LLMResponse = await self.inner.complete(request, None)
            return response

        async def on_delta(piece: str | ModelEvent) -> None:
            await emit(on_event, TextDelta(piece) if isinstance(piece, str) else piece)

        response = await self.inner.complete(request, on_delta)
        return response

    async def context_window(self) -> int | None:
        inner = self.inner
        return await inner.context_window() if isinstance(inner, WindowReporting) else None

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): never look for it in itself
            raise AttributeError(name)
        return getattr(self.inner, name)
