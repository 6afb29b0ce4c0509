"""[runtime] What a client is shown of a session's conversation: the `history` frame
(docs/protocol.md), made from values (the runtime reads them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from xclaw.llm.context import SUMMARY_PREFIX
from xclaw.llm.messages import AssistantMessage, message_to_json
from xclaw.recorder.history import History, seed_history
from xclaw.recorder.redact import Redactor
from xclaw.store.steps.model import Step, StepStatus, StepType
from xclaw.views.record import fired_as, sent_by
from xclaw.wire.build import history_frame
from xclaw.wire.shapes import HistoryJson


def _name_senders(items: list[dict[str, Any]], steps: Sequence[Step]) -> None:
    """A user message a team member sent says who (`"user"`, docs/teams.md), one a schedule
    or webhook sent the fire it came from (`"fire"`, docs/schedules.md). The history's user
    messages are the last of the session's messages (compaction summarises the oldest ones
    away), so they pair with its message steps counted from the end."""
    inputs = [
        s for s in steps if s.step_type is StepType.USER_INPUT and s.status is StepStatus.COMPLETED
    ]
    users = [i for i in items if i["kind"] == "user"]
    for item, step in zip(reversed(users), reversed(inputs), strict=False):
        sender = sent_by(step)
        if sender is not None:
            item["user"] = sender
        fire = fired_as(step)
        if fire is not None:
            item["fire"] = fire


def session_history(
    session_id: str, steps: Sequence[Step], hist: History, *, busy: bool, redact: Redactor
) -> HistoryJson:
    """The `history` frame: `hist` (rebuilt from `steps` with new_input) as the original
    tutorial's `content` (*the seed*, docs/architecture.md glossary) and as structured
    messages, the calls of a run in flight shown running."""
    structured = []
    by_call = {s.call_id: s for s in steps if s.call_id and s.step_type.value == "tool_call"}
    # The calls of the turn in flight: those without a step yet wait for an approval (or
    # for their turn), not "never executed".
    last_calls = next(
        (
            {c.id for c in m.tool_calls}
            for m in reversed(hist.messages)
            if isinstance(m, AssistantMessage)
        ),
        set(),
    )
    for m in hist.messages:
        item = message_to_json(m)
        if item["kind"] == "user" and str(item.get("text", "")).startswith(SUMMARY_PREFIX):
            # What compaction put in place of the older turns: not something the user typed.
            item = {"kind": "summary", "text": item["text"][len(SUMMARY_PREFIX) :].strip()}
        if item["kind"] == "tool_result":
            call = by_call.get(item["tool_call_id"])
            if call is not None:
                item["stepId"] = call.display_id
            pending = (
                call.status is StepStatus.RUNNING if call else item["tool_call_id"] in last_calls
            )
            if busy and pending:
                # Still running or waiting (a refresh is not a crash): no result yet.
                item.update(running=True, content="", is_error=False)
        structured.append(item)
    _name_senders(structured, steps)

    return history_frame(
        # Redacted before it is JSON text (a secret with `"` in it is escaped there).
        json.dumps(redact(seed_history(hist.messages)), ensure_ascii=False),
        redact(structured),
        session_id,
    )
