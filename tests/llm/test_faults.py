"""Faults of a streamed reply, over real HTTP through the real SDKs, for both providers: a
reply is complete only with its end marker; in-stream errors are classified alike; the
server's Retry-After is honoured within its bound; the provider's request id is kept."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeCall, FakeOpenAIServer, Reply
from xclaw.errors import LLMError
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest, Model, ProviderError
from xclaw.llm.faults import in_stream_error, request_id_of
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import OpenAIModel
from xclaw.llm.retry import PartialReplyError, RetryingModel

REQ = LLMRequest(system="s", messages=(UserMessage("go"),))
TOOL = FakeCall.of("shell", {"command": "touch PWNED"})


@pytest.fixture(params=["openai", "anthropic"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Model]]:
    """A fake server of one provider and a bare model pointed at it."""
    if request.param == "openai":
        with FakeOpenAIServer() as srv:
            yield srv, OpenAIModel("m", api_key="k", base_url=srv.url)
    else:
        with FakeAnthropicServer() as srv:
            yield srv, AnthropicModel("m", api_key="k", base_url=srv.url)


class Sleeps(list[float]):
    async def __call__(self, s: float) -> None:
        self.append(s)


def retrying(model: Model, sleeps: Sleeps | None = None, **kw: Any) -> RetryingModel:
    return RetryingModel(
        model, retries=kw.pop("retries", 2), sleep=sleeps if sleeps is not None else Sleeps(), **kw
    )


# --- a reply cut off is never complete -----------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply.cut(2, tool_calls=[TOOL]), id="one-event-then-close"),
        pytest.param(Reply(cut_before_end=True, tool_calls=[TOOL]), id="all-but-the-end-marker"),
        pytest.param(Reply(raw_body=b""), id="zero-byte-200"),
        pytest.param(Reply(raw_body=b'data: {"id": "x", "choi'), id="half-an-event"),
        pytest.param(Reply(raw_body=b'data: {"id": "x", "choi\n\n'), id="half-json-event"),
        pytest.param(
            Reply(raw_body=b'{"id": "x", "choices": [', raw_content_type="application/json"),
            id="half-json-body",
        ),
    ],
)
async def test_a_reply_without_its_end_marker_is_a_retryable_provider_error(
    served: tuple[Any, Model], reply: Reply
) -> None:
    srv, model = served
    srv.push(reply)
    with pytest.raises(ProviderError) as e:
        await model.complete(REQ)
    assert e.value.retryable
    assert "cut off" in e.value.message
    assert e.value.request_id == "req_fake_1" and "req_fake_1" in e.value.message


async def test_the_tool_call_of_a_cut_reply_is_never_returned_and_the_call_is_made_again(
    served: tuple[Any, Model],
) -> None:
    srv, model = served
    srv.push(Reply(cut_before_end=True, tool_calls=[TOOL]), Reply(text="whole"))
    sleeps = Sleeps()
    r = await retrying(model, sleeps).complete(REQ)
    assert r.text == "whole" and r.tool_calls == ()  # the cut reply's call never came out
    assert len(srv.requests) == 2 and len(sleeps) == 1


async def test_a_cut_after_text_went_out_is_a_partial_reply_and_not_retried(
    served: tuple[Any, Model],
) -> None:
    srv, model = served
    srv.push(Reply.cut(5, text="one two three four five six seven"), Reply(text="again"))
    seen: list[str] = []

    async def sink(t: str) -> None:
        seen.append(t)

    with pytest.raises(PartialReplyError, match="cut off") as e:
        await retrying(model).complete(REQ, sink)
    assert seen and len(srv.requests) == 1
    assert e.value.request_id == "req_fake_1"


async def test_a_whole_reply_still_passes_and_carries_its_request_id(
    served: tuple[Any, Model],
) -> None:
    srv, model = served
    srv.push(Reply(text="fine", tool_calls=[TOOL]))
    r = await model.complete(REQ)
    assert r.text == "fine" and [c.name for c in r.tool_calls] == ["shell"]
    assert r.request_id == "req_fake_1"


async def test_openai_done_marker_without_finish_reason_is_complete() -> None:
    # Some compatible servers end with `data: [DONE]` and never send a finish_reason.
    body = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        b"data: [DONE]\n\n"
    )
    with FakeOpenAIServer() as srv:
        srv.push(Reply(raw_body=body), Reply(raw_body=body.rsplit(b"data: [DONE]", 1)[0]))
        model = OpenAIModel("m", api_key="k", base_url=srv.url)
        assert (await model.complete(REQ)).text == "hi"
        with pytest.raises(ProviderError, match="cut off"):
            await model.complete(REQ)


# --- in-stream errors, the same for both providers --------------------------------------


@pytest.mark.parametrize("kind", ["server_error", "overloaded_error", "api_error"])
async def test_a_transient_error_inside_the_stream_is_retried(
    served: tuple[Any, Model], kind: str
) -> None:
    srv, model = served
    srv.push(Reply(stream_error=(kind, "try later")), Reply(text="recovered"))
    sleeps = Sleeps()
    r = await retrying(model, sleeps).complete(REQ)
    assert r.text == "recovered" and len(srv.requests) == 2 and len(sleeps) == 1


async def test_a_final_error_inside_the_stream_fails_at_once(served: tuple[Any, Model]) -> None:
    srv, model = served
    srv.push(Reply(stream_error=("invalid_request_error", "prompt is too long")))
    with pytest.raises(LLMError, match="prompt is too long") as e:
        await retrying(model).complete(REQ)
    assert not e.value.retryable and len(srv.requests) == 1
    assert "req_fake_1" in e.value.message


@pytest.mark.parametrize(
    ("body", "retryable"),
    [
        ({"error": {"type": "server_error", "message": "x"}}, True),  # OpenAI
        ({"type": "error", "error": {"type": "overloaded_error", "message": "x"}}, True),
        ({"error": {"type": "rate_limit_exceeded", "message": "x"}}, True),
        ({"error": {"object": "error", "type": "InternalServerError", "code": 500}}, True),  # vLLM
        ({"error": {"message": "busy", "code": 503}}, True),
        ({"error": {"message": "busy", "code": "429"}}, True),
        ({"error": {"type": "invalid_request_error", "message": "x"}}, False),
        ({"error": {"type": "BadRequestError", "code": 400}}, False),
        ({"error": "a bare string"}, False),
    ],
)
def test_in_stream_error_classification(body: dict[str, Any], retryable: bool) -> None:
    assert in_stream_error("p", body).retryable is retryable


# --- Retry-After, honoured and bounded; request ids ---------------------------------------


async def test_retry_after_headers_are_honoured_and_bounded(served: tuple[Any, Model]) -> None:
    srv, model = served
    srv.push(
        Reply.fail(429, "slow down", retry_after=2),
        Reply.fail(529, "overloaded", retry_after_ms=1500),
        Reply.fail(503, "down for a while", retry_after=3600),
        Reply(text="ok"),
    )
    sleeps = Sleeps()
    r = await retrying(model, sleeps, retries=3, base_delay=0.01, max_retry_after=5).complete(REQ)
    assert r.text == "ok"
    assert sleeps == [2.0, 1.5, 5.0]  # retry-after-ms read exactly; an hour capped at 5 s


async def test_retry_after_is_really_waited(served: tuple[Any, Model]) -> None:
    srv, model = served
    srv.push(Reply.fail(429, "slow down", retry_after_ms=400), Reply(text="ok"))
    start = time.monotonic()
    r = await RetryingModel(model, retries=1, base_delay=0.001).complete(REQ)
    assert r.text == "ok" and time.monotonic() - start >= 0.4


async def test_the_request_id_of_a_failed_call_is_in_its_error(served: tuple[Any, Model]) -> None:
    srv, model = served
    srv.push(Reply.fail(500, "boom"), Reply.fail(500, "boom"))
    with pytest.raises(LLMError) as e:
        await retrying(model, retries=1).complete(REQ)
    assert e.value.request_id == "req_fake_2" and "[request id req_fake_2]" in e.value.message
    assert "gave up after 2 attempts" in e.value.message


def test_request_id_headers() -> None:
    assert request_id_of({"request-id": "req_1"}) == "req_1"  # Anthropic
    assert request_id_of({"x-request-id": " abc "}) == "abc"  # OpenAI
    assert request_id_of({}) == "" and request_id_of(None) == ""
