"""OpenAIModel end to end: the real `openai` SDK against a fake chat-completions server."""

from __future__ import annotations

import json
import time

import pytest

from tests.llm.fakes import FakeCall, FakeOpenAIServer, Reply
from tests.llm.samples import READ, SHELL, Deltas, tool_history
from tests.ports import free_port
from xclaw.errors import Cancelled, LLMError
from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import OpenAIModel, openai_request
from xclaw.llm.retry import PartialReplyError, RetryingModel
from xclaw.llm.wire import public_endpoint


def model(srv: FakeOpenAIServer, timeout_s: float = 5.0) -> OpenAIModel:
    return OpenAIModel("gpt-test", api_key="sk-test", base_url=srv.url, timeout_s=timeout_s)


def fast_retries(inner: OpenAIModel, retries: int = 2) -> RetryingModel:
    return RetryingModel(inner, retries=retries, base_delay=0.01, max_delay=0.02)


REQ = LLMRequest(
    system="You are terse.", messages=(UserMessage("hi"),), tools=(SHELL, READ), max_tokens=256
)


async def test_streams_text_and_records_provider_usage(
    openai_server: FakeOpenAIServer, deltas: Deltas
) -> None:
    openai_server.push(Reply(text="Hello there, how are you today?", usage=(123, 45)))
    r = await model(openai_server).complete(REQ, deltas)
    assert r.text == "Hello there, how are you today?"
    assert deltas == ["Hello ", "there, ", "how ", "are ", "you ", "today?"]
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (123, 45)
    assert r.model == "openai:gpt-test" and r.stop_reason == "stop" and r.tool_calls == ()
    body = openai_server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "shell",
            "description": SHELL.description,
            "parameters": SHELL.input_schema,
        },
    }
    assert openai_server.headers[0]["authorization"] == "Bearer sk-test"


async def test_reassembles_streamed_tool_call_fragments(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(
        Reply(
            text="Checking.",
            tool_calls=[
                FakeCall("shell", id="call_a", fragments=['{"comm', 'and": "ls', ' -la"', "}"]),
                FakeCall.of("read_file", {"path": "dir/ü.txt"}, id="call_b"),
            ],
        )
    )
    r = await model(openai_server).complete(REQ)
    assert [(c.id, c.name, c.input) for c in r.tool_calls] == [
        ("call_a", "shell", {"command": "ls -la"}),
        ("call_b", "read_file", {"path": "dir/ü.txt"}),
    ]
    assert r.stop_reason == "tool_calls" and r.text == "Checking."


async def test_malformed_tool_arguments_do_not_crash(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(
        Reply(
            tool_calls=[
                FakeCall("shell", arguments='{"command": "ls', id="c1"),
                FakeCall("shell", arguments="[1, 2]", id="c2"),
                FakeCall("shell", arguments="", id="c3"),
                # Python's parser takes NaN; JSON does not (and the store could not keep it).
                FakeCall("shell", arguments='{"command": "ls", "n": NaN}', id="c4"),
            ]
        )
    )
    r = await model(openai_server).complete(REQ)
    assert r.tool_calls[0].input == {
        "_raw_arguments": '{"command": "ls',
        "_error": "arguments were not valid JSON",
    }
    assert r.tool_calls[1].input["_error"] == "arguments were not a JSON object"
    assert r.tool_calls[2].input == {}
    assert r.tool_calls[3].input["_error"] == "arguments were not valid JSON"


async def test_history_with_tool_calls_is_accepted(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(Reply(text="ok"))
    req = LLMRequest(system="sys", messages=tool_history(), tools=(SHELL, READ))
    r = await model(openai_server).complete(req)
    assert r.text == "ok" and openai_server.rejections == []
    msgs = openai_server.requests[0]["messages"]
    assert [m["role"] for m in msgs] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert msgs[2]["tool_calls"][1] == {
        "id": "call_0_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "README.md"})},
    }
    assert msgs[4] == {"role": "tool", "tool_call_id": "call_0_1", "content": "Error: no such file"}
    # An id with characters other providers refuse is mapped the same way on both sides.
    assert msgs[5]["tool_calls"][0]["id"] == msgs[6]["tool_call_id"] != "functions.shell:7"
    assert (
        json.loads(msgs[10]["tool_calls"][0]["function"]["arguments"])["_raw_arguments"] == "{bad"
    )


async def test_broken_history_is_rejected_like_the_real_api(
    openai_server: FakeOpenAIServer,
) -> None:
    broken = tool_history()[:2]  # tool calls without results
    with pytest.raises(LLMError) as e:
        await model(openai_server).complete(LLMRequest(system="", messages=broken))
    assert "did not have response messages: call_0_0, call_0_1" in e.value.message
    assert "HTTP 400" in e.value.message and not e.value.retryable


async def test_official_endpoint_uses_max_completion_tokens() -> None:
    body = openai_request("gpt-test", REQ, official=True)
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body


async def test_429_then_success_is_retried(openai_server: FakeOpenAIServer, deltas: Deltas) -> None:
    openai_server.push(Reply.fail(429, "Rate limit reached"), Reply(text="finally"))
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    m = RetryingModel(model(openai_server), retries=3, base_delay=0.2, max_delay=1.0, sleep=sleep)
    r = await m.complete(REQ, deltas)
    assert r.text == "finally" and deltas == ["finally"]
    assert len(openai_server.requests) == 2
    assert len(slept) == 1 and 0.1 <= slept[0] <= 0.2


async def test_retry_after_header_is_honoured(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(Reply.fail(429, "slow down", retry_after=0.3), Reply(text="ok"))
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    r = await RetryingModel(model(openai_server), retries=1, base_delay=5, sleep=sleep).complete(
        REQ
    )
    assert r.text == "ok" and slept == [0.3]


async def test_500_forever_fails_with_provider_message(openai_server: FakeOpenAIServer) -> None:
    openai_server.default = Reply.fail(
        500, "The server had an error while processing your request."
    )
    with pytest.raises(LLMError) as e:
        await fast_retries(model(openai_server), retries=2).complete(REQ)
    assert len(openai_server.requests) == 3
    assert "The server had an error while processing your request." in e.value.message
    assert "gave up after 3 attempts" in e.value.message
    assert e.value.provider == "openai:gpt-test" and e.value.retryable


async def test_client_errors_are_not_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.default = Reply.fail(401, "Incorrect API key provided")
    with pytest.raises(LLMError) as e:
        await fast_retries(model(openai_server)).complete(REQ)
    assert len(openai_server.requests) == 1
    assert "Incorrect API key provided" in e.value.message and not e.value.retryable


async def test_timeout_is_retried_then_fails(openai_server: FakeOpenAIServer) -> None:
    openai_server.default = Reply(text="too late", delay=10.0)
    t0 = time.monotonic()
    with pytest.raises(LLMError) as e:
        await fast_retries(model(openai_server, timeout_s=0.2), retries=1).complete(REQ)
    assert "timed out" in e.value.message and e.value.retryable
    assert len(openai_server.requests) == 2
    assert time.monotonic() - t0 < 8  # two 0.2 s timeouts, not a 10 s reply


async def test_timeout_then_success(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(Reply(text="too late", delay=10.0), Reply(text="on time"))
    r = await fast_retries(model(openai_server, timeout_s=0.3)).complete(REQ)
    assert r.text == "on time"


async def test_stream_that_breaks_off_after_text_is_not_retried(
    openai_server: FakeOpenAIServer, deltas: Deltas
) -> None:
    openai_server.default = Reply(text="partial answer here", stall_after_first_chunk=2.0)
    with pytest.raises(PartialReplyError) as e:
        await fast_retries(model(openai_server, timeout_s=0.3)).complete(REQ, deltas)
    assert deltas == ["partial "]
    assert len(openai_server.requests) == 1
    assert "partial output" in e.value.message


async def test_connection_refused_is_retryable() -> None:
    port = free_port()  # nothing listens there
    m = OpenAIModel("gpt-test", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2)
    with pytest.raises(LLMError) as e:
        await fast_retries(m, retries=1).complete(REQ)
    assert "connection failed" in e.value.message and e.value.retryable


async def test_local_server_without_key_still_works(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(Reply(text="local"))
    r = await OpenAIModel("llama3", base_url=openai_server.url).complete(REQ)
    assert r.text == "local" and openai_server.requests[0]["model"] == "llama3"


async def test_cancellation_from_the_delta_sink_is_not_a_provider_error(
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.push(Reply(text="one two three"))

    async def stop(_: str) -> None:
        raise Cancelled()

    with pytest.raises(Cancelled):
        await fast_retries(model(openai_server)).complete(REQ, stop)
    assert len(openai_server.requests) == 1


async def test_first_tool_choice_forces_the_first_call_of_a_turn_only(
    openai_server: FakeOpenAIServer,
) -> None:
    """`first_tool_choice` is sent on a turn's first call (the last message is the user's),
    never on the calls after a tool result: a forced call on every call would never end."""
    openai_server.default = Reply(text="ok")
    named = OpenAIModel("m", base_url=openai_server.url, first_tool_choice="shell")
    anyone = OpenAIModel("m", base_url=openai_server.url, first_tool_choice="required")
    plain = model(openai_server)
    first = LLMRequest(
        system="s", messages=(UserMessage("go"),), tools=(SHELL, READ), turn_start=True
    )
    later = LLMRequest(system="s", messages=tool_history(), tools=(SHELL, READ))
    for m in (named, anyone, plain):
        await m.complete(first)
        await m.complete(later)
    sent = [b.get("tool_choice", "-") for b in openai_server.requests]
    assert sent == [
        {"type": "function", "function": {"name": "shell"}},
        "-",
        "required",
        "-",
        "-",
        "-",
    ]


async def test_first_tool_choice_naming_no_tool_fails_in_words(
    openai_server: FakeOpenAIServer,
) -> None:
    m = OpenAIModel("m", base_url=openai_server.url, first_tool_choice="shel")
    req = LLMRequest(
        system="s", messages=(UserMessage("go"),), tools=(SHELL, READ), turn_start=True
    )
    with pytest.raises(LLMError) as e:
        await fast_retries(m).complete(req)
    assert not e.value.retryable and not openai_server.requests
    assert "first_tool_choice" in e.value.message and "'shel'" in e.value.message
    assert "shell, read_file" in e.value.message
    # Without tools (a summary call) nothing is forced.
    openai_server.push(Reply(text="summary"))
    await m.complete(LLMRequest(system="s", messages=(UserMessage("go"),), turn_start=True))
    assert "tool_choice" not in openai_server.requests[0]


async def test_raw_newlines_in_argument_strings_are_taken_as_written(
    openai_server: FakeOpenAIServer,
) -> None:
    """Local models (llama.cpp's JSON grammar lets them) write file contents and commands with
    raw newlines inside JSON strings: strict JSON refuses the control character, the intent is
    plain. Read as written; sent back as valid JSON."""
    openai_server.push(
        Reply(tool_calls=[FakeCall("shell", arguments='{"command": "printf a\nb"}', id="c1")])
    )
    r = await model(openai_server).complete(REQ)
    assert r.tool_calls[0].input == {"command": "printf a\nb"}


async def test_an_assistant_tool_call_without_text_is_sent_with_empty_content() -> None:
    """`content: null` beside `tool_calls` is valid for OpenAI, but llama-cpp-python's server
    refuses it (HTTP 500, "Input should be a valid string"); an empty string suits both."""
    body = openai_request("m", LLMRequest(system="s", messages=tool_history(), tools=(SHELL,)))
    calls = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert [m["content"] for m in calls] == ["Let me look.", "", ""]


async def test_a_server_that_reports_no_usage_gets_an_estimate_flagged_as_such(
    openai_server: FakeOpenAIServer,
) -> None:
    """llama-cpp-python streams no usage, even asked with `stream_options`: the counts are
    then xclaw's estimate and say so, never a zero that reads as a fact."""
    openai_server.push(Reply(text="Hello there, how are you today?", usage=None))
    r = await model(openai_server).complete(REQ)
    assert r.usage.estimated and r.usage.prompt_tokens > 10 and r.usage.completion_tokens > 3
    assert r.usage.to_json()["estimated"] is True
    openai_server.push(Reply(text="counted", usage=(321, 5)))
    r = await model(openai_server).complete(REQ)
    assert not r.usage.estimated and "estimated" not in r.usage.to_json()
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (321, 5)


async def test_the_answering_endpoint_is_named_without_its_credentials(
    openai_server: FakeOpenAIServer,
) -> None:
    """The response names the server that answered (what a price applies to): the configured
    base URL without user, password or query; nothing for the provider's own API."""
    openai_server.push(Reply(text="hi"))
    m = OpenAIModel("m", base_url=openai_server.url + "/")
    assert (await m.complete(REQ)).endpoint == openai_server.url
    assert OpenAIModel("m").endpoint == ""
    assert public_endpoint("https://u:p@llm.lan:8443/v1/?key=s3cret#x") == "https://llm.lan:8443/v1"


async def test_an_empty_stream_from_a_local_server_says_what_it_usually_means(
    openai_server: FakeOpenAIServer,
) -> None:
    """llama-cpp-python answers a request that fails inside it (a prompt over its --n_ctx,
    an `auto` tool choice it cannot stream) with a 200 and an empty stream: still a
    retryable cut-off, but the message says where to look."""
    openai_server.push(Reply(raw_body=b""))
    with pytest.raises(LLMError) as e:
        await model(openai_server).complete(REQ)
    assert "cut off" in e.value.message and "empty event stream" in e.value.message
    assert "context_window_tokens" in e.value.message and e.value.retryable


async def test_a_prompt_refused_for_its_length_teaches_the_window(
    openai_server: FakeOpenAIServer,
) -> None:
    """A 400 naming the window (OpenAI's wording, which vLLM and llama-cpp-python share):
    the call fails, and the window is known for the next run."""
    openai_server.push(
        Reply.fail(
            400,
            "This model's maximum context length is 4096 tokens. However, you requested 9000 "
            "tokens (8900 in the messages, 100 in the completion).",
        )
    )
    m = model(openai_server)
    with pytest.raises(LLMError) as e:
        await fast_retries(m).complete(REQ)
    assert not e.value.retryable and len(openai_server.requests) == 1
    assert await m.context_window() == 4096


async def test_calls_share_one_tls_context(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call opens its own SDK client; building a TLS context for it (loading the CA
    bundle) cost 20-50 ms a call here, more than the rest of xclaw's work in a step. One
    context per process: no call after the first loads certificates again."""
    import ssl

    loads: list[int] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *a: object, **kw: object) -> None:
        loads.append(1)
        real(self, *a, **kw)  # type: ignore[arg-type]

    openai_server.default = Reply(text="hi")
    m = model(openai_server)
    await m.complete(REQ)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    for _ in range(3):
        await m.complete(REQ)
    assert loads == []


async def test_structured_output_is_asked_with_response_format(
    openai_server: FakeOpenAIServer,
) -> None:
    """An agent with an output type (docs/agents.md): the schema goes as `response_format`
    (OpenAI's own structured output), and the answer is its JSON text."""
    from dataclasses import replace

    from xclaw.llm.base import OutputFormat, structured

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    openai_server.push(Reply(text='{"ok": true}', usage=(10, 3)))
    m = model(openai_server)
    assert structured(m) and structured(fast_retries(m))
    request = replace(REQ, output=OutputFormat("Verdict check", schema))
    r = await m.complete(request)
    assert json.loads(r.text) == {"ok": True}
    assert openai_server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict_check", "schema": schema},
    }
    assert "response_format" not in openai_request("m", REQ)
