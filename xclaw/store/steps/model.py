"""[store/steps] Pure values of the durable record: sessions, steps, statuses and step addressing.

Identity and transactions belong to the store; these are plain frozen values that every layer
may pass around without touching a database.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from xclaw.budgets.words import words
from xclaw.errors import IllegalTransition, StepNotFound
from xclaw.store.steps.columns import Kind, column


class Status(enum.StrEnum):
    """A session's state machine (docs/architecture.md), stored as the tutorial's words."""

    INIT = "Init"
    RUNNING = "Running"
    PAUSED = "Paused"
    SUCCESS = "Success"
    FAILED = "Failed"


# The original tutorial's state machine (*the seed*, docs/architecture.md glossary) plus the
# documented extensions ("checked transitions", docs/architecture.md):
#   Failed -> Running   an explicit resume or a new user message after an error
#   Success -> Running  a new user message after a final answer
#   Running -> Running  a BeginStep while already running (a no-op, not a write)
#   Paused -> Paused    a second approval request while paused (parallel sub-agents)
#   Init -> Failed      a session that could not even start (e.g. no model configured)
#   Paused -> Success   never: a pending approval must be answered first
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.INIT: frozenset({Status.RUNNING, Status.FAILED}),
    Status.RUNNING: frozenset({Status.RUNNING, Status.PAUSED, Status.SUCCESS, Status.FAILED}),
    Status.PAUSED: frozenset({Status.PAUSED, Status.RUNNING, Status.FAILED}),
    Status.SUCCESS: frozenset({Status.RUNNING}),
    Status.FAILED: frozenset({Status.RUNNING}),
}


def check_transition(current: Status, target: Status) -> None:
    """Raise IllegalTransition unless `current -> target` is in TRANSITIONS."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(current.value, target.value)


class SessionEvent(enum.StrEnum):
    """What happened to a session, as the store sees it: the input of `next_status`.

    The store names the event from facts of the same transaction (the step's kind, whether
    another approval is still pending); `next_status` alone decides the status it leads to.
    """

    RUN_STARTED = "run_started"  # a step begins, an instruction arrives, a run resumes
    STEP_BESIDE_APPROVAL = "step_beside_approval"  # a step while another approval is pending
    APPROVAL_ASKED = "approval_asked"  # a pending approval step begins
    APPROVAL_ANSWERED = "approval_answered"  # the last pending approval got its answer
    RUN_SUCCEEDED = "run_succeeded"  # the main agent's final answer
    RUN_FAILED = "run_failed"  # the run cannot go on (model error, max iterations, ...)
    RUN_CANCELLED = "run_cancelled"  # stopped by the user: waits for the next instruction
    ROLLED_BACK = "rolled_back"  # steps deleted: waits for the next instruction


# The status each event aims at; next_status checks the move against TRANSITIONS, so an
# illegal pair raises IllegalTransition(current, aim), as a direct move would.
_AIM: dict[SessionEvent, Status] = {
    SessionEvent.RUN_STARTED: Status.RUNNING,
    SessionEvent.STEP_BESIDE_APPROVAL: Status.RUNNING,
    SessionEvent.APPROVAL_ASKED: Status.PAUSED,
    SessionEvent.APPROVAL_ANSWERED: Status.RUNNING,
    SessionEvent.RUN_SUCCEEDED: Status.SUCCESS,
    SessionEvent.RUN_FAILED: Status.FAILED,
    SessionEvent.RUN_CANCELLED: Status.RUNNING,
    SessionEvent.ROLLED_BACK: Status.RUNNING,
}

# Pairs that keep the status instead of aiming: a sub-agent's step leaves a Paused session
# Paused while an approval is pending; an answer unpauses only a Paused session.
_STAYS: frozenset[tuple[Status, SessionEvent]] = frozenset(
    {(Status.PAUSED, SessionEvent.STEP_BESIDE_APPROVAL)}
    | {(s, SessionEvent.APPROVAL_ANSWERED) for s in Status if s is not Status.PAUSED}
)

# Events after which a Running session waits for the user's next instruction (and is not
# resumed on reconnect); an instruction (a user_input step) clears the wait.
WAITING_EVENTS = frozenset({SessionEvent.RUN_CANCELLED, SessionEvent.ROLLED_BACK})

# The event a direct `Store.transition(session, target)` stands for (Init is never a target).
EVENT_FOR_TARGET: dict[Status, SessionEvent] = {
    Status.RUNNING: SessionEvent.RUN_STARTED,
    Status.PAUSED: SessionEvent.APPROVAL_ASKED,
    Status.SUCCESS: SessionEvent.RUN_SUCCEEDED,
    Status.FAILED: SessionEvent.RUN_FAILED,
}


def next_status(current: Status, event: SessionEvent) -> Status:
    """The status `event` moves a `current` session to: the one status rule of the store.

    Pure: every status write of both backends asks it first (`_write_status`), so an illegal
    move raises IllegalTransition before anything is written.
    """
    if (current, event) in _STAYS:
        return current
    target = _AIM[event]
    check_transition(current, target)
    return target


def waiting_after(event: SessionEvent | None, *, instruction: bool) -> bool | None:
    """The awaiting_input flag after `event` (None: unchanged): set by a cancel or a rollback,
    cleared by the user's next instruction."""
    if event in WAITING_EVENTS:
        return True
    if instruction:
        return False
    return None


def event_for_target(current: Status, target: Status) -> SessionEvent:
    """The event of a direct move to `target`; IllegalTransition for a move to Init."""
    event = EVENT_FOR_TARGET.get(target)
    if event is None:
        raise IllegalTransition(current.value, target.value)
    return event


class StepType(enum.StrEnum):
    LLM_CALL = "llm_call"
    TOOL_CALL = "tool_call"
    USER_INPUT = "user_input"
    SYSTEM_ALERT = "system_alert"


class StepStatus(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


# Error text written on a step that was running when its process died (nothing lost).
INTERRUPTED = "interrupted"

MAIN_AGENT = "main"

# A pending human approval is a `system_alert` step with this name: while it is running the
# session is Paused (approval asked again after a restart).
APPROVAL_STEP_NAME = "approval"


def is_approval(step_type: StepType | str, name: str) -> bool:
    # A StrEnum equals its value: one string comparison (asked of every step written).
    return name == APPROVAL_STEP_NAME and step_type == "system_alert"


# A rollback that undoes outside effects (xclaw/runtime/rollbacks.py) is a durable process
# recorded as steps: its plan, a `system_alert` `rollback` (running until the rewind
# completes it, or a person abandons it), and one `system_alert` `compensation` per effect
# undone (write-ahead, like a tool call). Rollback keeps both kinds (they are the record of
# what was undone, by whom and when); `mark_interrupted` leaves a pending plan running.
ROLLBACK_PLAN = "rollback"
COMPENSATION = "compensation"
UNDO_STEPS = (ROLLBACK_PLAN, COMPENSATION)


def is_undo_step(step_type: StepType | str, name: str) -> bool:
    """A rollback's plan or one of its compensations (kept by every rollback)."""
    return step_type == "system_alert" and name in UNDO_STEPS


# ASCII digits only: `\d` would read "\u0661" (Arabic-Indic one) as step 1.
_DISPLAY_RE = re.compile(r"^[sS]?([0-9]{1,12})$")


def display_id(seq: int) -> str:
    """`s0001` for seq 1; wider ids simply grow (`s12345`)."""
    return f"s{seq:04d}"


def full_step_id(session_id: str, seq: int) -> str:
    """The primary key of a trace row: unique across sessions, derived from the sequence
    number so a fork can remap ids and parent links with plain string arithmetic."""
    return f"{session_id}:{display_id(seq)}"


def parse_step_ref(ref: str | int, session_id: str) -> int:
    """Turn `s0005`, `5` or the full step id of *this* session into a sequence number.

    A malformed reference or a full id of another session raises StepNotFound (`bad_step`):
    never a silent no-op.
    """
    if isinstance(ref, bool):
        raise StepNotFound(str(ref), session_id)
    if isinstance(ref, int):
        if ref < 1:
            raise StepNotFound(str(ref), session_id)
        return ref
    text = str(ref).strip()
    if ":" in text:
        owner, _, tail = text.rpartition(":")
        if owner != session_id:
            raise StepNotFound(text, session_id, foreign=True)
        text = tail
    m = _DISPLAY_RE.match(text)
    if not m or int(m.group(1)) < 1:
        raise StepNotFound(str(ref), session_id)
    return int(m.group(1))


# sessions.metadata key: the directory a session works in when it is not the default
# `<workspace root>/<session id>/` — an editor's project (`xclaw acp`, docs/workspace.md).
# Absent for every other session. A fork does not inherit it (xclaw/store/steps/timetravel.py).
OWN_WORKSPACE_KEY = "workspace"


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A row of `sessions`: each field declared with `column()` is a column of it
    (store/steps/columns.py; docs/storage.md, "Adding a column")."""

    session_id: str = column(Kind.TEXT, export="sessionId")
    title: str = column(Kind.TEXT, export="title")
    status: Status = column(Kind.ENUM, name="current_status", export="status", enum=Status)
    created_at: int = column(export="createdAt")
    updated_at: int = column(export="updatedAt")
    metadata: dict[str, Any] = column(Kind.JSON, default_factory=dict, export="metadata")
    is_forked: bool = column(Kind.FLAG, default=False, export="isForked")
    parent_session_id: str | None = column(Kind.TEXT, default=None, export="parentSessionId")
    # Set by rollback: the session is Running but waits for a new instruction, so a
    # reconnect must not auto-resume it.
    awaiting_input: bool = column(Kind.FLAG, default=False, export="awaitingInput")
    # The fork point in the parent session (sequence number), for branch comparison.
    forked_from_seq: int | None = column(default=None, export="forkedFromSeq")

    # What export lines carry besides the columns: values computed from them (columns.py).
    EXPORTED: ClassVar[dict[str, str]] = {
        "forkedFrom": "forked_from",
        "state": "state_key",
        "stateText": "state_text",
    }

    @property
    def forked_from(self) -> str | None:
        """The fork point's display id (s0005)."""
        return display_id(self.forked_from_seq) if self.forked_from_seq else None

    @property
    def state_key(self) -> str:
        """What the session is doing, for code (no run in flight: `session_state`)."""
        return session_state(self, busy=False).key

    @property
    def state_text(self) -> str:
        """The same in words."""
        return session_state(self, busy=False).text


@dataclass(frozen=True, slots=True)
class SessionState:
    """What a session is doing, for people: `key` for code and CSS, `text` in words."""

    key: str  # running | paused | waiting | budget | interrupted | new | success | failed
    text: str


def session_state(session: Session, *, busy: bool) -> SessionState:
    """The one rule every client and listing shows (docs/protocol.md, "Session state")."""
    budget = session.metadata.get(BUDGET_KEY) if session.awaiting_input else None
    return state_of(
        session.status,
        busy=busy,
        awaiting_input=session.awaiting_input,
        forked=session.is_forked,
        budget=budget if isinstance(budget, dict) else None,
    )


# sessions.metadata key: the budget cap a session stopped at (docs/budgets.md), kept while it
# waits for a grant or a raised cap.
BUDGET_KEY = "budget"


def state_of(
    status: Status,
    *,
    busy: bool,
    awaiting_input: bool = False,
    forked: bool = False,
    budget: Mapping[str, Any] | None = None,
) -> SessionState:
    """session_state from the fields it reads, for what holds them without a Session (a
    lease in `xclaw workers`).

    Running only while a run is in flight (`busy`: this server's run or a live lease).
    A session stopped for the user's next instruction — after a cancel, a rollback, a new
    fork — is `waiting`; stored Running with no run anywhere means a crash interrupted it
    (it resumes when a client opens it). Paused waits for an approval answer.
    """
    if status is Status.PAUSED:
        return SessionState("paused", "Paused · waiting for your approval")
    if busy:
        return SessionState("running", "Running")
    if status is Status.RUNNING:
        if awaiting_input and budget is not None:
            return SessionState("budget", f"Budget reached · {words(budget)}")
        if awaiting_input:
            return SessionState("waiting", "Waiting for your instruction")
        return SessionState("interrupted", "Interrupted · resumes when opened")
    if status is Status.INIT:
        if forked:
            return SessionState("waiting", "Waiting for your instruction")
        return SessionState("new", "New")
    if status is Status.SUCCESS:
        return SessionState("success", "Success")
    return SessionState("failed", "Failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """A row of `traces`: each field declared with `column()` is a column of it
    (store/steps/columns.py; docs/storage.md, "Adding a column"). The session is implied by the
    export line's session; the parent is written as its display id (`EXPORTED`)."""

    # What export lines carry besides the columns: values computed from them (columns.py).
    EXPORTED: ClassVar[dict[str, str]] = {
        "id": "display_id",
        "parent": "parent_display_id",
        "durationMs": "duration_ms",
    }

    step_id: str = column(Kind.TEXT, export="stepId")
    session_id: str = column(Kind.TEXT)
    seq: int = column(export="seq")
    parent_step_id: str | None = column(Kind.TEXT)
    step_type: StepType = column(Kind.ENUM, export="type", enum=StepType)
    name: str = column(Kind.TEXT, export="name")
    status: StepStatus = column(Kind.ENUM, export="status", enum=StepStatus)
    agent: str = column(Kind.TEXT, default=MAIN_AGENT, export="agent")
    call_id: str | None = column(Kind.TEXT, default=None, export="callId")
    input_data: Any = column(Kind.JSON, default=None, export="input")
    output_data: Any = column(Kind.JSON, default=None, export="output")
    error_message: str | None = column(Kind.TEXT, default=None, export="error")
    start_time: int = column(default=0, export="startTime")
    end_time: int | None = column(default=None, export="endTime")
    # NULL: the provider reported no count (unknown, never 0)
    token_usage_prompt: int | None = column(default=0, export="tokens.prompt")
    token_usage_completion: int | None = column(default=0, export="tokens.completion")

    @property
    def display_id(self) -> str:
        return display_id(self.seq)

    @property
    def parent_display_id(self) -> str | None:
        if self.parent_step_id is None:
            return None
        return self.parent_step_id.rpartition(":")[2]

    @property
    def duration_ms(self) -> int | None:
        """end_time - start_time; not stored (the original tutorial's two tables)."""
        return None if self.end_time is None else self.end_time - self.start_time

    @property
    def interrupted(self) -> bool:
        return self.status is StepStatus.FAILED and self.error_message == INTERRUPTED


@dataclass(frozen=True, slots=True)
class NewStep:
    """What a caller asks the store to begin: the store assigns seq, ids and start_time."""

    step_type: StepType
    name: str
    input_data: Any = None
    parent_step_id: str | None = None
    agent: str = MAIN_AGENT
    # The provider's tool-call id, linking a tool_call / approval step to the assistant
    # message that asked for it (pairs calls with results when messages are rebuilt).
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """What finishing a running step writes: each field is the `Step` column of that name
    (store/steps/columns.py makes the UPDATE from them; the store adds end_time)."""

    status: StepStatus
    output_data: Any = None
    error_message: str | None = None
    token_usage_prompt: int | None = 0
    token_usage_completion: int | None = 0


@dataclass(frozen=True, slots=True)
class StepTreeNode:
    step: Step
    children: tuple[StepTreeNode, ...] = ()
