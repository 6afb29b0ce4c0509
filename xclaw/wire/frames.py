"""[wire] Every server frame of docs/protocol.md as a typed class, declared once.

The gateway sends these frames (xclaw/runtime, xclaw/gateway), the terminal client and the
Python API (xclaw/api) read them, `xclaw schema frames` publishes them as JSON Schema
(docs/frames.schema.json), and the tests check docs/protocol.md against them. Together they
are one discriminated union on `type`, `ServerFrame`; `decode_frame` turns a received JSON
object into one of them.

Attributes are snake_case; on the wire (aliases) they are camelCase as docs/protocol.md has
always had them — except inside a `history` frame's messages and a step's `usage`, whose keys
were snake_case from the start and stay so. An optional field (`output?`, `agent?`, …) is
absent from the wire when it was not given: `wire()` keeps exactly the fields a frame was
built or received with.

The server's hot path builds its frames as plain dicts (xclaw/wire/protocol.py, the runtime's
frame builders): a model per frame costs more CPU than the rest of a step's encoding
(bench/README.md, "Typed frames"). These classes are the declaration those dicts follow;
`undeclared` finds a key a builder added that is not declared here, and tests/test_frames.py
holds every frame a real gateway sends to them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "AckFrame",
    "ApprovalRequestFrame",
    "AssistantMessage",
    "BadServerFrame",
    "CostSummary",
    "DeltaFrame",
    "ErrorFrame",
    "ForkedFrame",
    "HistoryFrame",
    "HistoryMessage",
    "ImageRef",
    "NoticeFrame",
    "PongFrame",
    "RenamedFrame",
    "ReplyFrame",
    "RolledBackFrame",
    "ServerFrame",
    "SessionFrame",
    "SessionInfo",
    "StatusFrame",
    "Step",
    "StepFrame",
    "StepUsage",
    "StepsFrame",
    "SummaryMessage",
    "ThinkingBlock",
    "ThinkingDiscardedFrame",
    "ThinkingFrame",
    "Tokens",
    "ToolCall",
    "ToolFrame",
    "ToolResultMessage",
    "TreeNode",
    "UserMessage",
    "decode_frame",
    "undeclared",
    "undeclared_in",
]

StatusWord = Literal["Init", "Running", "Paused", "Success", "Failed"]
StateWord = Literal[
    "running", "paused", "waiting", "budget", "interrupted", "new", "success", "failed"
]
STATES: tuple[str, ...] = get_args(StateWord)
StepTypeWord = Literal["llm_call", "tool_call", "user_input", "system_alert"]
StepStatusWord = Literal["running", "completed", "failed"]


class Wire(BaseModel):
    """A JSON object of the wire: read by alias (camelCase) or by attribute name, unknown
    keys ignored (clients must ignore fields they do not know), immutable once read."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    def wire(self) -> dict[str, Any]:
        """The JSON object as the wire carries it: aliases, and only the fields given."""
        out: dict[str, Any] = self.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return out


# --- the objects frames carry ----------------------------------------------------------------


class BudgetInfo(Wire):
    """The cap a session waits at (state `budget`, docs/budgets.md): which, in what unit,
    its amount, what its scope spent, what is left, and what the call not made needed."""

    cap: str
    unit: Literal["tokens", "usd"]
    limit: float
    spent: float
    left: float
    needed: float | None = None


class Tokens(Wire):
    """A step's token counts; null when the server reported none (unknown, never 0)."""

    prompt: int | None
    completion: int | None


class StepUsage(Wire):
    """An llm_call's tokens: `input` counts every input token sent (cached or not),
    `cache_read`/`cache_write` the parts read from / written to the prompt cache,
    `reasoning` the part of `output` spent thinking; `estimated` when xclaw estimated them."""

    input: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    estimated: bool | None = None


class Step(Wire):
    """One step of a session (a trace row) as every client sees it: the `step` and `steps`
    frames, the HTTP API, the Python API's `Session.steps()`."""

    id: str = Field(description="display id, e.g. s0005")
    step_id: str = Field(alias="stepId", description="primary key: SESSION:s0005")
    seq: int
    parent: str | None = Field(description="display id of the step that decided this one")
    type: StepTypeWord
    name: str
    status: StepStatusWord
    agent: str = Field(description="`main`, or the display id of a sub-agent's spawn step")
    input: Any = Field(description="the step's input (a tool's arguments, a user's text, …)")
    output: Any = Field(description="the step's output (a tool's output text, an LLM reply, …)")
    error: str | None
    start_time: int = Field(alias="startTime", description="milliseconds since the epoch")
    end_time: int | None = Field(alias="endTime")
    duration_ms: int | None = Field(alias="durationMs")
    tokens: Tokens
    usage: StepUsage | None = Field(default=None, description="llm_call steps only")
    cost: float | None = Field(
        default=None,
        description="llm_call steps only: estimated dollars, null for a model without a price",
    )


class TreeNode(Step):
    """A step with the steps it decided (the trace tree)."""

    children: list[TreeNode] = Field(default_factory=list)


class SessionInfo(Wire):
    """A session as the HTTP API, the listings and the Python API show it."""

    session_id: str = Field(alias="sessionId")
    title: str
    status: StatusWord
    created_at: int = Field(alias="createdAt", description="milliseconds since the epoch")
    updated_at: int = Field(alias="updatedAt")
    is_forked: bool = Field(alias="isForked")
    parent_session_id: str | None = Field(alias="parentSessionId")
    forked_from_seq: int | None = Field(alias="forkedFromSeq")
    forked_from: str | None = Field(alias="forkedFrom", description="display id of the fork point")
    awaiting_input: bool = Field(
        alias="awaitingInput", description="rolled back or cancelled: waits for an instruction"
    )
    metadata: dict[str, Any]
    busy: bool | None = Field(default=None, description="a run is in flight in this gateway")
    state: StateWord
    state_text: str = Field(alias="stateText")

    @property
    def agent(self) -> str:
        """The agent the session runs, as its metadata records it (`default`: xclaw's own)."""
        recorded = self.metadata.get("agent")
        name = recorded.get("name") if isinstance(recorded, dict) else None
        return name if isinstance(name, str) else "default"


class CostSummary(Wire):
    """Tokens and estimated cost of a session's LLM calls (`cost` null: no call had a price;
    `unpricedCalls`: calls of models without one)."""

    usage: StepUsage
    cost: float | None
    llm_calls: int = Field(alias="llmCalls")
    unpriced_calls: int = Field(alias="unpricedCalls")


# --- the history frame's messages (snake_case keys, as they always were) -------------------


class ToolCall(Wire):
    id: str
    name: str
    input: dict[str, Any]


class ThinkingBlock(Wire):
    type: Literal["thinking", "redacted_thinking", "reasoning"]
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class ImageRef(Wire):
    media_type: str
    hash: str
    size: int


class UserMessage(Wire):
    kind: Literal["user"]
    text: str
    user: str | None = Field(
        default=None, description="the team member who sent it (docs/teams.md); absent: the admin"
    )
    fire: str | None = Field(
        default=None,
        description="the schedule's or webhook's fire that sent it, its id the message's: "
        "schedule.<id>.<tick ms> or hook.<name>.<delivery> (docs/schedules.md); absent: a "
        "person's message",
    )


class SummaryMessage(Wire):
    """What compaction put in place of the older turns (shown folded)."""

    kind: Literal["summary"]
    text: str


class AssistantMessage(Wire):
    kind: Literal["assistant"]
    text: str
    tool_calls: list[ToolCall]
    thinking: list[ThinkingBlock] | None = None


class ToolResultMessage(Wire):
    kind: Literal["tool_result"]
    tool_call_id: str
    name: str
    content: str
    is_error: bool
    step_id: str | None = Field(default=None, alias="stepId")
    running: bool | None = Field(
        default=None, description="a call of the run in flight, no result yet"
    )
    images: list[ImageRef] | None = None


HistoryMessage: TypeAlias = Annotated[
    UserMessage | SummaryMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="kind"),
]


# --- the frames ------------------------------------------------------------------------------


def _type_required(schema: dict[str, Any]) -> None:
    """`type` has a default in Python (the class says it) but every frame carries it."""
    schema["required"] = ["type", *(k for k in schema.get("required", []) if k != "type")]


class Frame(Wire):
    """A server frame: `type` says which."""

    model_config = ConfigDict(json_schema_extra=_type_required)

    type: str

    def model_post_init(self, context: Any, /) -> None:
        # `type` is part of every frame even when the class supplied it.
        self.__pydantic_fields_set__.add("type")


class SessionFrame(Frame):
    """After `reconnect` (and `/switch`, `/new`): what the socket is attached to."""

    type: Literal["session"] = "session"
    session_id: str = Field(alias="sessionId")
    status: StatusWord
    title: str
    is_forked: bool = Field(alias="isForked")
    parent_session_id: str | None = Field(alias="parentSessionId")
    awaiting_input: bool = Field(alias="awaitingInput")
    state: StateWord
    state_text: str = Field(alias="stateText")
    created: bool = Field(description="a new session, written at its first message")
    user: str | None = Field(
        default=None,
        description="on a server with users (docs/teams.md): whom this socket is signed in as",
    )
    agent: str | None = Field(
        default=None,
        description="the declared agent the session runs (none: xclaw's own; docs/agents.md)",
    )


class HistoryFrame(Frame):
    """The conversation: after `reconnect`, and after a rollback."""

    type: Literal["history"] = "history"
    session_id: str = Field(alias="sessionId")
    content: str = Field(description="JSON string of [{role, content}] (the original tutorial's)")
    messages: list[HistoryMessage] = Field(default_factory=list)


class StatusFrame(Frame):
    """The state machine moved; with `busy` (the last frame of an attach, after a rollback or
    a cancel) also the session's state in words."""

    type: Literal["status"] = "status"
    session_id: str = Field(alias="sessionId")
    status: StatusWord
    busy: bool | None = None
    awaiting_input: bool | None = Field(default=None, alias="awaitingInput")
    state: StateWord | None = None
    state_text: str | None = Field(default=None, alias="stateText")
    budget: BudgetInfo | None = Field(
        default=None, description="state `budget`: which cap, spent, left (docs/budgets.md)"
    )


class RenamedFrame(Frame):
    type: Literal["renamed"] = "renamed"
    session_id: str = Field(alias="sessionId")
    title: str


class DeltaFrame(Frame):
    """A piece of the assistant's text as it streams (main agent only)."""

    type: Literal["delta"] = "delta"
    session_id: str = Field(alias="sessionId")
    content: str


class ThinkingFrame(Frame):
    """The model's reasoning, one frame per block (main agent only)."""

    type: Literal["thinking"] = "thinking"
    session_id: str = Field(alias="sessionId")
    content: str
    redacted: int = Field(description="how many blocks the provider keeps encrypted")


class ThinkingDiscardedFrame(Frame):
    """The thinking frames since the model call began belong to a failed attempt."""

    type: Literal["thinking_discarded"] = "thinking_discarded"
    session_id: str = Field(alias="sessionId")


class ReplyFrame(Frame):
    """The final answer of a turn: the run is over."""

    type: Literal["reply"] = "reply"
    session_id: str = Field(alias="sessionId")
    content: str
    output: Any = Field(
        default=None,
        description="an agent with an output type: its answer, validated (docs/agents.md)",
    )
    agent: str | None = Field(
        default=None, description="the declared agent that answered (none: xclaw's own)"
    )


class ToolFrame(Frame):
    """Tool progress: running, then completed or failed (with its output)."""

    type: Literal["tool"] = "tool"
    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    name: str
    input: Any
    state: StepStatusWord
    output: Any = None
    agent: str | None = Field(default=None, description="a sub-agent's tool: its spawn step")
    call_id: str | None = Field(
        default=None, alias="callId", description="the assistant tool call it answers"
    )


class ApprovalRequestFrame(Frame):
    """A person must allow the call: answer with `approval` (or Session.approve)."""

    type: Literal["approval_request"] = "approval_request"
    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    name: str
    input: Any
    reason: str
    maybe_repeated: bool = Field(
        alias="maybeRepeated", description="interrupted before: it may already have happened"
    )
    agent: str | None = None
    call_id: str | None = Field(
        default=None, alias="callId", description="the assistant tool call it asks about"
    )


class StepFrame(Frame):
    """A step was written or changed (the live trace view)."""

    type: Literal["step"] = "step"
    session_id: str = Field(alias="sessionId")
    step: Step


class NoticeFrame(Frame):
    """Text for people: command results and runtime notices (`[resume] …`, `[cancel] …`)."""

    type: Literal["notice"] = "notice"
    session_id: str | None = Field(default=None, alias="sessionId")
    content: str


class StepsFrame(Frame):
    """The structured result of `/steps`."""

    type: Literal["steps"] = "steps"
    session_id: str = Field(alias="sessionId")
    steps: list[Step]


class ForkedFrame(Frame):
    """The structured result of `/fork`; `sessionId` is the **new** session."""

    type: Literal["forked"] = "forked"
    session_id: str = Field(alias="sessionId")
    from_session_id: str = Field(alias="fromSessionId")
    from_step_id: str = Field(alias="fromStepId")
    title: str


class CompensationInfo(Wire):
    """What undoes one outside effect (xclaw/tools/effects.py `Compensation`)."""

    action: str = Field(description="the compensation's function, or its MCP server's tool")
    args: dict[str, Any] = Field(description="what it is called with")
    idempotent: bool = Field(description="may run again when a crash cut it short")


class OutsideEffectInfo(Wire):
    """One call after a rollback point whose effects reach outside the workspace."""

    step_id: str = Field(alias="stepId", description="the call's step")
    tool: str
    call_id: str = Field(alias="callId")
    agent: str
    compensation: CompensationInfo | None = Field(
        default=None, description="what undoes it; absent: nothing here does"
    )
    why: str | None = Field(default=None, description="why nothing undoes it")
    undone_by: str | None = Field(
        default=None, alias="undoneBy", description="an earlier rollback's compensation step"
    )


class PendingRollback(Wire):
    """A rollback of the session that stopped half-way (its plan step)."""

    plan_step_id: str = Field(alias="planStepId")
    step_id: str | None = Field(alias="stepId", description="the step it rolls back to")


class CompensatedInfo(Wire):
    """A compensation a rollback ran: its step, and the effect it undid."""

    step_id: str = Field(alias="stepId", description="the compensation's own step")
    effect: str = Field(description="the step of the effect it undid (deleted by the rewind)")
    tool: str
    action: str


class RollbackPreviewFrame(Frame):
    """`/rollback sNNNN` of a session with outside effects after that step: what the rollback
    would undo (compensable) and what it would leave done (irreversible). Nothing is done
    until `/rollback sNNNN --confirm` (or `--accept-irreversible`) (docs/protocol.md)."""

    type: Literal["rollback_preview"] = "rollback_preview"
    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    compensable: list[OutsideEffectInfo]
    irreversible: list[OutsideEffectInfo]
    undone_already: list[OutsideEffectInfo] = Field(alias="undoneAlready")
    pending: PendingRollback | None = None


class RolledBackFrame(Frame):
    """A rollback happened: the session now ends just before `stepId`. After undoing outside
    effects, also which compensations ran and which effects stay done."""

    type: Literal["rolledback"] = "rolledback"
    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    deleted: int
    compensated: list[CompensatedInfo] | None = None
    not_undone: list[OutsideEffectInfo] | None = Field(default=None, alias="notUndone")


class ErrorFrame(Frame):
    """A human-readable error with a stable code (docs/protocol.md, Errors)."""

    type: Literal["error"] = "error"
    content: str
    code: str
    session_id: str | None = Field(default=None, alias="sessionId")
    message_id: str | None = Field(
        default=None,
        alias="messageId",
        description="the refusal of the `message` frame that carried this id",
    )


class AckFrame(Frame):
    """A `message` frame that carried `messageId` is recorded (durably) as step `stepId`:
    its run goes on. `duplicate`: it was recorded before (a resend), not run again."""

    type: Literal["ack"] = "ack"
    session_id: str = Field(alias="sessionId")
    message_id: str = Field(alias="messageId")
    step_id: str = Field(alias="stepId", description="the message's user_input step, e.g. s0007")
    duplicate: bool = Field(description="recorded before this frame: acknowledged again only")


class QueuedMessage(Wire):
    """A message waiting for the session's run (docs/protocol.md, "Input while a run is
    busy")."""

    id: str = Field(description="the message id its user_input step will record")
    busy: Literal["queue", "steer", "interrupt"] = Field(description="what it asked for")
    content: str
    at: int = Field(description="when it was queued, milliseconds since the epoch")
    user: str | None = Field(default=None, description="the team member who sent it")
    agent: str | None = Field(default=None, description="the declared agent it asked for")


class QueueFrame(Frame):
    """The session's waiting messages, in the order they run: to every client whenever the
    queue changes, and on attach when it is not empty."""

    type: Literal["queue"] = "queue"
    session_id: str = Field(alias="sessionId")
    queued: list[QueuedMessage]


class QueuedFrame(Frame):
    """The answer to a `message` frame that carried `messageId` and was kept to run later
    (`busy` queue or interrupt) or to steer the run: written durably; `duplicate`: it was
    queued before (a resend)."""

    type: Literal["queued"] = "queued"
    session_id: str = Field(alias="sessionId")
    message_id: str = Field(alias="messageId")
    busy: Literal["queue", "steer", "interrupt"]
    duplicate: bool


class PongFrame(Frame):
    type: Literal["pong"] = "pong"


FRAME_CLASSES: tuple[type[Frame], ...] = (
    SessionFrame,
    HistoryFrame,
    StatusFrame,
    RenamedFrame,
    DeltaFrame,
    ThinkingFrame,
    ThinkingDiscardedFrame,
    ReplyFrame,
    ToolFrame,
    ApprovalRequestFrame,
    StepFrame,
    NoticeFrame,
    StepsFrame,
    ForkedFrame,
    RolledBackFrame,
    RollbackPreviewFrame,
    ErrorFrame,
    PongFrame,
    AckFrame,
    QueueFrame,
    QueuedFrame,
)
BY_TYPE: dict[str, type[Frame]] = {c.model_fields["type"].default: c for c in FRAME_CLASSES}

ServerFrame: TypeAlias = Annotated[
    SessionFrame
    | HistoryFrame
    | StatusFrame
    | RenamedFrame
    | DeltaFrame
    | ThinkingFrame
    | ThinkingDiscardedFrame
    | ReplyFrame
    | ToolFrame
    | ApprovalRequestFrame
    | StepFrame
    | NoticeFrame
    | StepsFrame
    | ForkedFrame
    | RolledBackFrame
    | RollbackPreviewFrame
    | ErrorFrame
    | PongFrame
    | AckFrame
    | QueueFrame
    | QueuedFrame,
    Field(discriminator="type"),
]
SERVER_FRAME: TypeAdapter[ServerFrame] = TypeAdapter(ServerFrame)


class BadServerFrame(ValueError):
    """A frame of a known type that does not follow its declaration."""


def decode_frame(data: Any) -> ServerFrame | None:
    """The typed frame of a JSON object received from a gateway; None for a type this
    version does not know (clients ignore those). BadServerFrame for a known type that does
    not follow its declaration."""
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in BY_TYPE:
        return None
    try:
        return SERVER_FRAME.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "frame"
        raise BadServerFrame(f"{kind} frame: {where}: {first['msg']}") from None


def undeclared(frame: dict[str, Any]) -> list[str]:
    """The keys of `frame` (nested ones as dotted paths) that its declaration does not
    have, and the reason it does not follow it at all: [] for a frame that is exactly
    declared. What the tests and `XCLAW_CHECK_FRAMES` hold every frame builder to."""
    try:
        typed = decode_frame(frame)
    except BadServerFrame as e:
        return [str(e)]
    if typed is None:
        return [f"unknown frame type {frame.get('type')!r}"]
    return _extra(frame, typed, "")


def undeclared_in(cls: type[BaseModel], data: dict[str, Any]) -> list[str]:
    """`undeclared` for any declared object (an HTTP answer, a step): the keys of `data`
    `cls` does not declare, or why `data` does not follow it."""
    try:
        typed = cls.model_validate(data)
    except ValidationError as e:
        return [str(e)]
    return _extra(data, typed, "")


def _extra(data: Any, model: Any, at: str) -> list[str]:
    if isinstance(model, BaseModel) and isinstance(data, dict):
        fields = type(model).model_fields
        by_alias = {(f.alias or name): name for name, f in fields.items()}
        out = []
        for key, value in data.items():
            name = by_alias.get(key)
            if name is None:
                out.append(f"{at}{key}")
            elif not _opaque(type(model), name):
                out += _extra(value, getattr(model, name), f"{at}{key}.")
        return out
    if isinstance(model, list) and isinstance(data, list):
        return [e for d, m in zip(data, model, strict=False) for e in _extra(d, m, at)]
    return []


def _opaque(cls: type[BaseModel], name: str) -> bool:
    """Free-form content (a tool's input and output, a session's metadata) has no
    declaration below it."""
    return name in ("input", "output", "metadata")


def wire_fields(cls: type[BaseModel]) -> list[str]:
    """The JSON keys of a declared object, in declaration order (`type` first for a frame)."""
    return [f.alias or name for name, f in cls.model_fields.items()]
