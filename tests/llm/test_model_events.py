"""The model seam's one event sink (xclaw/llm/events.py), and models of the earlier seam
(`complete(request, on_delta)` streaming plain strings) adapted to it (xclaw/llm/legacy.py):
through the retry and fallback wrappers and the real agent loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.llm.samples import Deltas
from xclaw.errors import LLMError
from xclaw.llm.base import DeltaSink, LLMRequest, LLMResponse, WindowReporting, structured
from xclaw.llm.events import EventSink, TextDelta, Thinking
from xclaw.llm.legacy import LegacyModel, event_model
from xclaw.llm.messages import UserMessage
from xclaw.llm.retry import FallbackChain, PartialReplyError, RetryingModel
from xclaw.llm.scripted import ScriptedModel

REQ = LLMRequest(system="", messages=(UserMessage("hi"),))


class OldEcho:
    """A provider package's model as docs/llm-providers.md showed it before the event sink."""

    endpoint = "http://127.0.0.1:9/v1"
    voice = "loud"

    def __init__(self, fail_after_text: bool = False) -> None:
        self.name = "echo:old"
        self.fail_after_text = fail_after_text
        self.calls = 0

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        self.calls += 1
        if on_delta is not None:
            await on_delta("echo: ")
            if self.fail_after_text:
                raise LLMError("cut", retryable=True, provider=self.name)
            await on_delta("hi")
        return LLMResponse("echo: hi", model=self.name)

    async def context_window(self) -> int | None:
        return 4096


class OldWrapper:
    """A wrapper of the earlier seam around a model of this one (it passes its sink on)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name

    async def complete(self, request: LLMRequest, on_delta: DeltaSink | None = None) -> LLMResponse:
        return await self.inner.complete(request, on_delta)  # type: ignore[no-any-return]


class NewEcho:
    name = "echo:new"

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        if on_event is not None:
            await on_event(TextDelta("new"))
        return LLMResponse("new", model=self.name)


async def test_an_old_models_strings_arrive_as_text_events() -> None:
    sink = Deltas()
    r = await event_model(OldEcho()).complete(REQ, sink)
    assert r.text == "echo: hi"
    assert sink.events == [TextDelta("echo: "), TextDelta("hi")]
    assert await event_model(OldEcho()).complete(REQ) == r  # no sink: none given to it


async def test_a_model_of_this_seam_is_not_wrapped(tmp_path: Path) -> None:
    new = NewEcho()
    assert event_model(new) is new
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"text": "x"}]}))
    scripted = ScriptedModel(script)
    assert event_model(scripted) is scripted
    assert event_model(RetryingModel(scripted)).inner is scripted  # type: ignore[attr-defined]


async def test_the_adapted_model_keeps_what_the_old_one_has() -> None:
    old = OldEcho()
    adapted = event_model(old)
    assert isinstance(adapted, LegacyModel)
    assert adapted.name == "echo:old" and adapted.endpoint == old.endpoint
    assert isinstance(adapted, WindowReporting) and await adapted.context_window() == 4096
    assert not structured(adapted)
    assert adapted.voice == "loud"  # type: ignore[attr-defined]  (reached through it)
    assert event_model(adapted) is adapted


async def test_retries_and_fallbacks_take_old_models_and_count_their_text() -> None:
    """The wrappers adapt their links: an old model's streamed text counts as text that
    went out, so its failure after text is final (never retried, never passed on)."""
    sink = Deltas()
    chain = FallbackChain([RetryingModel(OldEcho(), retries=0), NewEcho()])
    assert (await chain.complete(REQ, sink)).text == "echo: hi"
    assert sink == ["echo: ", "hi"]
    cut = OldEcho(fail_after_text=True)

    async def no_sleep(_: float) -> None:
        return None

    with pytest.raises(PartialReplyError):
        await FallbackChain([RetryingModel(cut, retries=3, sleep=no_sleep), NewEcho()]).complete(
            REQ, Deltas()
        )
    assert cut.calls == 1


async def test_an_old_wrapper_passes_the_inner_models_events_through(tmp_path: Path) -> None:
    """A wrapper written for the earlier seam around the scripted model: the thinking and the
    text the scripted model sends reach the caller as the events they are."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [{"thinking": "hmm", "text": "one two"}]}))
    sink = Deltas()
    r = await event_model(OldWrapper(ScriptedModel(script))).complete(REQ, sink)
    assert r.text == "one two" and "".join(sink) == "one two"
    assert isinstance(sink.events[0], Thinking) and sink.events[0].block.thinking == "hmm"


async def test_an_old_model_object_streams_through_the_python_api(tmp_path: Path) -> None:
    """`xclaw.open(model=...)` with a model of the earlier seam: the run's `delta` events
    carry its strings, and its reply is recorded."""
    import xclaw

    async with xclaw.open(db=tmp_path / "m.db", home=tmp_path / "home", model=OldEcho()) as agent:
        session = await agent.new_session()
        events = [e async for e in session.send("hi")]
        deltas = [e.content for e in events if e.type == "delta"]  # type: ignore[union-attr]
        assert "".join(deltas) == "echo: hi"
        assert [e for e in events if e.type == "reply"][-1].content == "echo: hi"  # type: ignore[union-attr]
