"""[recorder] What the recorder tells the layer above while a run goes on: typed events, not wire
frames.

The recorder says *what happened* (a step was committed, a tool changed state, text streamed
in); the runtime turns each event into the server frame of docs/protocol.md
(`xclaw.runtime.frames.event_frame`) and sends it. Text in an event is already redacted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from xclaw.store.steps.model import Status, Step

ToolState = Literal["running", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class StepCommitted:
    """A step row was written (begun, completed or failed): the `step` frame."""

    step: Step


@dataclass(frozen=True, slots=True)
class ToolChanged:
    """A tool call started, finished or was refused: the `tool` frame. `agent` is None for
    the main agent, a sub-agent's id otherwise."""

    step_id: str  # display id of the tool_call step
    name: str
    input: Any
    state: ToolState
    output: str | None = None
    agent: str | None = None
    call_id: str | None = None  # the assistant tool call it answers (as recorded)


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """The session's status after a committed write (approval asked/decided, final answer)."""

    status: Status


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Streamed answer text of the main agent: the `delta` frame."""

    content: str


@dataclass(frozen=True, slots=True)
class ThinkingShown:
    """One reasoning block of the main agent, as ThinkingBlock.to_json: the `thinking` frame."""

    block: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ThinkingDiscarded:
    """The main agent's thinking shown since its model call began came from an attempt that
    failed and is made again: the `thinking_discarded` frame."""


@dataclass(frozen=True, slots=True)
class Notice:
    """A line for the user (a compaction, a sub-agent's interrupted call): the `notice` frame."""

    content: str


RecorderEvent = (
    StepCommitted
    | ToolChanged
    | StatusChanged
    | TextDelta
    | ThinkingShown
    | ThinkingDiscarded
    | Notice
)
EventSink = Callable[[RecorderEvent], None]
