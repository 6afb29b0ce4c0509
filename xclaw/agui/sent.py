"""Which user message of an AG-UI client was sent, so a client sending its run again (its
stream dropped, the gateway was killed) never has its message run twice.

Write-ahead, as every effect in xclaw: before a client's message is handed to the runtime,
the session's metadata records its id and how many messages the record held then
(`SENT_KEY`). A run asked again with that message id is looked up in the record: more
messages than then, it was sent (the run is reconnected to); as many, the write that
sends it never happened, and it is sent now. Messages the record gave the client itself
(ids `xclaw:…`, MESSAGES_SNAPSHOT) are never new.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xclaw.agui.request import RECORD_ID_PREFIX
from xclaw.store.model import Step, StepStatus, StepType

SENT_KEY = "aguiSent"


def user_messages(steps: Sequence[Step]) -> int:
    return sum(
        1 for s in steps if s.step_type is StepType.USER_INPUT and s.status is StepStatus.COMPLETED
    )


def already_sent(metadata: Mapping[str, Any], message_id: str, steps: Sequence[Step]) -> bool:
    if message_id.startswith(RECORD_ID_PREFIX):
        return True
    sent = metadata.get(SENT_KEY)
    if not isinstance(sent, dict) or sent.get("messageId") != message_id:
        return False
    before = sent.get("messages")
    return isinstance(before, int) and user_messages(steps) > before


def with_intent(
    metadata: Mapping[str, Any], message_id: str, steps: Sequence[Step]
) -> dict[str, Any]:
    """`metadata` recording that `message_id` is about to be sent."""
    return {**metadata, SENT_KEY: {"messageId": message_id, "messages": user_messages(steps)}}
