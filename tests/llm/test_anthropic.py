"""AnthropicModel end to end: the real `anthropic` SDK against a fake Messages server."""

from __future__ import annotations

import time

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeCall, Reply, validate_anthropic_request
from tests.llm.samples import READ, SHELL, Deltas, tool_history
from xclaw.errors import Cancelled, LLMError
from xclaw.llm.anthropic import AnthropicModel, anthropic_messages
from xclaw.llm.base import LLMRequest
from xclaw.llm.events import ModelEvent
from xclaw.llm.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from xclaw.llm.retry import PartialReplyError, RetryingModel


def model(srv: FakeAnthropicServer, timeout_s: float = 5.0) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", api_key="sk-ant-test", base_url=srv.url, timeout_s=timeout_s
    )


def fast_retries(inner: AnthropicModel, retries: int = 2) -> RetryingModel:
    return RetryingModel(inner, retries=retries, base_delay=0.01, max_delay=0.02)


REQ = LLMRequest(
    system="You are terse.", messages=(UserMessage("hi"),), tools=(SHELL, READ), max_tokens=300
)


async def test_streams_text_and_records_provider_usage(
    anthropic_server: FakeAnthropicServer, deltas: Deltas
) -> None:
    anthropic_server.push(Reply(text="Hello there, friend.", usage=(200, 31), cache_read_tokens=50))
    r = await model(anthropic_server).complete(REQ, deltas)
    assert r.text == "Hello there, friend." and deltas == ["Hello ", "there, ", "friend."]
    # Cached input was sent too: it counts as prompt tokens.
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (250, 31)
    assert r.usage.cache_read_tokens == 50 and r.usage.cache_write_tokens == 0
    assert r.model == "anthropic:claude-test" and r.stop_reason == "end_turn"
    body = anthropic_server.requests[0]
    assert (
        # The system prompt carries a prompt-cache breakpoint (so it is a list of blocks).
        body["system"]
        == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
        and body["stream"] is True
        and body["max_tokens"] == 300
    )
    # Breakpoints on the tool list's end and the conversation's moving end too.
    assert body["tools"][0] == {
        "name": "shell",
        "description": SHELL.description,
        "input_schema": SHELL.input_schema,
    }
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"} and len(body["tools"]) > 1
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert "temperature" not in body
    assert anthropic_server.headers[0]["anthropic-version"]


async def test_temperature_is_passed_through(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.push(Reply(text="ok"))
    req = LLMRequest(system="", messages=(UserMessage("hi"),), temperature=0.2)
    await model(anthropic_server).complete(req)
    assert (
        anthropic_server.requests[0]["temperature"] == 0.2
        and "system" not in anthropic_server.requests[0]
    )


async def test_tool_use_with_streamed_input_fragments(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.push(
        Reply(
            text="Looking.",
            tool_calls=[
                FakeCall("shell", id="toolu_1", fragments=['{"command"', ': "echo', ' hi"}']),
                FakeCall.of("read_file", {"path": "a.txt"}, id="toolu_2"),
            ],
        )
    )
    r = await model(anthropic_server).complete(REQ)
    assert [(c.id, c.name, c.input) for c in r.tool_calls] == [
        ("toolu_1", "shell", {"command": "echo hi"}),
        ("toolu_2", "read_file", {"path": "a.txt"}),
    ]
    assert r.stop_reason == "tool_use" and r.text == "Looking."


async def test_malformed_tool_input_does_not_crash(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.push(
        Reply(tool_calls=[FakeCall("shell", arguments='{"command": ', id="toolu_x")])
    )
    r = await model(anthropic_server).complete(REQ)
    assert r.tool_calls[0].input == {
        "_raw_arguments": '{"command": ',
        "_error": "arguments were not valid JSON",
    }


async def test_history_with_tool_calls_is_accepted(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.push(Reply(text="ok"))
    r = await model(anthropic_server).complete(
        LLMRequest(system="s", messages=tool_history(), tools=(SHELL, READ))
    )
    assert r.text == "ok" and anthropic_server.rejections == []
    msgs = anthropic_server.requests[0]["messages"]
    assert [m["role"] for m in msgs] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # Two consecutive results become one user message; the error flag survives.
    assert msgs[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_0_0", "content": "README.md\nsrc\n"},
        {
            "type": "tool_result",
            "tool_use_id": "call_0_1",
            "content": "no such file",
            "is_error": True,
        },
    ]
    # An interrupted call's synthetic result and the resume notice share one user message,
    # tool_result first; the id Anthropic would refuse is mapped the same on both sides.
    assert [b["type"] for b in msgs[4]["content"]] == ["tool_result", "text"]
    assert (
        msgs[3]["content"][0]["id"] == msgs[4]["content"][0]["tool_use_id"] != "functions.shell:7"
    )
    # Empty tool output still sends non-empty content.
    assert msgs[8]["content"][0]["content"] == "(empty)"


def test_translation_drops_empty_assistant_and_merges_users() -> None:
    msgs = anthropic_messages([UserMessage("a"), AssistantMessage(text=" "), UserMessage("  ")])
    assert msgs == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "(empty)"}],
        }
    ]
    validate_anthropic_request({"model": "m", "max_tokens": 5, "messages": msgs})


async def test_broken_history_is_rejected_like_the_real_api(
    anthropic_server: FakeAnthropicServer,
) -> None:
    dangling = (
        UserMessage("go"),
        AssistantMessage(tool_calls=(ToolCall("t1", "shell", {}), ToolCall("t2", "shell", {}))),
        ToolResultMessage("t1", "shell", "ok"),
        UserMessage("next"),
    )
    with pytest.raises(LLMError) as e:
        await fast_retries(model(anthropic_server)).complete(
            LLMRequest(system="", messages=dangling)
        )
    assert (
        "`tool_use` ids were found without `tool_result` blocks immediately after: t2"
        in e.value.message
    )
    assert len(anthropic_server.requests) == 1 and not e.value.retryable


async def test_429_then_success_is_retried(
    anthropic_server: FakeAnthropicServer, deltas: Deltas
) -> None:
    anthropic_server.push(
        Reply.fail(429, "Number of requests has exceeded your rate limit"), Reply(text="ok now")
    )
    r = await fast_retries(model(anthropic_server)).complete(REQ, deltas)
    assert r.text == "ok now" and deltas == ["ok ", "now"] and len(anthropic_server.requests) == 2


async def test_overloaded_forever_fails_with_provider_message(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.default = Reply.fail(529, "Overloaded")
    with pytest.raises(LLMError) as e:
        await fast_retries(model(anthropic_server), retries=2).complete(REQ)
    assert len(anthropic_server.requests) == 3
    assert (
        "HTTP 529: Overloaded" in e.value.message and "gave up after 3 attempts" in e.value.message
    )


async def test_500_forever_fails(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.default = Reply.fail(500, "Internal server error")
    with pytest.raises(LLMError) as e:
        await fast_retries(model(anthropic_server), retries=1).complete(REQ)
    assert len(anthropic_server.requests) == 2 and "Internal server error" in e.value.message


async def test_error_event_inside_the_stream_is_retried(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.push(
        Reply(stream_error=("overloaded_error", "Overloaded")), Reply(text="recovered")
    )
    r = await fast_retries(model(anthropic_server)).complete(REQ)
    assert r.text == "recovered" and len(anthropic_server.requests) == 2


async def test_non_transient_error_event_is_final(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.default = Reply(stream_error=("invalid_request_error", "prompt is too long"))
    with pytest.raises(LLMError) as e:
        await fast_retries(model(anthropic_server)).complete(REQ)
    assert "prompt is too long" in e.value.message and len(anthropic_server.requests) == 1


async def test_timeout_is_retried_then_fails(anthropic_server: FakeAnthropicServer) -> None:
    anthropic_server.default = Reply(text="late", delay=10.0)
    t0 = time.monotonic()
    with pytest.raises(LLMError) as e:
        await fast_retries(model(anthropic_server, timeout_s=0.2), retries=1).complete(REQ)
    assert "timed out" in e.value.message and e.value.retryable
    assert (
        len(anthropic_server.requests) == 2 and time.monotonic() - t0 < 8
    )  # two 0.2 s timeouts, not a 10 s reply


async def test_stall_mid_stream_after_text_is_final(
    anthropic_server: FakeAnthropicServer, deltas: Deltas
) -> None:
    anthropic_server.default = Reply(text="some words then silence", stall_after_first_chunk=2.0)
    with pytest.raises(PartialReplyError):
        await fast_retries(model(anthropic_server, timeout_s=0.3)).complete(REQ, deltas)
    assert deltas == ["some "] and len(anthropic_server.requests) == 1


async def test_cancellation_from_the_delta_sink_is_not_a_provider_error(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.push(Reply(text="one two three"))

    async def stop(_: ModelEvent) -> None:
        raise Cancelled()

    with pytest.raises(Cancelled):
        await fast_retries(model(anthropic_server)).complete(REQ, stop)
    assert len(anthropic_server.requests) == 1


async def test_calls_share_one_tls_context(
    anthropic_server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for OpenAI (tests/llm/test_openai.py): no call after the first loads the CA bundle."""
    import ssl

    loads: list[int] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *a: object, **kw: object) -> None:
        loads.append(1)
        real(self, *a, **kw)  # type: ignore[arg-type]

    anthropic_server.default = Reply(text="hi")
    m = model(anthropic_server)
    await m.complete(REQ)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    for _ in range(3):
        await m.complete(REQ)
    assert loads == []
