"""[gateway] A protocol client's own message ids (AG-UI's, A2A's), recorded as the message's
`messageId` (docs/protocol.md) — the same record and deduplication as a WebSocket client's
acknowledged `message` — under a prefix naming the protocol (`agui:ID`, `a2a:ID`), so the
ids of different protocols never meet. A client sending its request again (its stream
dropped, the gateway was killed) finds its message in the record and is answered from it;
never run twice (`Runtime.send(message_id=...)`)."""

from __future__ import annotations

from collections.abc import Sequence

from xclaw.store.steps.model import Step, StepType


def protocol_id(prefix: str, client_id: str) -> str:
    """The id a protocol client's message is recorded under (`prefix` ends with `:`)."""
    return prefix + client_id


def client_ids(steps: Sequence[Step], prefix: str) -> dict[str, str]:
    """display id of a user_input step -> the client's own id it was recorded with (ids
    under `prefix`, e.g. `a2a:`)."""
    out: dict[str, str] = {}
    for s in steps:
        if s.step_type is not StepType.USER_INPUT or not isinstance(s.output_data, dict):
            continue
        recorded = s.output_data.get("messageId")
        if isinstance(recorded, str) and recorded.startswith(prefix):
            out[s.display_id] = recorded[len(prefix) :]
    return out
