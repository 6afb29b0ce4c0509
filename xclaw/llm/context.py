"""[llm] Fitting a conversation into the model's context window by dropping its oldest turns.

The result is always a valid provider history: the task (first user message) stays first, a
short note says how much was dropped, and the cut never falls between an assistant message
with tool calls and its tool results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

Estimate = Callable[[Message], int]
NOTE_PREFIX = "[earlier conversation trimmed:"
IMAGE_TOKENS = 1600


def estimate_tokens(m: Message) -> int:
    """About four characters a token plus a small per-message overhead (role, framing)."""
    if isinstance(m, AssistantMessage):
        size = len(m.text) + sum(len(c.name) + len(json.dumps(c.input)) + 16 for c in m.tool_calls)
        size += sum(len(b.thinking) + len(b.signature) + len(b.data) for b in m.thinking)
    elif isinstance(m, ToolResultMessage):
        # An image costs about (width x height) / 750 tokens; ~1,600 for a screen-sized one.
        size = len(m.content) + len(m.tool_call_id) + 4 * IMAGE_TOKENS * len(m.images)
    else:
        size = len(m.text)
    return size // 4 + 4


def tool_tokens(tools: Sequence[ToolSpec]) -> int:
    """What the tools' descriptions and schemas cost in the prompt, estimated the same way."""
    return sum((len(t.description) + len(json.dumps(t.input_schema))) // 4 for t in tools)


def estimated_usage(
    request: LLMRequest, text: str, tool_calls: Sequence[ToolCall] = (), reasoning: str = ""
) -> Usage:
    """A call's tokens when the provider reported none: the prompt (system, messages, tools)
    and the reply, estimated as the context window is, and flagged `estimated`."""
    prompt = (
        len(request.system) // 4
        + sum(estimate_tokens(m) for m in request.messages)
        + tool_tokens(request.tools)
    )
    reply = estimate_tokens(AssistantMessage(text=text + reasoning, tool_calls=tuple(tool_calls)))
    return Usage(prompt_tokens=prompt, completion_tokens=reply, estimated=True)


def trim_note(dropped: int) -> UserMessage:
    return UserMessage(text=f"{NOTE_PREFIX} {dropped} messages]")


def _safe_starts(messages: Sequence[Message], first: int) -> list[int]:
    """Indices after `first` where a kept tail may begin: anywhere but on a tool result (its
    call would be cut off) - which also keeps every call together with all of its results."""
    return [
        i for i in range(first + 1, len(messages)) if not isinstance(messages[i], ToolResultMessage)
    ]


def fit_context(
    messages: Sequence[Message],
    budget_tokens: int,
    estimate: Estimate = estimate_tokens,
    *,
    total: int | None = None,
) -> tuple[Message, ...]:
    """`messages` unchanged if they fit in `budget_tokens`; otherwise the task, a trim note and
    the longest tail that fits. If even the last turn alone is too big, that turn is kept
    anyway (a valid, over-budget history beats an invalid one). `total`: their estimated
    tokens, when the caller keeps count (the agent does), so that a conversation that fits
    is not measured again."""
    messages = tuple(messages)
    if total is not None and total <= budget_tokens:
        return messages
    costs = [estimate(m) for m in messages]
    if sum(costs) <= budget_tokens:
        return messages
    first = next((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), None)
    head: tuple[Message, ...] = (messages[first],) if first is not None else ()
    start_from = first if first is not None else -1
    starts = _safe_starts(messages, start_from)
    if not starts:
        return messages  # nothing can be dropped without breaking a tool-call pair
    head_cost = sum(estimate(m) for m in head)
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + costs[i]
    chosen = starts[-1]
    for i in starts:  # earliest start that fits keeps the most context
        dropped = i - len(head)
        note_cost = estimate(trim_note(dropped)) if dropped else 0
        if head_cost + note_cost + suffix[i] <= budget_tokens:
            chosen = i
            break
    dropped = chosen - len(head)
    note = (trim_note(dropped),) if dropped or first is None else ()
    return head + note + messages[chosen:]


# --- compaction: summarise instead of trimming ------------------------------------------------

COMPACT_INSTRUCTION = (
    "[System: the conversation is about to outgrow the context window. Write a summary that "
    "will replace everything above, so that work can continue from it alone. Include: the "
    "user's requests (the latest one verbatim), what has been done and found so far (files, "
    "commands, results, errors), decisions made, and exactly what remains to be done next. "
    "Be complete but concise; plain text; do not call any tool.]"
)
SUMMARY_PREFIX = "[Summary of the earlier conversation, written when the context window filled]"


def compacted_message(summary: str) -> UserMessage:
    """What replaces the summarised conversation, live and when history is rebuilt (the same
    text both ways, so a resumed session keeps its prompt prefix and its cache)."""
    return UserMessage(text=f"{SUMMARY_PREFIX}\n\n{summary.strip() or '(empty summary)'}")
