"""[wire] The HTTP API's request and answer bodies (docs/protocol.md, HTTP API) as typed classes.

`/api/openapi.json` is generated from them (xclaw/gateway/openapi.py) and the Python API's
remote client (xclaw/api/remote.py) reads the answers with them; the objects they hold — a
session, a step, a tree node — are the frames' (xclaw/wire/frames.py), declared once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from xclaw.wire.frames import (
    BudgetInfo,
    CompensatedInfo,
    CostSummary,
    HistoryMessage,
    OutsideEffectInfo,
    PendingRollback,
    QueuedMessage,
    SessionInfo,
    Step,
    TreeNode,
    Wire,
)

__all__ = [
    "ApiError",
    "ApprovalAnswer",
    "ApprovalBody",
    "BudgetCapsBody",
    "BudgetGrantBody",
    "BudgetReport",
    "FireInfo",
    "FireList",
    "ForkAnswer",
    "ForkBody",
    "Health",
    "HistoryAnswer",
    "HookInfo",
    "HookList",
    "HookMade",
    "NewHookBody",
    "NewScheduleBody",
    "NewSessionBody",
    "ProcessInfo",
    "RenameBody",
    "RollbackAnswer",
    "RollbackBody",
    "RollbackPreview",
    "ScheduleInfo",
    "ScheduleList",
    "SessionList",
    "SessionProcesses",
    "SessionWithCost",
    "StepList",
    "StepTree",
    "ToolInfo",
    "ToolList",
]

STEP_REF = "a step id shown by /steps: s0005, 5, or SESSION:s0005"


class ApiError(Wire):
    """Every error answer: `code` is the WebSocket `error` frame's."""

    code: str = Field(description="stable machine-readable word, as in the `error` frame")
    error: str = Field(description="human-readable explanation")


# The deployment's fields are the admin's to see: null for a member (docs/teams.md).
_ADMIN_ONLY = "; null for a member (the admin's to see, docs/teams.md)"


class Health(Wire):
    status: Literal["ok"]
    version: str
    database: str | None = Field(description="the database URL" + _ADMIN_ONLY)
    model: str | None
    sockets: int | None = Field(description="open WebSockets" + _ADMIN_ONLY)
    worker: str | None = Field(description="this worker's id (named after its host)" + _ADMIN_ONLY)
    backend: Literal["sqlite", "postgresql"] | None = Field(
        description="the database" + _ADMIN_ONLY
    )
    sessions_driven: list[str] = Field(alias="sessionsDriven")
    commits: int | None = Field(
        description="write transactions committed by this process since it started" + _ADMIN_ONLY
    )
    writer_busy_ms: int | None = Field(
        alias="writerBusyMs",
        description="SQLite: milliseconds this process's one writer thread has spent running "
        "transactions since it started (over wall time: how saturated it is); null on "
        "PostgreSQL" + _ADMIN_ONLY,
    )
    user: str | None = Field(
        default=None,
        description="the user this request is signed in as; null: the server's own token "
        "(the admin)",
    )
    role: Literal["admin", "member"] = "admin"


class SessionWithCost(SessionInfo):
    """A session with its tokens and estimated cost (`?cost=1`, `xclaw sessions --json`)."""

    usage: dict[str, Any] | None = None
    cost: float | None = None
    llm_calls: int | None = Field(default=None, alias="llmCalls")
    unpriced_calls: int | None = Field(default=None, alias="unpricedCalls")

    def cost_summary(self) -> CostSummary | None:
        if self.usage is None or self.llm_calls is None:
            return None
        return CostSummary.model_validate(
            {
                "usage": self.usage,
                "cost": self.cost,
                "llmCalls": self.llm_calls,
                "unpricedCalls": self.unpriced_calls or 0,
            }
        )


class SessionList(Wire):
    sessions: list[SessionInfo]


class StepList(Wire):
    session_id: str = Field(alias="sessionId")
    steps: list[Step]


class StepTree(Wire):
    session_id: str = Field(alias="sessionId")
    tree: list[TreeNode] = Field(description="roots (one per user input) with their descendants")


class HistoryAnswer(Wire):
    session_id: str = Field(alias="sessionId")
    content: str = Field(
        description="JSON string of [{role, content}] (the format of the original tutorial's "
        "clients)"
    )
    messages: list[HistoryMessage]


class RollbackAnswer(Wire):
    session: SessionInfo
    step_id: str = Field(alias="stepId", description="the session now ends just before it")
    deleted: int = Field(description="how many steps were deleted")
    compensated: list[CompensatedInfo] = Field(
        default_factory=list, description="the compensations that undid outside effects"
    )
    not_undone: list[OutsideEffectInfo] = Field(
        default_factory=list, alias="notUndone", description="outside effects left done"
    )


class RollbackPreview(Wire):
    """What rolling back to `stepId` would do outside the workspace (nothing is done)."""

    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    compensable: list[OutsideEffectInfo] = Field(description="undone, in this order")
    irreversible: list[OutsideEffectInfo] = Field(
        description="left done: the rollback needs acceptIrreversible"
    )
    undone_already: list[OutsideEffectInfo] = Field(
        alias="undoneAlready", description="undone by an earlier rollback"
    )
    pending: PendingRollback | None = Field(
        default=None, description="a rollback of this session stopped half-way"
    )


class ProcessInfo(Wire):
    """One process a session's command left running in its container."""

    pid: int = Field(description="its process id on the worker's host")
    step_id: str | None = Field(
        alias="stepId", description="the step whose command started it (s0005)"
    )
    epoch: int | None = Field(description="the lease epoch (fencing token) of the run")
    command: str = Field(description="its command line")


class SessionProcesses(Wire):
    """What a session's commands left running between steps (docs/containers.md): only a
    session's container keeps processes; an empty list says why in `reason`."""

    session_id: str = Field(alias="sessionId")
    isolation: str = Field(description="sandbox.isolation on the worker that answered")
    container: str | None = Field(
        description="the session's container's name; null: sessions run no container here"
    )
    state: str | None = Field(
        description="podman's word for the container (running, exited, …); null: none on this host"
    )
    processes: list[ProcessInfo] = Field(description="oldest first")
    reason: str | None = Field(description="why the list is empty; null when it is not")


class ForkAnswer(Wire):
    session: SessionInfo
    from_session_id: str = Field(alias="fromSessionId")


class ApprovalAnswer(Wire):
    session_id: str = Field(alias="sessionId")
    step_id: str = Field(alias="stepId")
    approved: bool


class QueueAnswer(Wire):
    """The session's waiting messages, in the order they run (docs/protocol.md, "Input
    while a run is busy")."""

    session_id: str = Field(alias="sessionId")
    queued: list[QueuedMessage]


class UnqueueAnswer(Wire):
    session_id: str = Field(alias="sessionId")
    id: str
    cancelled: bool = Field(description="false: it was not waiting (it ran, or was cancelled)")


class ToolInfo(Wire):
    """One tool a session's agent may call, and its policies: a row of `xclaw tools --json`
    (xclaw/tools/listing.py)."""

    name: str
    source: str = Field(description="built-in, `Python tool module:function`, or an MCP server")
    description: str
    read_only: bool = Field(alias="readOnly")
    approval: str = Field(description="how a call is decided under the approval mode in force")
    resume: str = Field(description="what happens to a call a crash interrupted")
    outside_effects: bool = Field(
        alias="outsideEffects", description="effects beyond the workspace (marked in the record)"
    )
    effect: str = Field(
        default="workspace",
        description="read_only, workspace (undone by snapshots), compensable (undone on "
        "rollback by its compensation) or irreversible",
    )
    traits: dict[str, Any] | None = Field(description="what a Python or MCP tool declares")
    input_schema: dict[str, Any] = Field(alias="inputSchema")


class AgentInfo(Wire):
    """An agent a session may run on this server (docs/agents.md): xclaw's own (`default`)
    and those xclaw.yaml declares."""

    name: str
    description: str
    digest: str = Field(description="names this exact definition (what a session records)")
    model: str | None = Field(description="its own model; none: the session's")
    output: str | None = Field(description="its output type's name; none: text answers")
    sub_agents: list[str] = Field(alias="subAgents")


class AgentList(Wire):
    agents: list[AgentInfo]


class ToolList(Wire):
    approval: str = Field(description="the approval mode in force")
    tools: list[ToolInfo]


# --- request bodies ---------------------------------------------------------------------------


class NewSessionBody(Wire):
    """POST /api/sessions: a session written now (with its title, if any), as `/new TITLE`."""

    title: str | None = None
    agent: str | None = Field(
        default=None, description="the declared agent it runs (docs/agents.md)"
    )
    session_id: str | None = Field(
        default=None,
        alias="sessionId",
        description=(
            "the id a client chose for a session it opened and said nothing to yet: written "
            "under it (one already written that the caller may act on is answered as it is)"
        ),
    )


class RenameBody(Wire):
    title: str


class RollbackBody(Wire):
    step_id: str = Field(alias="stepId", description=STEP_REF)
    accept_irreversible: bool = Field(
        default=False,
        alias="acceptIrreversible",
        description="go on although outside effects nothing undoes stay done (named by the "
        "preview, GET …/rollback/{step}); without it such a rollback is refused "
        "(irreversible_effects)",
    )
    retry: bool = Field(
        default=False,
        description="a rollback to this step stopped half-way: run its failed or interrupted "
        "compensations again",
    )


class ForkBody(Wire):
    step_id: str = Field(alias="stepId", description=STEP_REF)
    title: str | None = None


class ApprovalBody(Wire):
    approve: bool
    message: str | None = Field(
        default=None, description="what the model is told with the answer (docs/approval.md)"
    )
    input: dict[str, Any] | None = Field(
        default=None,
        description="the input the call runs with instead of the model's (needs a "
        "collaborator's part, and approval.allow_edits)",
    )
    client: str | None = Field(
        default=None,
        description="the client the person answered through, as the record's `by` names it "
        "(`acp`, `mcp`, …; default `api`)",
    )


# --- schedules and webhooks (docs/schedules.md) -----------------------------------------------


class ScheduleInfo(Wire):
    """A schedule: what it sends where, when it fires next, what it fired and skipped."""

    id: str
    kind: Literal["cron", "every", "at"]
    spec: str = Field(description="the cron expression, the period in ms, or the moment in ms")
    tz: str
    session_id: str | None = Field(alias="sessionId", description="the session it sends to")
    fork_of: str | None = Field(
        alias="forkOf", description="or the template session each fire forks"
    )
    message: str
    catch_up: Literal["skip", "once", "all"] = Field(alias="catchUp")
    paused: bool
    created_by: str | None = Field(alias="createdBy", description="null: the admin")
    created_at: int = Field(alias="createdAt")
    next_fire: int | None = Field(alias="nextFire", description="ms; null: no more ticks")
    last_fire: int | None = Field(alias="lastFire")
    fired: int
    skipped: int = Field(description="ticks missed and not fired (the catch-up policy)")


class ScheduleList(Wire):
    schedules: list[ScheduleInfo]


class FireInfo(Wire):
    """One fire: its deterministic id (the message id it ran as), where it went, its state."""

    id: str
    source: Literal["schedule", "hook"]
    source_id: str = Field(alias="sourceId")
    tick: int | None
    session_id: str = Field(alias="sessionId")
    state: Literal["pending", "delivered", "refused"]
    note: str | None = Field(description="why it waits (a busy session) or was refused")
    deferrals: int
    step: str | None = Field(description="the message's step once delivered")
    created_at: int = Field(alias="createdAt")
    updated_at: int = Field(alias="updatedAt")


class FireList(Wire):
    fires: list[FireInfo]


class HookInfo(Wire):
    name: str
    session_id: str = Field(alias="sessionId")
    template: str
    created_by: str | None = Field(alias="createdBy")
    created_at: int = Field(alias="createdAt")
    url: str = Field(description="the path a signed POST goes to: /hooks/NAME")


class HookList(Wire):
    hooks: list[HookInfo]


class HookMade(HookInfo):
    secret: str = Field(description="the secret requests are signed with: shown this once")


class NewScheduleBody(Wire):
    """POST /api/schedules: one of cron, every, at; one of sessionId, forkOf."""

    cron: str | None = Field(default=None, description='five fields: "0 9 * * 1-5"')
    every: str | None = Field(default=None, description="a period: 30s, 30m, 2h, 1d")
    at: str | None = Field(default=None, description="once, an ISO 8601 time")
    session_id: str | None = Field(default=None, alias="sessionId")
    fork_of: str | None = Field(default=None, alias="forkOf")
    message: str
    catch_up: Literal["skip", "once", "all"] = Field(default="skip", alias="catchUp")
    tz: str = "UTC"


class NewHookBody(Wire):
    name: str
    session_id: str = Field(alias="sessionId")
    template: str = Field(description="{body}: the request's body; {a.b}: a field of its JSON")


class BudgetReport(Wire):
    """A budget target's caps (docs/budgets.md): each that applies, with what its scope
    spent and what is left; a session's own spend; what an admin set and granted."""

    target: str = Field(description="session:<id>, user:<name> or total")
    caps: list[BudgetInfo]
    day: str = Field(description="the UTC day the daily caps count")
    month: str = Field(description="the UTC month the monthly caps count")
    spent: dict[str, float] | None = Field(
        default=None, description="a session's: {tokens, usd} its calls counted"
    )
    set: dict[str, Any] | None = Field(
        default=None, description="what an admin set: {target, caps, grantedTokens, grantedUsd}"
    )


class BudgetCapsBody(Wire):
    caps: dict[str, float | None] = Field(
        description="cap key -> amount (null: no cap, over xclaw.yaml's); the others kept"
    )


class BudgetGrantBody(Wire):
    tokens: int | None = Field(default=None, ge=0, description="tokens added to the session")
    usd: float | None = Field(default=None, ge=0, description="dollars added to the session")
