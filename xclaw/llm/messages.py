"""[llm] The conversation as the LLM sees it: a flat list of provider-neutral messages.

A discriminated union on `kind`. Providers translate these into their native shapes
(Anthropic tool_use/tool_result blocks, OpenAI tool_calls/tool messages).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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


def call_signature(name: str, args: Mapping[str, Any]) -> str:
    """One tool call as a comparable string (name + canonical JSON of its arguments). The
    recorder marks calls whose outcome was lost in a crash by it; the loop asks before
    repeating them (`ResumeState.suspect_calls`)."""
    return name + ":" + json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """The model's reasoning before its answer. `type` is Anthropic's `thinking` (text +
    `signature`) or `redacted_thinking` (opaque `data`), or `reasoning` for the
    `reasoning_content` of OpenAI-compatible servers (DeepSeek, vLLM). Anthropic blocks go
    back to the API verbatim (signature byte-exact) on the following requests: the API
    rejects a tool-use turn whose assistant message lost them."""

    type: Literal["thinking", "redacted_thinking", "reasoning"]
    thinking: str = ""
    signature: str = ""
    data: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.type == "redacted_thinking":
            return {"type": self.type, "data": self.data}
        if self.type == "thinking":
            return {"type": self.type, "thinking": self.thinking, "signature": self.signature}
        return {"type": self.type, "thinking": self.thinking}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ThinkingBlock:
        kind = d.get("type")
        if kind not in ("thinking", "redacted_thinking", "reasoning"):
            raise ValueError(f"unknown thinking block type {kind!r}")
        return cls(
            type=kind,
            thinking=str(d.get("thinking") or ""),
            signature=str(d.get("signature") or ""),
            data=str(d.get("data") or ""),
        )


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image a tool returned (view_file on a PNG, JPEG, GIF or WebP). `data` holds the
    bytes while the conversation is live; the record keeps only `hash` (the content-addressed
    blob store's key) and history rebuilds load the bytes back from there."""

    media_type: str
    data: bytes = b""
    hash: str = ""

    def to_json(self) -> dict[str, Any]:
        """Without the bytes: what trace rows and client frames carry."""
        return {"media_type": self.media_type, "hash": self.hash, "size": len(self.data)}


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str
    kind: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    kind: Literal["assistant"] = "assistant"
    # Reasoning that came before the text and calls, in the order the model sent it.
    thinking: tuple[ThinkingBlock, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"
    images: tuple[ImageBlock, ...] = ()


Message = UserMessage | AssistantMessage | ToolResultMessage

# The result a tool call gets when it was interrupted and may or may not have run (no blind
# repeat): written by the recorder's history rebuild, recognised by the scripted model.
INTERRUPTED_RESULT = (
    "[interrupted] The process running this tool call stopped before the call finished. "
    "It may or may not have run (partially or fully). Check the current state before "
    "issuing it again."
)


def is_interrupted_result(m: Message) -> bool:
    return isinstance(m, ToolResultMessage) and m.is_error and m.content == INTERRUPTED_RESULT


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call. `prompt_tokens` counts every input token sent, cached or not;
    `cache_read_tokens` and `cache_write_tokens` are the parts of it read from / written to
    the provider's prompt cache (OpenAI reports reads only). `reasoning_tokens` is the part
    of `completion_tokens` spent thinking, when the provider says. `estimated`: the provider
    reported no counts (llama-cpp-python's server while streaming), these are xclaw's estimate
    (~4 characters a token); a sum with any estimated part is estimated."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.estimated or other.estimated,
        )

    def to_json(self) -> dict[str, Any]:
        """As stored in an llm_call step's output_data["usage"] (docs/storage.md);
        `"estimated": true` only on an estimate."""
        out: dict[str, Any] = {
            "input": self.prompt_tokens,
            "output": self.completion_tokens,
            "cache_read": self.cache_read_tokens,
            "cache_write": self.cache_write_tokens,
            "reasoning": self.reasoning_tokens,
        }
        if self.estimated:
            out["estimated"] = True
        return out

    @classmethod
    def from_json(cls, d: Any) -> Usage:
        if not isinstance(d, dict):
            return cls()

        def n(key: str) -> int:
            v = d.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0

        return cls(
            n("input"),
            n("output"),
            n("cache_read"),
            n("cache_write"),
            n("reasoning"),
            d.get("estimated") is True,
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
        out: dict[str, Any] = {
            "kind": "assistant",
            "text": m.text,
            "tool_calls": [c.to_json() for c in m.tool_calls],
        }
        if m.thinking:
            out["thinking"] = [b.to_json() for b in m.thinking]
        return out
    out = {
        "kind": "tool_result",
        "tool_call_id": m.tool_call_id,
        "name": m.name,
        "content": m.content,
        "is_error": m.is_error,
    }
    if m.images:
        out["images"] = [i.to_json() for i in m.images]
    return out
