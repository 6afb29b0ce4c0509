"""[agui] A user message that is a command (`/steps`, `/rollback …`, `/fork`:
xclaw/wire/session_commands.py) answered as AG-UI events instead of going to the model
(docs/ag-ui.md):

| the command's answer | events |
|---|---|
| a rollback rewound the session | MESSAGES_SNAPSHOT (the conversation as the record now has it) |
| its words (the notices) | TEXT_MESSAGE_START / CONTENT / END, an assistant message |
| `rollback_preview`, `rolledback`, `steps`, `forked` | CUSTOM `xclaw.rollback_preview`, … (the WebSocket's frame) |
| refused (a bad step, irreversible effects not accepted, busy, …) | RUN_ERROR with its code |

The snapshot comes first: the client's conversation is then the record's, followed by the
command's answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xclaw.agui.snapshot import messages_snapshot
from xclaw.agui.translate import Event
from xclaw.gateway.adapter_commands import Answered


def command_events(
    run_id: str, answered: Answered, redact: Callable[[Any], Any]
) -> tuple[list[Event], str]:
    """The events of a command's answer (between RUN_STARTED and the state), and its text
    (RUN_FINISHED's `result`)."""
    out: list[Event] = []
    if answered.history is not None:
        items = answered.history.get("messages")
        out.append(messages_snapshot(redact(items if isinstance(items, list) else [])))
    text = str(redact(answered.text))
    if text:
        mid = f"{run_id}:command"
        out += [
            {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
        ]
    for frame in answered.frames:
        out.append({"type": "CUSTOM", "name": f"xclaw.{frame.get('type')}", "value": redact(frame)})
    return out, text
