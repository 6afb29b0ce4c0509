"""The scripted model: the contract of docs/scripted-model.md plus the documented extensions."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.llm.fakes import validate_anthropic_request, validate_openai_request
from tests.llm.samples import Deltas
from xclaw.errors import ConfigError, LLMError
from xclaw.llm.anthropic import anthropic_request
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.events import ModelEvent, TextDelta
from xclaw.llm.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from xclaw.llm.openai import openai_request
from xclaw.llm.playback import Playback
from xclaw.llm.scripted import FINISHED, ScriptedModel

SCRIPT = {
    "turns": [
        {
            "text": "I will list the files first.",
            "tool_calls": [{"name": "shell", "input": {"command": "ls"}}],
        },
        {
            "text": "Two at once.",
            "tool_calls": [
                {"name": "shell", "input": {"command": "sleep 1"}},
                {"name": "read_file", "input": {"path": "a.txt"}},
            ],
        },
        {"text": "All done."},
    ]
}


def write(tmp_path: Path, data: Any, name: str = "script.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def follow(history: list[Message], r: LLMResponse) -> None:
    """What the agent loop does with a reply: append it, answer each call."""
    history.append(AssistantMessage(text=r.text, tool_calls=r.tool_calls))
    for c in r.tool_calls:
        history.append(ToolResultMessage(c.id, c.name, f"ran {c.name}"))


async def test_turns_follow_the_assistant_messages_in_history(
    tmp_path: Path, deltas: Deltas
) -> None:
    m = ScriptedModel(write(tmp_path, SCRIPT))
    history: list[Message] = [UserMessage("do the task")]
    r0 = await m.complete(LLMRequest(system="", messages=tuple(history)), deltas)
    assert r0.text == "I will list the files first."
    assert [(c.id, c.name, c.input) for c in r0.tool_calls] == [
        ("call_0_0", "shell", {"command": "ls"})
    ]
    assert r0.stop_reason == "tool_use" and r0.model == f"script:{tmp_path / 'script.json'}"
    # Streamed in word groups whose concatenation is the text.
    assert len(deltas) >= 2 and "".join(deltas) == r0.text
    follow(history, r0)
    r1 = await m.complete(LLMRequest(system="", messages=tuple(history)))
    assert [c.id for c in r1.tool_calls] == ["call_1_0", "call_1_1"]
    follow(history, r1)
    r2 = await m.complete(LLMRequest(system="", messages=tuple(history)))
    assert r2.text == "All done." and r2.tool_calls == () and r2.stop_reason == "end_turn"
    # The whole conversation is a valid provider history.
    req = LLMRequest(system="s", messages=tuple(history))
    validate_anthropic_request(anthropic_request("c", req))
    validate_openai_request(openai_request("g", req))


async def test_a_restarted_model_continues_where_the_history_is(tmp_path: Path) -> None:
    path = write(tmp_path, SCRIPT)
    history: list[Message] = [UserMessage("task")]
    follow(
        history, await ScriptedModel(path).complete(LLMRequest(system="", messages=tuple(history)))
    )
    # "Restart": a brand-new model object sees the recorded history and gives turn 1, with the
    # same ids a crashed run would have been given.
    first = await ScriptedModel(path).complete(LLMRequest(system="", messages=tuple(history)))
    again = await ScriptedModel(path).complete(LLMRequest(system="", messages=tuple(history)))
    assert first.text == "Two at once." and first == again
    assert [c.id for c in again.tool_calls] == ["call_1_0", "call_1_1"]


INTERRUPTIBLE = {
    "turns": [
        {"tool_calls": [{"name": "shell", "input": {"command": "sleep 3"}}]},
        {
            "after_interruption": True,
            "text": "It was interrupted: again.",
            "tool_calls": [{"name": "shell", "input": {"command": "sleep 3"}}],
        },
        {"text": "Checked."},
    ]
}


async def test_an_after_interruption_turn_is_skipped_when_nothing_was_interrupted(
    tmp_path: Path,
) -> None:
    m = ScriptedModel(write(tmp_path, INTERRUPTIBLE))
    history: list[Message] = [UserMessage("check")]
    follow(history, await m.complete(LLMRequest(system="", messages=tuple(history))))
    assert (await m.complete(LLMRequest(system="", messages=tuple(history)))).text == "Checked."


async def test_an_after_interruption_turn_is_played_after_an_interrupted_call(
    tmp_path: Path,
) -> None:
    from xclaw.llm.messages import INTERRUPTED_RESULT

    m = ScriptedModel(write(tmp_path, INTERRUPTIBLE))
    history: list[Message] = [UserMessage("check")]
    r0 = await m.complete(LLMRequest(system="", messages=tuple(history)))
    history.append(AssistantMessage(text=r0.text, tool_calls=r0.tool_calls))
    # After a crash the history rebuilt from the record answers the call so.
    history.append(ToolResultMessage(r0.tool_calls[0].id, "shell", INTERRUPTED_RESULT, True))
    r1 = await m.complete(LLMRequest(system="", messages=tuple(history)))
    assert r1.text == "It was interrupted: again." and r1.tool_calls[0].id == "call_1_0"
    follow(history, r1)
    assert (await m.complete(LLMRequest(system="", messages=tuple(history)))).text == "Checked."


async def test_exhausted_script_finishes_politely(tmp_path: Path) -> None:
    m = ScriptedModel(write(tmp_path, {"turns": [{"text": "only"}]}))
    history = (UserMessage("a"), AssistantMessage("only"), UserMessage("more?"))
    r = await m.complete(LLMRequest(system="", messages=history))
    assert r.text == FINISHED and r.tool_calls == ()


async def test_subagents_use_their_own_script_and_count(tmp_path: Path) -> None:
    m = ScriptedModel(
        write(
            tmp_path,
            {
                **SCRIPT,
                "subagent": {
                    "turns": [
                        {
                            "text": "sub step",
                            "tool_calls": [{"name": "read_file", "input": {"path": "x"}}],
                        },
                        {"text": "sub finished"},
                    ]
                },
            },
        )
    )
    # The sub-agent's own list has no assistant message yet, whatever the main agent did.
    r = await m.complete(
        LLMRequest(system="", messages=(UserMessage("subtask"),), playback=Playback(agent="a1"))
    )
    assert r.text == "sub step" and r.tool_calls[0].id == "call_a1_0_0"
    sub: list[Message] = [UserMessage("subtask")]
    follow(sub, r)
    r2 = await m.complete(LLMRequest(system="", messages=tuple(sub), playback=Playback(agent="a1")))
    assert r2.text == "sub finished"


async def test_subagent_without_script_echoes_its_task(tmp_path: Path) -> None:
    m = ScriptedModel(write(tmp_path, SCRIPT))
    r = await m.complete(
        LLMRequest(
            system="", messages=(UserMessage("count the lines"),), playback=Playback(agent="sub-7")
        )
    )
    assert r.text == "Sub-agent done: count the lines" and r.tool_calls == ()


async def test_sleep_delays_the_answer_and_can_be_cancelled(tmp_path: Path) -> None:
    m = ScriptedModel(write(tmp_path, {"turns": [{"text": "slow", "sleep": 0.2}]}))
    t0 = time.monotonic()
    r = await m.complete(LLMRequest(system="", messages=(UserMessage("x"),)))
    assert r.text == "slow" and time.monotonic() - t0 >= 0.2
    task = asyncio.create_task(m.complete(LLMRequest(system="", messages=(UserMessage("x"),))))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_fail_raises_a_non_retryable_llm_error(tmp_path: Path) -> None:
    path = write(tmp_path, {"turns": [{"fail": "provider exploded"}]})
    with pytest.raises(LLMError) as e:
        await ScriptedModel(path).complete(LLMRequest(system="", messages=(UserMessage("x"),)))
    assert e.value.message == "provider exploded" and not e.value.retryable
    assert e.value.provider == f"script:{path}"


async def test_usage_is_estimated_from_text_length(tmp_path: Path) -> None:
    m = ScriptedModel(write(tmp_path, {"turns": [{"text": "x" * 40}]}))
    r = await m.complete(LLMRequest(system="s" * 400, messages=(UserMessage("u" * 400),)))
    assert r.usage.completion_tokens == 10 and r.usage.prompt_tokens == 200


async def test_chunks_are_streamed_exactly_as_written(tmp_path: Path) -> None:
    """`chunks` sets the deltas one by one (a secret split at any position, say): their
    concatenation is the turn's text, which may then be left out."""
    script = {"turns": [{"chunks": ["sk-a", "n", "t-key rest", "", "."]}, {"text": "x y"}]}
    m = ScriptedModel(write(tmp_path, script))
    seen: list[str] = []

    async def sink(event: ModelEvent) -> None:
        assert isinstance(event, TextDelta)
        seen.append(event.text)

    r = await m.complete(LLMRequest(system="", messages=(UserMessage("go"),)), sink)
    assert seen == ["sk-a", "n", "t-key rest", "."]  # an empty chunk sends nothing
    assert r.text == "sk-ant-key rest."
    both = {"turns": [{"text": "ab", "chunks": ["a", "b"]}]}
    assert (
        await ScriptedModel(write(tmp_path, both, "b.json")).complete(
            LLMRequest(system="", messages=(UserMessage("go"),))
        )
    ).text == "ab"


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "file not found"),
        ("{not json", "not valid JSON"),
        ([], 'expected an object like {"turns": [...]}'),
        ({"turns": {"text": "x"}}, "turns must be a list"),
        ({"turns": ["hello"]}, "turns[0] must be an object"),
        ({"turns": [{"text": 3}]}, "turns[0].text must be a string"),
        (
            {"turns": [{"text": "x", "tool_calls": [{"input": {}}]}]},
            'turns[0].tool_calls[0] needs a "name"',
        ),
        (
            {"turns": [{"tool_calls": [{"name": "shell", "input": "ls"}]}]},
            "input must be an object",
        ),
        ({"turns": [{"text": "x", "sleep": -1}]}, "sleep must be a number"),
        ({"turns": [{"txt": "typo"}]}, "unknown keys ['txt']"),
        ({"turns": [{"chunks": "ab"}]}, "turns[0].chunks must be a list of strings"),
        ({"turns": [{"chunks": ["a", 1]}]}, "turns[0].chunks must be a list of strings"),
        ({"turns": [{"text": "abc", "chunks": ["a", "b"]}]}, "chunks must join to exactly"),
        (
            {"turns": [{"text": "x", "after_interruption": "yes"}]},
            "turns[0].after_interruption must be true or false",
        ),
        ({"turns": [], "subagent": []}, '"subagent" must be an object'),
        (
            {"turns": [], "subagent": {"turns": [{"fail": 1}]}},
            "subagent.turns[0].fail must be a string",
        ),
    ],
)
def test_bad_script_files_are_config_errors(tmp_path: Path, content: Any, reason: str) -> None:
    path = tmp_path / "missing.json" if content is None else write(tmp_path, content)
    with pytest.raises(ConfigError) as e:
        ScriptedModel(path)
    assert str(path) in e.value.message and reason in e.value.message


async def test_branches_take_over_from_the_matching_user_message(tmp_path) -> None:
    from xclaw.llm.base import LLMRequest
    from xclaw.llm.messages import AssistantMessage, UserMessage
    from xclaw.llm.scripted import ScriptedModel

    path = tmp_path / "s.json"
    path.write_text(
        '{"turns": [{"text": "main 0"}, {"text": "main 1"}],'
        ' "branches": [{"when": "shorter", "turns": [{"text": "", "tool_calls": [{"name": "shell", "input": {}}]}, {"text": "short 1"}]}]}'
    )
    model = ScriptedModel(path)
    base = (UserMessage("task"), AssistantMessage("main 0"))
    assert (await model.complete(LLMRequest("s", (*base, UserMessage("more"))))).text == "main 1"
    first = await model.complete(LLMRequest("s", (*base, UserMessage("Make it SHORTER"))))
    assert first.tool_calls[0].id == "call_u2_0_0"
    after = (*base, UserMessage("make it shorter"), AssistantMessage("", first.tool_calls))
    assert (await model.complete(LLMRequest("s", after))).text == "short 1"


def test_a_bad_branch_is_a_clear_config_error(tmp_path) -> None:
    import pytest

    from xclaw.errors import ConfigError
    from xclaw.llm.scripted import ScriptedModel

    path = tmp_path / "s.json"
    path.write_text('{"turns": [], "branches": [{"turns": []}]}')
    with pytest.raises(ConfigError, match='branches\\[0\\] needs a non-empty "when"'):
        ScriptedModel(path)


def test_the_general_request_holds_what_a_provider_sends_and_one_playback_value() -> None:
    """What only the models that play answers back read (who asks, the untrimmed history,
    the resume note) is one value of theirs, not fields of the request every provider
    gets."""
    from dataclasses import fields

    assert [f.name for f in fields(LLMRequest)] == [
        "system",
        "messages",
        "tools",
        "max_tokens",
        "temperature",
        "turn_start",
        "output",
        "prompt_estimate",
        "playback",
    ]
    assert {f.name for f in fields(Playback)} == {"agent", "agent_name", "history", "resumed"}
