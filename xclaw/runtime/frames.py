"""[runtime] The recorder's typed events as the server frames of docs/protocol.md.

The recorder knows nothing of the wire (xclaw/recorder/events.py); the runtime, which sends
frames to a session's subscribers, has them built here by xclaw/wire/build.py.
"""

from __future__ import annotations

from typing import assert_never

from xclaw.llm.prices import PriceTable
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
from xclaw.wire.build import (
    delta_frame,
    notice_frame,
    status_frame,
    step_frame,
    thinking_discarded_frame,
    thinking_frame,
    tool_frame,
)
from xclaw.wire.shapes import FrameJson


def event_frame(event: RecorderEvent, prices: PriceTable) -> FrameJson:
    """The frame (without `sessionId`, added by the runtime) that tells clients of `event`;
    an llm_call's step priced with `prices`."""
    if isinstance(event, StepCommitted):
        return step_frame(event.step, prices)
    if isinstance(event, ToolChanged):
        return tool_frame(
            event.step_id,
            event.name,
            event.input,
            event.state,
            output=event.output,
            agent=event.agent,
            call_id=event.call_id,
        )
    if isinstance(event, StatusChanged):
        return status_frame(event.status)
    if isinstance(event, TextDelta):
        return delta_frame(event.content)
    if isinstance(event, ThinkingShown):
        return thinking_frame([event.block])
    if isinstance(event, ThinkingDiscarded):
        return thinking_discarded_frame()
    if isinstance(event, Notice):
        return notice_frame(event.content)
    assert_never(event)
