"""The conversation as the LLM sees it: a flat list of provider-neutral messages.

A discriminated union on `kind`. Providers translate these into their native shapes
(Anthropic tool_use/tool_result blocks, OpenAI tool_calls/tool messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "input": self.input}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=str(data["id"]), name=str(data["name"]), input=dict(data.get("input") or {}))


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str
    kind: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    kind: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


def message_to_json(m: Message) -> dict[str, Any]:
    if isinstance(m, UserMessage):
        return {"kind": "user", "text": m.text}
    if isinstance(m, AssistantMessage):
        return {"kind": "assistant", "text": m.text, "tool_calls": [c.to_json() for c in m.tool_calls]}
    return {
        "kind": "tool_result",
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "content": m.content,
        "is_error": m.is_error,
    }


def message_from_json(d: dict[str, Any]) -> Message:
    kind = d.get("kind")
    if kind == "user":
        return UserMessage(text=str(d.get("text", "")))
    if kind == "assistant":
        return AssistantMessage(
            text=str(d.get("text", "")),
            tool_calls=tuple(ToolCall.from_json(c) for c in d.get("tool_calls") or ()),
        )
    if kind == "tool_result":
        return ToolResultMessage(
            tool_call_id=str(d["tool_call_id"]),
            name=str(d.get("name", "")),
            content=str(d.get("content", "")),
            is_error=bool(d.get("is_error", False)),
        )
    raise ValueError(f"unknown message kind {kind!r}")
