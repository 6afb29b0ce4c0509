"""[wire] Every server frame's JSON object as a TypedDict: the keys its class in
xclaw/wire/frames.py declares (by alias), so mypy checks each builder in xclaw/wire/build.py against
the declaration. tests/wire/test_build.py holds each one to its class.

`sessionId` is optional in all of them: the runtime's builders make a frame once and the
runtime adds the session as it sends it to the session's clients (`for_session`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

StatusWord = Literal["Init", "Running", "Paused", "Success", "Failed"]
StepStatusWord = Literal["running", "completed", "failed"]


class TokensJson(TypedDict):
    prompt: int | None
    completion: int | None


class StepJson(TypedDict):
    """A step as every client sees it (xclaw.wire.frames.Step)."""

    id: str
    stepId: str
    seq: int
    parent: str | None
    type: str
    name: str
    status: str
    agent: str
    input: Any
    output: Any
    error: str | None
    startTime: int
    endTime: int | None
    durationMs: int | None
    tokens: TokensJson
    usage: NotRequired[dict[str, Any]]
    cost: NotRequired[float | None]


class SessionJson(TypedDict):
    type: Literal["session"]
    sessionId: str
    status: str
    title: str
    isForked: bool
    parentSessionId: str | None
    awaitingInput: bool
    state: str
    stateText: str
    created: bool
    agent: NotRequired[str]
    user: NotRequired[str]


class HistoryJson(TypedDict):
    type: Literal["history"]
    sessionId: NotRequired[str]
    content: str
    messages: list[dict[str, Any]]


class StatusJson(TypedDict):
    type: Literal["status"]
    sessionId: NotRequired[str]
    status: str
    busy: NotRequired[bool]
    awaitingInput: NotRequired[bool]
    state: NotRequired[str]
    stateText: NotRequired[str]
    budget: NotRequired[dict[str, Any]]


class RenamedJson(TypedDict):
    type: Literal["renamed"]
    sessionId: NotRequired[str]
    title: str


class DeltaJson(TypedDict):
    type: Literal["delta"]
    sessionId: NotRequired[str]
    content: str


class ThinkingJson(TypedDict):
    type: Literal["thinking"]
    sessionId: NotRequired[str]
    content: str
    redacted: int


class ThinkingDiscardedJson(TypedDict):
    type: Literal["thinking_discarded"]
    sessionId: NotRequired[str]


class ReplyJson(TypedDict):
    type: Literal["reply"]
    sessionId: NotRequired[str]
    content: str
    output: NotRequired[Any]
    agent: NotRequired[str]


class ToolJson(TypedDict):
    type: Literal["tool"]
    sessionId: NotRequired[str]
    stepId: str
    name: str
    input: Any
    state: str
    output: NotRequired[Any]
    agent: NotRequired[str]
    callId: NotRequired[str]


class ApprovalRequestJson(TypedDict):
    type: Literal["approval_request"]
    sessionId: NotRequired[str]
    stepId: str
    name: str
    input: Any
    reason: str
    maybeRepeated: bool
    agent: NotRequired[str]
    callId: NotRequired[str]


class StepFrameJson(TypedDict):
    type: Literal["step"]
    sessionId: NotRequired[str]
    step: StepJson


class NoticeJson(TypedDict):
    type: Literal["notice"]
    sessionId: NotRequired[str]
    content: str


class StepsJson(TypedDict):
    type: Literal["steps"]
    sessionId: NotRequired[str]
    steps: list[StepJson]


class ForkedJson(TypedDict):
    type: Literal["forked"]
    sessionId: str
    fromSessionId: str
    fromStepId: str
    title: str


class RolledBackJson(TypedDict):
    type: Literal["rolledback"]
    sessionId: NotRequired[str]
    stepId: str
    deleted: int
    # After a rollback past outside effects (xclaw.wire.frames.CompensatedInfo, OutsideEffectInfo).
    compensated: NotRequired[list[dict[str, Any]]]
    notUndone: NotRequired[list[dict[str, Any]]]


class RollbackPreviewJson(TypedDict):
    type: Literal["rollback_preview"]
    sessionId: str
    stepId: str
    compensable: list[dict[str, Any]]
    irreversible: list[dict[str, Any]]
    undoneAlready: list[dict[str, Any]]
    pending: NotRequired[dict[str, Any] | None]


class ErrorJson(TypedDict):
    type: Literal["error"]
    content: str
    code: str
    sessionId: NotRequired[str]
    messageId: NotRequired[str]


class AckJson(TypedDict):
    type: Literal["ack"]
    sessionId: str
    messageId: str
    stepId: str
    duplicate: bool


class PongJson(TypedDict):
    type: Literal["pong"]


class QueuedMessageJson(TypedDict):
    id: str
    busy: str
    content: str
    at: int
    user: NotRequired[str]
    agent: NotRequired[str]


class QueueJson(TypedDict):
    type: Literal["queue"]
    sessionId: NotRequired[str]
    queued: list[QueuedMessageJson]


class QueuedJson(TypedDict):
    type: Literal["queued"]
    sessionId: str
    messageId: str
    busy: str
    duplicate: bool


FrameJson = (
    SessionJson
    | HistoryJson
    | StatusJson
    | RenamedJson
    | DeltaJson
    | ThinkingJson
    | ThinkingDiscardedJson
    | ReplyJson
    | ToolJson
    | ApprovalRequestJson
    | StepFrameJson
    | NoticeJson
    | StepsJson
    | ForkedJson
    | RolledBackJson
    | RollbackPreviewJson
    | ErrorJson
    | AckJson
    | PongJson
    | QueueJson
    | QueuedJson
)
"""Any server frame as built (xclaw/wire/build.py)."""

Frame = Mapping[str, Any]
"""A server frame on its way to clients: one built here (a `FrameJson`), or one another
worker built, received over the bus (xclaw/runtime/cluster.py) and passed on unread."""
