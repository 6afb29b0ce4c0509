"""The fake servers' validators reject what the real APIs reject; the crash tests rely on it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm.fakes import InvalidRequest, validate_anthropic_request, validate_openai_request
from tests.llm.samples import tool_history
from xclaw.llm.anthropic import anthropic_request
from xclaw.llm.base import LLMRequest
from xclaw.llm.openai import openai_request


def a_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude", "max_tokens": 10, "messages": messages, **extra}


def o_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt", "messages": messages, **extra}


def use(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "shell", "input": {}} for i in ids],
    }


def result(*ids: str, text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids
    ]
    if text:
        blocks.append({"type": "text", "text": text})
    return {"role": "user", "content": blocks}


def test_our_translations_of_a_tool_history_are_valid() -> None:
    req = LLMRequest(system="s", messages=tool_history())
    validate_anthropic_request(anthropic_request("claude", req))
    validate_openai_request(openai_request("gpt", req))


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    "messages, expected",
    [
        ([], "at least one message"),
        ([{"role": "assistant", "content": "x"}], 'first message must use the "user" role'),
        ([USER, USER], "roles must alternate"),
        ([{"role": "user", "content": ""}], "non-empty content"),
        ([{"role": "user", "content": [{"type": "text", "text": "  "}]}], "non-whitespace text"),
        ([USER, use("t1")], "without `tool_result` blocks immediately after: t1"),
        (
            [USER, use("t1", "t2"), result("t1")],
            "without `tool_result` blocks immediately after: t2",
        ),
        (
            [USER, use("t1"), result("t1", "t9")],
            "unexpected `tool_use_id` found in `tool_result` blocks: t9",
        ),
        ([result("t1")], "unexpected `tool_use_id`"),
        (
            [
                USER,
                use("t1"),
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "tool_result", "tool_use_id": "t1"},
                    ],
                },
            ],
            "tool_result blocks must come before any text",
        ),
        ([USER, use("bad:id"), result("bad:id")], "must match"),
        ([USER, use("t1"), result("t1"), use("t1"), result("t1")], "ids must be unique"),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
                }
            ],
            "only allowed in assistant messages",
        ),
    ],
)
def test_anthropic_validator_rejects(messages: list[dict[str, Any]], expected: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        validate_anthropic_request(a_body(messages))
    assert expected in str(e.value)


def test_anthropic_validator_accepts_a_full_exchange() -> None:
    validate_anthropic_request(
        a_body(
            [
                USER,
                use("t1", "t2"),
                result("t2", "t1", text="and continue"),
                {"role": "assistant", "content": "done"},
            ],
            system="sys",
            tools=[{"name": "shell", "description": "d", "input_schema": {"type": "object"}}],
        )
    )


def test_anthropic_validator_checks_tools_and_params() -> None:
    with pytest.raises(InvalidRequest, match="input_schema"):
        validate_anthropic_request(
            a_body([USER], tools=[{"name": "x", "input_schema": {"type": "string"}}])
        )
    with pytest.raises(InvalidRequest, match="name"):
        validate_anthropic_request(
            a_body([USER], tools=[{"name": "a b", "input_schema": {"type": "object"}}])
        )
    with pytest.raises(InvalidRequest, match="max_tokens"):
        validate_anthropic_request({"model": "m", "messages": [USER]})


def call(cid: str, args: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "shell", "arguments": args}}


def tool(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "ok"}


@pytest.mark.parametrize(
    "messages, expected",
    [
        ([], "at least one message"),
        (
            [USER, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}],
            "did not have response messages: c1",
        ),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
                tool("c1"),
                USER,
            ],
            "did not have response messages: c2",
        ),
        ([USER, tool("c1")], "must be a response to a preceeding message with 'tool_calls'"),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                tool("c1"),
                tool("c1"),
            ],
            "must be a response to a preceeding",
        ),
        ([USER, {"role": "assistant", "content": None}], "expected a string, got NoneType"),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("c1", "{bad")]},
                tool("c1"),
            ],
            "not a JSON object",
        ),
        (
            [
                USER,
                {"role": "assistant", "content": None, "tool_calls": [call("x" * 41)]},
                tool("x" * 41),
            ],
            "maximum length 40",
        ),
        ([{"role": "robot", "content": "x"}], "unsupported role"),
    ],
)
def test_openai_validator_rejects(messages: list[dict[str, Any]], expected: str) -> None:
    with pytest.raises(InvalidRequest) as e:
        validate_openai_request(o_body(messages))
    assert expected in str(e.value)


def test_openai_validator_accepts_results_in_any_order() -> None:
    validate_openai_request(
        o_body(
            [
                {"role": "system", "content": "s"},
                USER,
                {"role": "assistant", "content": "let me", "tool_calls": [call("c1"), call("c2")]},
                tool("c2"),
                tool("c1"),
                {"role": "assistant", "content": "done"},
                USER,
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
    )


def test_openai_validator_checks_params() -> None:
    with pytest.raises(InvalidRequest, match="stream_options"):
        validate_openai_request(o_body([USER], stream_options={"include_usage": True}))
    with pytest.raises(InvalidRequest, match="both"):
        validate_openai_request(o_body([USER], max_tokens=5, max_completion_tokens=5))
    with pytest.raises(InvalidRequest, match=r"function\.name"):
        validate_openai_request(
            o_body([USER], tools=[{"type": "function", "function": {"name": "a.b"}}])
        )
