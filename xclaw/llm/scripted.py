"""[llm] The scripted model: a real provider that replays a JSON script, so the
demo and end-to-end tests are deterministic without a key. See docs/scripted-model.md.

Turn k answers the k-th LLM call of an agent, k counted from the assistant messages already in
the request. The model keeps no state of its own, so a restarted server continues the script
exactly where the recorded history left it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xclaw.agents.output import FINAL_ANSWER
from xclaw.errors import ConfigError, LLMError
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.context import COMPACT_INSTRUCTION, SUMMARY_PREFIX
from xclaw.llm.events import EventSink, TextDelta, Thinking, emit
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    is_interrupted_result,
)

FINISHED = "(script finished)"
WORDS_PER_DELTA = 3


class _BadScript(Exception):
    """A problem in a script file's contents (turned into a ConfigError with the path)."""


@dataclass(frozen=True, slots=True)
class Turn:
    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # (name, input)
    sleep: float = 0.0
    fail: str | None = None
    # Reasoning shown before the answer (a `reasoning` block, as OpenAI-compatible servers give).
    thinking: str = ""
    # The deltas to stream, exactly (their concatenation is `text`); None: word groups.
    chunks: tuple[str, ...] | None = None
    # Played only when a tool call of the turn before was interrupted (its result is the
    # `[interrupted]` one after a crash); skipped otherwise.
    after_interruption: bool = False
    # A structured final answer (docs/agents.md): the JSON text of it for a request that asks
    # for structured output, else a call of the final-answer tool with it.
    output: Any = None


@dataclass(frozen=True, slots=True)
class Branch:
    """Turns that answer from the latest user message containing `when` on (an extension:
    lets a fork or a new instruction take a different path through the script)."""

    when: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Script:
    turns: tuple[Turn, ...]
    subagent_turns: tuple[Turn, ...] | None = None
    branches: tuple[Branch, ...] = ()
    # The turns of declared sub-agents, by the agent's name (`agents`).
    agents: dict[str, tuple[Turn, ...]] | None = None
    # Answer as a provider with structured output of its own does (`structured_output`).
    structured_output: bool = False


def _turns(raw: Any, where: str) -> tuple[Turn, ...]:
    if not isinstance(raw, list):
        raise _BadScript(f"{where} must be a list of turns")
    out = []
    for i, t in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(t, dict):
            raise _BadScript(f'{at} must be an object like {{"text": "..."}}')
        unknown = set(t) - {
            "text",
            "tool_calls",
            "sleep",
            "fail",
            "thinking",
            "chunks",
            "after_interruption",
            "output",
        }
        if unknown:
            raise _BadScript(f"{at} has unknown keys {sorted(unknown)}")
        text = t.get("text", "")
        if not isinstance(text, str):
            raise _BadScript(f"{at}.text must be a string")
        chunks = t.get("chunks")
        if chunks is not None:
            if not isinstance(chunks, list) or not all(isinstance(c, str) for c in chunks):
                raise _BadScript(f"{at}.chunks must be a list of strings")
            if "text" not in t:
                text = "".join(chunks)
            elif text != "".join(chunks):
                raise _BadScript(f"{at}.chunks must join to exactly {at}.text")
        calls = t.get("tool_calls", [])
        if not isinstance(calls, list):
            raise _BadScript(f"{at}.tool_calls must be a list")
        parsed = []
        for j, c in enumerate(calls):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
                raise _BadScript(f'{at}.tool_calls[{j}] needs a "name" string')
            args = c.get("input", {})
            if not isinstance(args, dict):
                raise _BadScript(f"{at}.tool_calls[{j}].input must be an object")
            parsed.append((c["name"], args))
        sleep = t.get("sleep", 0)
        if isinstance(sleep, bool) or not isinstance(sleep, (int, float)) or sleep < 0:
            raise _BadScript(f"{at}.sleep must be a number of seconds >= 0")
        fail = t.get("fail")
        if fail is not None and not isinstance(fail, str):
            raise _BadScript(f"{at}.fail must be a string")
        thinking = t.get("thinking", "")
        if not isinstance(thinking, str):
            raise _BadScript(f"{at}.thinking must be a string")
        after_interruption = t.get("after_interruption", False)
        if not isinstance(after_interruption, bool):
            raise _BadScript(f"{at}.after_interruption must be true or false")
        output = t.get("output")
        if output is not None and (calls or not isinstance(output, dict)):
            raise _BadScript(f"{at}.output must be an object, in a turn without tool_calls")
        out.append(
            Turn(
                text=text,
                tool_calls=tuple(parsed),
                sleep=float(sleep),
                fail=fail,
                thinking=thinking,
                chunks=None if chunks is None else tuple(chunks),
                after_interruption=after_interruption,
                output=output,
            )
        )
    return tuple(out)


def load_script(path: Path) -> Script:
    """Read and check a script file; any problem is a ConfigError naming the file and why."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"scripted model: {path}: file not found") from None
    except OSError as e:
        raise ConfigError(f"scripted model: {path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"scripted model: {path}: not UTF-8 text: {e}") from e
    except ValueError as e:
        raise ConfigError(f"scripted model: {path}: not valid JSON: {e}") from e
    try:
        if not isinstance(data, dict) or "turns" not in data:
            raise _BadScript('expected an object like {"turns": [...]}')
        turns = _turns(data["turns"], "turns")
        sub = data.get("subagent")
        sub_turns = None
        if sub is not None:
            if not isinstance(sub, dict) or "turns" not in sub:
                raise _BadScript('"subagent" must be an object like {"turns": [...]}')
            sub_turns = _turns(sub["turns"], "subagent.turns")
        branches = []
        raw_branches = data.get("branches", [])
        if not isinstance(raw_branches, list):
            raise _BadScript('"branches" must be a list like [{"when": "...", "turns": [...]}]')
        for i, b in enumerate(raw_branches):
            if not isinstance(b, dict) or not isinstance(b.get("when"), str) or not b["when"]:
                raise _BadScript(f'branches[{i}] needs a non-empty "when" string')
            branches.append(Branch(b["when"], _turns(b.get("turns"), f"branches[{i}].turns")))
        agents = None
        raw_agents = data.get("agents")
        if raw_agents is not None:
            if not isinstance(raw_agents, dict):
                raise _BadScript('"agents" must be an object like {"reviewer": {"turns": [...]}}')
            agents = {}
            for name, sub in raw_agents.items():
                if not isinstance(sub, dict) or "turns" not in sub:
                    raise _BadScript(f'agents.{name} must be an object like {{"turns": [...]}}')
                agents[str(name)] = _turns(sub["turns"], f"agents.{name}.turns")
        native = data.get("structured_output", False)
        if not isinstance(native, bool):
            raise _BadScript('"structured_output" must be true or false')
    except _BadScript as e:
        raise ConfigError(f"scripted model: {path}: {e}") from e
    return Script(
        turns=turns,
        subagent_turns=sub_turns,
        branches=tuple(branches),
        agents=agents,
        structured_output=native,
    )


def estimate_tokens(text: str) -> int:
    """About four characters a token: the usual rule of thumb, good enough for budgets."""
    return (len(text) + 3) // 4


def _message_chars(m: Message) -> int:
    """How long a message is, as the prompt estimate counts it (runs over the whole
    conversation on every call: lengths, no string built)."""
    if isinstance(m, AssistantMessage):
        return len(m.text) + sum(len(str(c.input)) + len(c.name) for c in m.tool_calls)
    if isinstance(m, ToolResultMessage):
        return len(m.content)
    return len(m.text)


def _prompt_tokens(request: LLMRequest) -> int:
    return (len(request.system) + sum(_message_chars(m) for m in request.messages) + 3) // 4


def _chunks(text: str) -> list[str]:
    """Word groups whose concatenation is exactly `text`."""
    pieces = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    return [
        "".join(pieces[i : i + WORDS_PER_DELTA]) for i in range(0, len(pieces), WORDS_PER_DELTA)
    ]


_PLAYED = re.compile(r"Scripted summary \(turns played: (\d+)\)")


def _played_before_summary(history: tuple[Message, ...] | list[Message]) -> int:
    """Turns a compaction summary at the start of the conversation stands for (the script
    goes on after it, not back to its first turn)."""
    first = history[0] if history else None
    if isinstance(first, UserMessage) and first.text.startswith(SUMMARY_PREFIX):
        found = _PLAYED.search(first.text)
        return int(found.group(1)) if found else 0
    return 0


def _skip(turns: tuple[Turn, ...], t: int, interrupted: bool) -> int:
    """Turn t, or the first after it that applies: `after_interruption` turns only after
    an interrupted call."""
    while t < len(turns) and turns[t].after_interruption and not interrupted:
        t += 1
    return t


def next_turn(turns: tuple[Turn, ...], history: Sequence[Message], first: int = 0) -> int:
    """The index of the turn that answers the next call, from the conversation alone: each
    assistant message played one turn, skipping the `after_interruption` turns that did not
    apply where it was played. Without such turns: `first` + the assistant messages."""
    t, interrupted = first, False
    for m in history:
        if isinstance(m, AssistantMessage):
            t, interrupted = _skip(turns, t, interrupted) + 1, False
        elif is_interrupted_result(m):
            interrupted = True
    return _skip(turns, t, interrupted)


class ScriptedModel:
    """`script:<path>`. Stateless between calls: everything it needs is in the request."""

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or f"script:{path}"
        self.script = load_script(self.path)
        # Answers as a provider with structured output of its own (`structured_output`).
        self.structured_output = self.script.structured_output

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        last = request.messages[-1] if request.messages else None
        if isinstance(last, UserMessage) and last.text == COMPACT_INSTRUCTION:
            return self._summary(request)
        asked = request.playback
        main = asked.agent == "main"
        # Turns are counted over the whole conversation, not the part that fits the window.
        history = asked.conversation(request.messages)
        start, turns, prefix = 0, self.script.turns if main else self.script.subagent_turns, "call"
        if not main and self.script.agents and asked.agent_name in self.script.agents:
            turns = self.script.agents[asked.agent_name]  # a declared sub-agent's own
        if main:
            # The resume note is the runtime's, not a person's: no branch answers it.
            said = history[:-1] if asked.resumed else history
            start, branch = self._branch(said)
            if branch is not None:
                turns, prefix = branch.turns, f"call_u{start}"
        played = _played_before_summary(history) if start == 0 else 0
        k = next_turn(turns or (), history[start:], played)
        if turns is None:
            first = next((m.text for m in history if isinstance(m, UserMessage)), "")
            turn = Turn(text=f"Sub-agent done: {first}")
        elif k < len(turns):
            turn = turns[k]
        else:
            turn = Turn(text=FINISHED)
        if turn.sleep:
            await asyncio.sleep(turn.sleep)
        if turn.fail is not None:
            raise LLMError(turn.fail, retryable=False, provider=self.name)
        if turn.thinking:
            await emit(on_event, Thinking(ThinkingBlock("reasoning", turn.thinking)))
        if turn.output is not None and request.output is not None:
            turn = replace(turn, text=json.dumps(turn.output))  # structured output: its text
        if on_event is not None:
            for piece in _chunks(turn.text) if turn.chunks is None else turn.chunks:
                if piece:
                    await on_event(TextDelta(piece))
        # Ids depend only on the turn, so a replayed turn after a restart has the same ids.
        if not main:
            prefix = f"call_{re.sub(r'[^A-Za-z0-9_-]', '_', asked.agent)}"
        planned = turn.tool_calls
        if turn.output is not None and request.output is None:
            planned = ((FINAL_ANSWER, turn.output),)  # no structured output: the tool
        calls = tuple(
            ToolCall(id=f"{prefix}_{k}_{i}", name=name, input=dict(args))
            for i, (name, args) in enumerate(planned)
        )
        completion = turn.text + "".join(json.dumps(c.input) + c.name for c in calls)
        return LLMResponse(
            text=turn.text,
            tool_calls=calls,
            usage=Usage(_prompt_tokens(request), estimate_tokens(completion)),
            model=self.name,
            stop_reason="tool_use" if calls else "end_turn",
            thinking=(ThinkingBlock("reasoning", turn.thinking),) if turn.thinking else (),
        )

    def _summary(self, request: LLMRequest) -> LLMResponse:
        """A compaction request: a deterministic summary (the user's messages and how many
        tool results there were), which consumes no turn of the script."""
        history = request.playback.conversation(request.messages)
        asked = [m.text for m in history if isinstance(m, UserMessage)][:-1]
        results = sum(1 for m in history if isinstance(m, ToolResultMessage))
        played = next_turn(self.script.turns, history, _played_before_summary(history))
        text = (
            f"Scripted summary (turns played: {played}). The user asked: "
            + " / ".join(" ".join(a.split())[:200] for a in asked)
            + f". Tool results so far: {results}."
        )
        return LLMResponse(
            text=text,
            usage=Usage(_prompt_tokens(request), estimate_tokens(text)),
            model=self.name,
            stop_reason="end_turn",
        )

    def _branch(self, messages: tuple[Message, ...]) -> tuple[int, Branch | None]:
        """The branch whose `when` the latest user message holding one contains, and where
        it starts."""
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if isinstance(m, UserMessage):
                for b in self.script.branches:
                    if b.when.lower() in m.text.lower():
                        return i, b
        return 0, None
