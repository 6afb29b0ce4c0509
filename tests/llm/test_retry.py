"""RetryingModel's policy and FallbackChain, in process and end to end over both fake APIs."""

from __future__ import annotations

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeOpenAIServer, Reply
from tests.llm.samples import Deltas
from tests.ports import free_port
from xclaw.errors import LLMError
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest, LLMResponse, ProviderError, retry_after_seconds
from xclaw.llm.events import (
    CallNotice,
    EventSink,
    ModelEvent,
    TextDelta,
    Thinking,
    ThinkingDiscarded,
)
from xclaw.llm.messages import ThinkingBlock, UserMessage
from xclaw.llm.openai import OpenAIModel
from xclaw.llm.retry import FallbackChain, PartialReplyError, RetryingModel

REQ = LLMRequest(system="", messages=(UserMessage("hi"),))


class Flaky:
    """A model that fails with the given errors, then answers (the LLM boundary)."""

    def __init__(
        self, name: str, errors: list[LLMError], *, stream_before_failing: bool = False
    ) -> None:
        self.name = name
        self.errors = list(errors)
        self.calls = 0
        self.stream_before_failing = stream_before_failing

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        self.calls += 1
        if self.errors:
            if self.stream_before_failing and on_event is not None:
                await on_event(TextDelta("half an ans"))
            raise self.errors.pop(0)
        if on_event is not None:
            await on_event(TextDelta("answer"))
        return LLMResponse(text="answer", model=self.name)


class Sleeps(list[float]):
    async def __call__(self, s: float) -> None:
        self.append(s)


def transient(msg: str = "HTTP 503: busy", retry_after: float | None = None) -> ProviderError:
    return ProviderError(msg, retryable=True, provider="p", status=503, retry_after=retry_after)


async def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    sleeps = Sleeps()
    inner = Flaky("p", [transient() for _ in range(5)])
    m = RetryingModel(
        inner, retries=5, base_delay=1.0, max_delay=4.0, sleep=sleeps, jitter=lambda: 1.0
    )
    await m.complete(REQ)
    assert sleeps == [1.0, 2.0, 4.0, 4.0, 4.0]
    sleeps.clear()
    inner = Flaky("p", [transient() for _ in range(3)])
    await RetryingModel(
        inner, retries=3, base_delay=1.0, max_delay=4.0, sleep=sleeps, jitter=lambda: 0.0
    ).complete(REQ)
    assert sleeps == [0.5, 1.0, 2.0]  # jitter never takes the wait below half


async def test_retry_after_is_honoured_but_capped() -> None:
    sleeps = Sleeps()
    inner = Flaky("p", [transient(retry_after=2.5), transient(retry_after=3600)])
    await RetryingModel(
        inner, retries=3, base_delay=0.1, max_retry_after=10, sleep=sleeps
    ).complete(REQ)
    assert sleeps == [2.5, 10]


async def test_non_retryable_errors_fail_at_once() -> None:
    sleeps = Sleeps()
    inner = Flaky("p", [ProviderError("HTTP 400: bad", retryable=False, provider="p")])
    with pytest.raises(LLMError, match="HTTP 400: bad"):
        await RetryingModel(inner, retries=3, sleep=sleeps).complete(REQ)
    assert inner.calls == 1 and sleeps == []


async def test_gives_up_with_the_providers_message() -> None:
    inner = Flaky("p", [transient(f"HTTP 503: busy #{i}") for i in range(10)])
    with pytest.raises(LLMError) as e:
        await RetryingModel(inner, retries=2, sleep=Sleeps()).complete(REQ)
    assert inner.calls == 3
    assert (
        e.value.message == "HTTP 503: busy #2 (gave up after 3 attempts)"
        and e.value.provider == "p"
    )


async def test_zero_retries_means_one_attempt() -> None:
    inner = Flaky("p", [transient()])
    with pytest.raises(LLMError):
        await RetryingModel(inner, retries=0, sleep=Sleeps()).complete(REQ)
    assert inner.calls == 1


async def test_no_retry_once_text_was_streamed(deltas: Deltas) -> None:
    inner = Flaky("p", [transient()], stream_before_failing=True)
    with pytest.raises(PartialReplyError, match="partial output"):
        await RetryingModel(inner, retries=3, sleep=Sleeps()).complete(REQ, deltas)
    assert inner.calls == 1 and deltas == ["half an ans"]


async def test_fallback_uses_the_next_model_and_names_it(deltas: Deltas) -> None:
    a = Flaky("a", [ProviderError("down", provider="a")])
    b = Flaky("b", [])
    chain = FallbackChain([a, b])
    r = await chain.complete(REQ, deltas)
    assert r.model == "b" and deltas == ["answer"] and chain.name == "a,b"
    assert (a.calls, b.calls) == (1, 1)


async def test_fallback_stops_after_partial_output() -> None:
    a = Flaky("a", [transient()], stream_before_failing=True)
    b = Flaky("b", [])
    with pytest.raises(LLMError):
        await FallbackChain([a, b]).complete(REQ, Deltas())
    assert b.calls == 0


async def test_all_fallbacks_failing_reports_each() -> None:
    chain = FallbackChain([Flaky("a", [LLMError("a broke")]), Flaky("b", [LLMError("b broke")])])
    with pytest.raises(LLMError) as e:
        await chain.complete(REQ)
    assert e.value.message == "every provider failed: a: a broke; b: b broke"


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


async def test_fallback_end_to_end_from_failing_openai_to_anthropic(
    openai_server: FakeOpenAIServer, anthropic_server: FakeAnthropicServer, deltas: Deltas
) -> None:
    openai_server.default = Reply.fail(503, "upstream unavailable")
    anthropic_server.push(Reply(text="from the secondary", usage=(9, 4)))
    primary = RetryingModel(
        OpenAIModel("gpt-test", api_key="k", base_url=openai_server.url),
        retries=1,
        base_delay=0.01,
        max_delay=0.01,
    )
    secondary = RetryingModel(
        AnthropicModel("claude-test", api_key="k", base_url=anthropic_server.url),
        retries=1,
        base_delay=0.01,
        max_delay=0.01,
    )
    r = await FallbackChain([primary, secondary]).complete(REQ, deltas)
    assert r.text == "from the secondary" and r.model == "anthropic:claude-test"
    assert r.usage.prompt_tokens == 9 and "".join(deltas) == "from the secondary"
    assert len(openai_server.requests) == 2 and len(anthropic_server.requests) == 1


class Thinker:
    """Shows a thought, then fails with the given errors (one per call), then answers."""

    def __init__(self, name: str, errors: list[LLMError]) -> None:
        self.name = name
        self.errors = list(errors)
        self.calls = 0

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        self.calls += 1
        assert on_event is not None
        await on_event(Thinking(ThinkingBlock("reasoning", f"{self.name} thought {self.calls}")))
        if self.errors:
            raise self.errors.pop(0)
        return LLMResponse(text="answer", model=self.name)


async def _seen(model: object) -> list[str]:
    """What a client is told about thinking while `model` answers: shown, and taken back."""
    seen: list[str] = []

    async def sink(event: ModelEvent) -> None:
        if isinstance(event, Thinking):
            seen.append(event.block.thinking)
        elif isinstance(event, ThinkingDiscarded):
            seen.append("<discarded>")

    await model.complete(REQ, sink)  # type: ignore[attr-defined]
    return seen


async def test_a_retry_takes_back_the_thinking_of_the_failed_attempt() -> None:
    m = RetryingModel(Thinker("p", [transient()]), retries=2, sleep=Sleeps())
    assert await _seen(m) == ["p thought 1", "<discarded>", "p thought 2"]


async def test_a_fallback_takes_back_each_thought_once() -> None:
    """A retrying provider that gives up, then the next provider: every failed attempt's
    thought is taken back exactly once, and only the answering one's stays."""
    first = RetryingModel(Thinker("a", [transient(), transient()]), retries=1, sleep=Sleeps())
    second = RetryingModel(Thinker("b", []), retries=1, sleep=Sleeps())
    seen = await _seen(FallbackChain([first, second]))
    assert seen == ["a thought 1", "<discarded>", "a thought 2", "<discarded>", "b thought 1"]


# --- a model server that is still starting --------------------------------------------------


class Clock:
    """Time that passes only when the model sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def starting(msg: str = "connection failed: [Errno 111] Connection refused") -> ProviderError:
    return ProviderError(msg, retryable=True, provider="p", starting=True)


async def collect_notices(model, request=REQ):
    notices: list[str] = []

    async def sink(event: ModelEvent) -> None:
        if isinstance(event, CallNotice):
            notices.append(event.text)

    return await model.complete(request, sink), notices


async def test_a_server_still_starting_is_waited_for_with_one_notice() -> None:
    """Connection refused (a llama-cpp-python or vLLM server loading its model) or a 503
    "Loading model" (llama-server): waited for up to `startup_wait`, polled every second or
    two, with one notice — not counted against the retries, and the call then succeeds."""
    clock = Clock()
    inner = Flaky("openai:gemma", [starting() for _ in range(12)])
    inner.endpoint = "http://127.0.0.1:8080/v1"  # type: ignore[attr-defined]
    m = RetryingModel(inner, retries=0, sleep=clock.sleep, clock=clock, startup_wait=60)
    response, notices = await collect_notices(m)
    assert response.text == "answer" and inner.calls == 13
    assert len(notices) == 1
    assert "http://127.0.0.1:8080/v1" in notices[0] and "60 s" in notices[0]
    assert "Connection refused" in notices[0]
    assert all(0.5 <= s <= 2.0 for s in clock.sleeps) and clock.now < 60


async def test_waiting_for_a_starting_server_is_bounded() -> None:
    clock = Clock()
    inner = Flaky("openai:gemma", [starting() for _ in range(1000)])
    m = RetryingModel(inner, retries=3, sleep=clock.sleep, clock=clock, startup_wait=30)
    with pytest.raises(LLMError) as e:
        await m.complete(REQ)
    assert "did not come up within 30 s" in e.value.message
    assert "Connection refused" in e.value.message
    assert 30 <= clock.now <= 33
    # Without a startup wait (the default of RetryingModel itself), it is an ordinary retry.
    inner = Flaky("openai:gemma", [starting() for _ in range(10)])
    with pytest.raises(LLMError, match="gave up after 2 attempts"):
        await RetryingModel(inner, retries=1, sleep=Sleeps()).complete(REQ)


async def test_a_real_server_that_starts_late_and_says_loading_is_waited_for() -> None:
    """Through the real SDK: nothing listens on the port for a while (connection refused),
    then the server answers 503 "Loading model" twice (as llama-server does), then it works;
    no retry is spent on any of it."""
    import asyncio

    port = free_port()
    m = RetryingModel(
        OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=5),
        retries=0,
        startup_wait=30,
    )
    srv = FakeOpenAIServer(port=port)
    srv.push(
        Reply.fail(503, "Loading model"),
        Reply.fail(503, "Loading model"),
        Reply(text="up now"),
    )

    async def start_late() -> None:
        await asyncio.sleep(1.5)
        srv.__enter__()

    late = asyncio.create_task(start_late())
    try:
        response, notices = await collect_notices(m)
    finally:
        await late
        srv.__exit__(None, None, None)
    assert response.text == "up now" and len(srv.requests) == 3
    assert len(notices) == 1 and f"127.0.0.1:{port}" in notices[0]
