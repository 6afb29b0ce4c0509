"""Which message of a protocol client (AG-UI, A2A) the record holds, by the client's own
message id: so a client sending its request again — its stream dropped, the gateway was
killed — never has its message run twice, and an A2A task shows the message id it came with.

Recorded with the message itself: the write that opens the message's turn also sets, in the
session's metadata, the client's id and the last step the session had before
(`CLIENT_MESSAGES_KEY`: `{"agui:ID": {"after": SEQ}}`; Runtime.send's `metadata`). Step ids
are never reused, so the message's own step is the first `user_input` step after that one:
found, the message was sent (the request is answered from the record); not found, it never
was, and it is sent now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xclaw.store.model import Step, StepStatus, StepType

CLIENT_MESSAGES_KEY = "clientMessages"
MAX_REMEMBERED = 200  # per session: the newest (a client retries its latest messages)


def _entries(metadata: Mapping[str, Any]) -> dict[str, Any]:
    raw = metadata.get(CLIENT_MESSAGES_KEY)
    return raw if isinstance(raw, dict) else {}


def _first_message_after(after: int, steps: Sequence[Step]) -> Step | None:
    for s in steps:
        if (
            s.seq > after
            and s.step_type is StepType.USER_INPUT
            and s.status is StepStatus.COMPLETED
        ):
            return s
    return None


def message_step(metadata: Mapping[str, Any], key: str, steps: Sequence[Step]) -> Step | None:
    """The user_input step that recorded the client's message `key` (e.g. `agui:<id>`);
    None: it was never sent (or a rollback removed it)."""
    entry = _entries(metadata).get(key)
    after = entry.get("after") if isinstance(entry, dict) else None
    if not isinstance(after, int):
        return None
    return _first_message_after(after, steps)


def message_ids(metadata: Mapping[str, Any], prefix: str, steps: Sequence[Step]) -> dict[str, str]:
    """display id of a user_input step -> the client message id it recorded (ids under
    `prefix`, e.g. `a2a:`)."""
    out: dict[str, str] = {}
    for key, entry in _entries(metadata).items():
        if not key.startswith(prefix) or not isinstance(entry, dict):
            continue
        after = entry.get("after")
        step = _first_message_after(after, steps) if isinstance(after, int) else None
        if step is not None:
            out.setdefault(step.display_id, key[len(prefix) :])
    return out


def with_intent(metadata: Mapping[str, Any], key: str, steps: Sequence[Step]) -> dict[str, Any]:
    """`metadata` recording that message `key` is about to be sent after `steps` (the
    session's steps now)."""
    after = max((s.seq for s in steps), default=0)
    entries = {k: v for k, v in _entries(metadata).items() if k != key}
    entries[key] = {"after": after}
    if len(entries) > MAX_REMEMBERED:
        ordered = sorted(entries.items(), key=lambda kv: _after(kv[1]))
        entries = dict(ordered[-MAX_REMEMBERED:])
    return {**metadata, CLIENT_MESSAGES_KEY: entries}


def intent(metadata: Mapping[str, Any], key: str, steps: Sequence[Step]) -> dict[str, Any]:
    """The metadata keys to write with message `key` (Runtime.send's `metadata`: in the
    same transaction as the message itself)."""
    return {CLIENT_MESSAGES_KEY: with_intent(metadata, key, steps)[CLIENT_MESSAGES_KEY]}


def _after(entry: Any) -> int:
    after = entry.get("after") if isinstance(entry, dict) else None
    return after if isinstance(after, int) else 0
