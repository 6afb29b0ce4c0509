"""[wire] The one place a server frame is made (docs/protocol.md).

Each builder returns the frame's JSON object typed by its TypedDict (xclaw/wire/shapes.py), so
mypy checks its keys against the declaration in xclaw/wire/frames.py; tests/wire/test_build.py
holds every builder's output to that declaration, and tests/test_layering.py forbids a frame
built anywhere else. Builders take values, never a store or a runtime: what a frame says is
decided by its caller, how it is spelled here.

Frames of a session's run are made without `sessionId`; the runtime adds it as it sends them
to the session's clients (`for_session`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import BUDGET_KEY, MAIN_AGENT, Session, Status, Step, session_state
from xclaw.wire.protocol import session_agent, step_json
from xclaw.wire.shapes import (
    AckJson,
    ApprovalRequestJson,
    DeltaJson,
    ErrorJson,
    ForkedJson,
    FrameJson,
    HistoryJson,
    NoticeJson,
    PongJson,
    QueuedJson,
    QueuedMessageJson,
    QueueJson,
    RenamedJson,
    ReplyJson,
    RollbackPreviewJson,
    RolledBackJson,
    SessionJson,
    StatusJson,
    StepFrameJson,
    StepsJson,
    ThinkingDiscardedJson,
    ThinkingJson,
    ToolJson,
)

F = TypeVar("F", bound=FrameJson)


def for_session(frame: F, session_id: str) -> F:
    """`frame` as sent to the clients of `session_id` (a copy with `sessionId`)."""
    return cast(F, {**frame, "sessionId": session_id})


# --- attaching -------------------------------------------------------------------------------


def session_frame(
    s: Session,
    *,
    created: bool,
    busy: bool = False,
    user: str | None = None,
    agent: str | None = None,
) -> SessionJson:
    """What a socket is attached to; `user`: whom it is signed in as (docs/teams.md);
    `agent`: the declared agent it runs (docs/agents.md; by default the one it records)."""
    state = session_state(s, busy=busy)
    frame: SessionJson = {
        "type": "session",
        "sessionId": s.session_id,
        "status": s.status.value,
        "title": s.title,
        "isForked": s.is_forked,
        "parentSessionId": s.parent_session_id,
        "awaitingInput": s.awaiting_input,
        "state": state.key,
        "stateText": state.text,
        "created": created,
    }
    agent = agent or session_agent(s.metadata)
    if agent is not None:
        frame["agent"] = agent
    if user is not None:
        frame["user"] = user
    return frame


def history_frame(
    content: str, messages: list[dict[str, Any]], session_id: str | None = None
) -> HistoryJson:
    """The conversation: `content` the original tutorial's JSON string of [{role, content}],
    `messages` the same as structured objects (xclaw/runtime/session_frames.py makes both)."""
    frame: HistoryJson = {"type": "history", "content": content, "messages": messages}
    if session_id is not None:
        frame["sessionId"] = session_id
    return frame


def status_frame(status: Status) -> StatusJson:
    """The state machine moved."""
    return {"type": "status", "status": status.value}


def state_frame(session: Session, *, busy: bool) -> StatusJson:
    """A `status` frame with the session's state in words (xclaw.store.steps.model.session_state):
    the last frame of an attach, and after a rollback or a cancel."""
    state = session_state(session, busy=busy)
    frame: StatusJson = {
        "type": "status",
        "status": session.status.value,
        "awaitingInput": session.awaiting_input,
        "busy": busy,
        "state": state.key,
        "stateText": state.text,
    }
    if state.key == "budget":  # which cap, what was spent, what is left (docs/budgets.md)
        frame["budget"] = dict(session.metadata[BUDGET_KEY])
    return frame


def renamed_frame(title: str) -> RenamedJson:
    return {"type": "renamed", "title": title}


# --- a run -----------------------------------------------------------------------------------


def delta_frame(content: str) -> DeltaJson:
    return {"type": "delta", "content": content}


def reply_frame(content: str, *, output: Any = None, agent: str | None = None) -> ReplyJson:
    """The final answer of a turn (its text redacted by the caller); `output`: a declared
    agent's validated answer (docs/agents.md); `agent`: the declared agent that answered."""
    frame: ReplyJson = {"type": "reply", "content": content}
    if output is not None:
        frame["output"] = output
    if agent is not None:
        frame["agent"] = agent
    return frame


def thinking_frame(blocks: Iterable[Mapping[str, Any]]) -> ThinkingJson:
    """The model's reasoning before its answer: the text of its thinking blocks (already
    redacted), and how many were redacted_thinking blocks, whose content the provider keeps
    encrypted. Clients show it folded."""
    blocks = list(blocks)
    return {
        "type": "thinking",
        "content": "\n\n".join(str(b.get("thinking") or "") for b in blocks if b.get("thinking")),
        "redacted": sum(1 for b in blocks if b.get("type") == "redacted_thinking"),
    }


def thinking_discarded_frame() -> ThinkingDiscardedJson:
    return {"type": "thinking_discarded"}


def tool_frame(
    step_id: str,
    name: str,
    input: Any,
    state: str,
    *,
    output: Any = None,
    agent: str | None = None,
    call_id: str | None = None,
) -> ToolJson:
    """Tool progress; `agent`: a sub-agent's tool (its spawn step); `call_id`: the model's id
    of the call, as the record holds it."""
    frame: ToolJson = {
        "type": "tool",
        "stepId": step_id,
        "name": name,
        "input": input,
        "state": state,
    }
    if output is not None:
        frame["output"] = output
    if agent is not None:
        frame["agent"] = agent
    if call_id is not None:
        frame["callId"] = call_id
    return frame


def approval_request_frame(
    step_id: str,
    name: str,
    input: Any,
    reason: str,
    *,
    maybe_repeated: bool,
    agent: str = MAIN_AGENT,
    call_id: str | None = None,
) -> ApprovalRequestJson:
    """A call a person must allow; `agent`: whose call it is (the main agent's carries none)."""
    frame: ApprovalRequestJson = {
        "type": "approval_request",
        "stepId": step_id,
        "name": name,
        "input": input,
        "reason": reason,
        "maybeRepeated": maybe_repeated,
    }
    if agent != MAIN_AGENT:
        frame["agent"] = agent
    if call_id is not None:
        frame["callId"] = call_id
    return frame


def step_frame(step: Step, prices: PriceTable) -> StepFrameJson:
    """A trace row was written or changed (the live trace view); an llm_call priced with
    `prices`."""
    return {"type": "step", "step": step_json(step, prices)}


# --- commands and notices --------------------------------------------------------------------


def notice_frame(content: str, session_id: str | None = None) -> NoticeJson:
    """Text for people: command results and runtime notices."""
    frame: NoticeJson = {"type": "notice", "content": content}
    if session_id is not None:
        frame["sessionId"] = session_id
    return frame


def steps_frame(session_id: str, steps: Sequence[Step], prices: PriceTable) -> StepsJson:
    """The structured result of `/steps`."""
    return {
        "type": "steps",
        "sessionId": session_id,
        "steps": [step_json(s, prices) for s in steps],
    }


def forked_frame(new_id: str, from_session_id: str, from_step_id: str, title: str) -> ForkedJson:
    """The structured result of `/fork`; `sessionId` is the new session."""
    return {
        "type": "forked",
        "sessionId": new_id,
        "fromSessionId": from_session_id,
        "fromStepId": from_step_id,
        "title": title,
    }


def rollback_notice(step_id: str, *, by: str | None = None) -> str:
    """What every client of a session is told when it is rolled back; `by`: who did it,
    when it was not the server the client is attached to."""
    text = f"[rollback] session reset to before step {step_id} — send your new instruction"
    return text if by is None else f"{text} (rolled back outside this server, by {by})"


def rolledback_frame(
    step_id: str,
    deleted: int,
    session_id: str | None = None,
    *,
    compensated: list[dict[str, Any]] | None = None,
    not_undone: list[dict[str, Any]] | None = None,
) -> RolledBackJson:
    """A rollback happened: the session now ends just before `step_id`. After a rollback
    past outside effects: the compensations that ran, and the effects left done."""
    frame: RolledBackJson = {"type": "rolledback", "stepId": step_id, "deleted": deleted}
    if session_id is not None:
        frame["sessionId"] = session_id
    if compensated is not None:
        frame["compensated"] = compensated
    if not_undone is not None:
        frame["notUndone"] = not_undone
    return frame


def rollback_preview_frame(preview: Mapping[str, Any]) -> RollbackPreviewJson:
    """What `/rollback sNNNN --confirm` would undo and leave done (`preview`: the runtime's
    `Preview.as_json()`: sessionId, stepId, compensable, irreversible, undoneAlready and a
    pending rollback): nothing is done yet."""
    frame: RollbackPreviewJson = {
        "type": "rollback_preview",
        "sessionId": str(preview["sessionId"]),
        "stepId": str(preview["stepId"]),
        "compensable": list(preview["compensable"]),
        "irreversible": list(preview["irreversible"]),
        "undoneAlready": list(preview["undoneAlready"]),
    }
    if "pending" in preview:
        frame["pending"] = preview["pending"]
    return frame


def error_frame(
    content: str, code: str, session_id: str | None = None, *, message_id: str | None = None
) -> ErrorJson:
    """A human-readable error with a stable code (docs/protocol.md, Errors); `message_id`:
    the refusal of the `message` frame that carried it."""
    frame: ErrorJson = {"type": "error", "content": content, "code": code}
    if session_id:
        frame["sessionId"] = session_id
    if message_id is not None:
        frame["messageId"] = message_id
    return frame


def ack_frame(session_id: str, message_id: str, step_id: str, duplicate: bool) -> AckJson:
    """A `message` frame that carried `message_id` is recorded (durably) as `step_id`;
    `duplicate`: it was recorded before (a resend), not run again."""
    return {
        "type": "ack",
        "sessionId": session_id,
        "messageId": message_id,
        "stepId": step_id,
        "duplicate": duplicate,
    }


def queue_frame(queued: Sequence[Mapping[str, Any]]) -> QueueJson:
    """The session's waiting messages in the order they run (`QueuedInput.to_json` each)."""
    return {"type": "queue", "queued": [cast(QueuedMessageJson, dict(q)) for q in queued]}


def queued_frame(session_id: str, message_id: str, busy: str, duplicate: bool) -> QueuedJson:
    """A `message` frame that carried `message_id` was kept (durably) to run later or to
    steer the run; `duplicate`: it was kept before (a resend)."""
    return {
        "type": "queued",
        "sessionId": session_id,
        "messageId": message_id,
        "busy": busy,
        "duplicate": duplicate,
    }


# What a client that gave its message no id is told when it was kept (a terminal client, the
# page): they show the session's queue from its `queue` frame.
QUEUED_NOTICES = {
    "queue": "[queue] the agent is busy: your message waits and runs after the run in flight",
    "steer": "[queue] the agent is busy: your message goes to it at its next tool call",
    "interrupt": "[queue] stopping the run in flight: your message runs next",
}


def queued_notice(mode: str, session_id: str) -> NoticeJson:
    return notice_frame(QUEUED_NOTICES.get(mode, QUEUED_NOTICES["queue"]), session_id)


def pong_frame() -> PongJson:
    return {"type": "pong"}
