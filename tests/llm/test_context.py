"""fit_context: trimmed histories stay valid provider histories (property-tested)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.llm.fakes import validate_anthropic_request, validate_openai_request
from xclaw.llm.anthropic import anthropic_request
from xclaw.llm.base import LLMRequest
from xclaw.llm.context import estimate_tokens, fit_context, trim_note
from xclaw.llm.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from xclaw.llm.openai import openai_request

TASK = UserMessage("the task " * 10)

# A turn: ("user", size) | ("say", size) | ("tools", [result sizes], order seed)
turn = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 400)),
    st.tuples(st.just("say"), st.integers(1, 400)),
    st.tuples(
        st.just("tools"), st.lists(st.integers(0, 800), min_size=1, max_size=3), st.randoms()
    ),
)


def build(turns: list[tuple]) -> tuple[Message, ...]:
    out: list[Message] = [TASK]
    n = 0
    for t in turns:
        if t[0] == "user":
            out.append(UserMessage("u" * t[1]))
        elif t[0] == "say":
            out.append(AssistantMessage(text="a" * t[1]))
        else:
            calls = []
            for _ in t[1]:
                calls.append(ToolCall(f"call_{n}", "shell", {"command": "echo hi"}))
                n += 1
            out.append(AssistantMessage(text="", tool_calls=tuple(calls)))
            results = [
                ToolResultMessage(c.id, "shell", "r" * size)
                for c, size in zip(calls, t[1], strict=True)
            ]
            t[2].shuffle(results)  # results may come back in any order
            out.extend(results)
    return tuple(out)


def total(ms: tuple[Message, ...]) -> int:
    return sum(estimate_tokens(m) for m in ms)


def assert_valid(ms: tuple[Message, ...]) -> None:
    req = LLMRequest(system="sys", messages=ms)
    validate_anthropic_request(anthropic_request("claude", req))
    validate_openai_request(openai_request("gpt", req))


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(turn, max_size=25), fraction=st.floats(0, 1.2))
def test_trimmed_history_is_always_valid_and_as_long_as_fits(
    turns: list[tuple], fraction: float
) -> None:
    history = build(turns)
    budget = int(total(history) * fraction)
    out = fit_context(history, budget)
    assert_valid(out)
    if total(history) <= budget:
        assert out == history
        return
    assert out[0] == TASK
    if (
        len(out) > 1
        and out[1].kind == "user"
        and out[1].text.startswith("[earlier conversation trimmed:")
    ):
        tail = out[2:]
        assert out[1] == trim_note(len(history) - 1 - len(tail))
    else:  # nothing could be dropped
        tail = out[1:]
        assert out == history
    assert history[len(history) - len(tail) :] == tail  # a suffix, in order, untouched
    # The tail is the longest one that fits: one more safe message would not fit.
    safe = [i for i in range(1, len(history)) if history[i].kind != "tool_result"]
    start = len(history) - len(tail)
    if not safe:  # only the task: nothing to drop
        assert out == history
        return
    if total(out) > budget:
        assert start == safe[-1]  # over budget only when the last turn alone is too big
    earlier = [i for i in safe if i < start]
    if earlier:
        longer = (TASK, trim_note(earlier[-1] - 1), *history[earlier[-1] :])
        assert total(longer) > budget


def test_example_keeps_task_note_and_whole_tool_groups() -> None:
    history = build(
        [
            ("say", 400),
            ("tools", [800, 800], random.Random(1)),
            ("user", 40),
            ("tools", [40], random.Random(2)),
        ]
    )
    out = fit_context(history, budget_tokens=total(history) - 100)
    assert out[0] == TASK
    assert out[1] == UserMessage("[earlier conversation trimmed: 4 messages]")
    assert [m.kind for m in out[2:]] == ["user", "assistant", "tool_result"]
    assert_valid(out)


def test_fits_unchanged_and_empty() -> None:
    assert fit_context((), 10) == ()
    h = (TASK, AssistantMessage("ok"))
    assert fit_context(h, 10_000) == h


def test_over_budget_last_group_is_kept_whole() -> None:
    big = build([("say", 10), ("tools", [4000, 4000], random.Random(0))])
    out = fit_context(big, budget_tokens=50)
    assert [m.kind for m in out] == ["user", "user", "assistant", "tool_result", "tool_result"]
    assert_valid(out)


def test_history_without_a_user_message_still_starts_with_one() -> None:
    h = (AssistantMessage("a" * 400), AssistantMessage("b" * 40))
    out = fit_context(h, budget_tokens=30)
    assert out[0].kind == "user" and out[-1] == h[-1]
