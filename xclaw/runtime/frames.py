"""The recorder's typed events as the server frames of docs/protocol.md.

The recorder knows nothing of the wire (xclaw/recorder/events.py); the runtime, which sends
frames to a session's subscribers, shapes them here with the builders of xclaw/protocol.py.
"""

from __future__ import annotations

from typing import Any, assert_never

from xclaw.protocol import notice_frame, step_json, thinking_frame
from xclaw.recorder.events import (
    Notice,
    RecorderEvent,
    StatusChanged,
    StepCommitted,
    TextDelta,
    ThinkingDiscarded,
    ThinkingShown,
    ToolChanged,
)


def event_frame(event: RecorderEvent) -> dict[str, Any]:
    """The frame (without `sessionId`, added by the runtime) that tells clients of `event`."""
    if isinstance(event, StepCommitted):
        return {"type": "step", "step": step_json(event.step)}
    if isinstance(event, ToolChanged):
        frame: dict[str, Any] = {
            "type": "tool",
            "stepId": event.step_id,
            "name": event.name,
            "input": event.input,
            "state": event.state,
        }
        if event.output is not None:
            frame["output"] = event.output
        if event.agent is not None:
            frame["agent"] = event.agent
        if event.call_id is not None:
            frame["callId"] = event.call_id
        return frame
    if isinstance(event, StatusChanged):
        return {"type": "status", "status": event.status.value}
    if isinstance(event, TextDelta):
        return {"type": "delta", "content": event.content}
    if isinstance(event, ThinkingShown):
        return thinking_frame([event.block])
    if isinstance(event, ThinkingDiscarded):
        return {"type": "thinking_discarded"}
    if isinstance(event, Notice):
        return notice_frame(event.content)
    assert_never(event)
