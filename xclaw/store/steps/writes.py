"""[store/steps] A run's writes as values, the one table of their durability, and the function that
applies them: why write-ahead holds, in one place.

**The writes.** Everything a run writes goes on its `WriteStream` (store/steps/stream.py) as one
of the frozen values below — `BeginStep`, `AddStep`, `FinishStep`, `OpenTurn`, `RenewLease`,
`ReleaseLease`; a session's waiting messages, `QueueInput` and `Unqueue` — built on the caller's side with every value a model, a tool or a user can fill
already redacted (xclaw/recorder/recorder.py). Every other write of the store is a value too,
applied alone by `Store.write(value, lease=None)` as its own transaction: a session's
`Transition`, `MarkInterrupted`, `AcquireLease`, `Rollback`, `Fork`, `CreateSession`,
`UpdateSession`, `DeleteSession` (the store's methods of those names build the value and apply
it). A value holds no code: the writer applies it with `apply`, below, which runs the store's
own transaction bodies (fixed SQL, one per backend) and nothing else (`prepare` makes that
body; `Store.write` makes it before the transaction, so its JSON is encoded on the caller's
thread). A value's type says what applying it returns (`Writes[R]`), so `store.write(v)` is
typed.

**The table.** `SYNC` says, for each kind of write, whether its commit must be synced to disk
before the effect that follows it, and names that effect. A value's kind is read from the value
itself (`kind_of`): a begun `tool_call` is `TOOL_BEGINS` whoever puts it. `WriteStream.put` and
`Store.write` look the kind up; the store's housekeeping writes, which are no values (worker
presence, blobs, snapshots, restores, imports, users, repairs), name their kind to the store's
`_write(body, kind)`, and the table decides theirs too: durability is decided here and nowhere
else. A batch holding one durable write commits synced (SQLite: the writer fsyncs the WAL
file after the COMMIT and before any caller hears of it — what `synchronous=FULL` does at a
commit in WAL mode, without switching the connection's level per commit; PostgreSQL:
`synchronous_commit on`, a connection of the durable pool), which makes every earlier commit
durable too; whether to sync is known from the queued values before the transaction begins,
since no write runs inside another.

**Why write-ahead holds** (docs/architecture.md, "write-ahead"):

1. The agent loop starts a tool only after `observer.tool_started` returns
   (`agent/loop.py` `Agent._run_one`), which awaits `Recorder.before_tool`.
2. `before_tool` puts `BeginStep(step=<the tool_call>)` and awaits its future.
3. Its kind is `TOOL_BEGINS`, whose row in `SYNC` is `DURABLE`: the stream hands it to the
   writer as durable, and the writer commits its batch and syncs it (above).
4. A future resolves only after its transaction has committed (and synced, when durable), and
   a stream's writes commit in the order put (`stream.deliver`, after COMMIT): when
   `before_tool` returns, the `running` row and every earlier write of the run — the LLM call's
   begin and answer — are on disk.
5. `apply` inserts the row and moves the session to Running in one transaction (the backend's
   `_insert_step_tx`): the record says "recorded, not run" from then on, whatever crashes.
6. A write that runs twice writes once. A batch in which a write fails is rolled back whole and
   run again (SQLite: each write in its own savepoint; PostgreSQL: the writes before the
   failure, in a new transaction); nothing of the first attempt is left, and `apply` is a
   function of the value and the database only — no closure over the recorder, no redaction,
   no clock but the store's — so the second run writes what the first would have. A value's
   only trace outside the transaction is its `Slot`, set again by each run. A completion is
   keyed by (session, seq, `running`): applied to a step already finished it is refused
   (StepNotRunning), never applied twice. After a failure the stream is broken: the writes put
   after it fail unrun, so none refers to a step that was not written.
7. The same argument gives "a tool's result is durable before any client hears of it":
   `Recorder.tool_finished` awaits `FinishStep(told=True)`, kind `RESULT`, `DURABLE`, and only
   then emits its events; and "a final or waiting status is durable before a client hears of
   it": kinds `FINAL` and `APPROVAL_ASKED`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from xclaw.store.leases import Lease
from xclaw.store.schedules.sql import Hook, NewFire, Schedule
from xclaw.store.steps.model import (
    Completion,
    NewStep,
    Session,
    Status,
    Step,
    StepStatus,
    StepType,
    is_approval,
    is_undo_step,
    parse_step_ref,
)
from xclaw.store.steps.rows import check_session_id, new_session_id

if TYPE_CHECKING:
    from xclaw.store.snapshots.model import PendingRestore, WorkspaceRestore

R = TypeVar("R", covariant=True)


class Sync(enum.Enum):
    """How a write commits."""

    DURABLE = "durable"  # synced before its future resolves
    RELAXED = "relaxed"  # survives a kill at once, a power loss with the next synced commit
    LAZY = "lazy"  # relaxed, and nobody waits for it: held up to 2 ms to share a commit


class Kind(enum.Enum):
    """What a write is, read from the value (`kind_of`): the rows of SYNC."""

    TOOL_BEGINS = "tool_begins"
    UNDO_BEGINS = "undo_begins"
    APPROVAL_ASKED = "approval_asked"
    STEP_BEGINS = "step_begins"
    MESSAGE = "message"
    STEP_ADDED = "step_added"
    NOTE = "note"
    RESULT = "result"
    FINAL = "final"
    ANSWER = "answer"
    TURN_OPENED = "turn_opened"
    LEASE_RENEWED = "lease_renewed"
    LEASE_RELEASED = "lease_released"
    STATUS_MOVED = "status_moved"
    INTERRUPTED = "interrupted"
    LEASE_TAKEN = "lease_taken"
    ROLLED_BACK = "rolled_back"
    FORKED = "forked"
    SESSION_CREATED = "session_created"
    SESSION_EDITED = "session_edited"
    SESSION_DELETED = "session_deleted"
    # Kinds of the store's housekeeping writes, which are no values (a body of the store's
    # own, run by `_write(body, kind)`): their durability is decided here all the same.
    WORKER_SEEN = "worker_seen"
    BLOBS_PUT = "blobs_put"
    BLOBS_SWEPT = "blobs_swept"
    SNAPSHOT_SAVED = "snapshot_saved"
    RESTORE_DONE = "restore_done"
    IMPORTED = "imported"
    TEAM_CHANGED = "team_changed"
    ACTION_LOGGED = "action_logged"
    REPAIRED = "repaired"
    BUDGET_HELD = "budget_held"
    BUDGET_SET = "budget_set"
    BUDGET_STOPPED = "budget_stopped"
    BUDGET_RETURNED = "budget_returned"
    QUEUED = "queued"
    UNQUEUED = "unqueued"
    SCHEDULE_CHANGED = "schedule_changed"
    TICK_CLAIMED = "tick_claimed"
    DELIVERY_RECORDED = "delivery_recorded"
    FIRE_TAKEN = "fire_taken"
    FIRE_SETTLED = "fire_settled"


# kind -> (how it commits, the effect its commit precedes). The only durability decision of a
# step's or a run's write (docs/storage.md, "Durability").
SYNC: dict[Kind, tuple[Sync, str]] = {
    Kind.TOOL_BEGINS: (Sync.DURABLE, "the tool runs: write-ahead"),
    Kind.UNDO_BEGINS: (Sync.DURABLE, "a compensation runs, or a rollback's plan starts"),
    Kind.APPROVAL_ASKED: (Sync.DURABLE, "a person is asked; clients see Paused"),
    Kind.STEP_BEGINS: (Sync.LAZY, "the model is called: no effect outside, a lost row re-issued"),
    Kind.MESSAGE: (Sync.RELAXED, "the run starts: clients see Running"),
    Kind.STEP_ADDED: (Sync.DURABLE, "a refusal or alert is shown, a tool may follow"),
    Kind.NOTE: (Sync.LAZY, "what acts on the decision waits for a later write that syncs it"),
    Kind.RESULT: (Sync.DURABLE, "a client hears of it: a tool's result, an answer, a failure"),
    Kind.FINAL: (Sync.DURABLE, "a client hears the session is Paused, Success or Failed"),
    Kind.ANSWER: (Sync.LAZY, "the tools it asked for, whose own rows sync it"),
    Kind.TURN_OPENED: (Sync.DURABLE, "the run starts under the lease it took"),
    Kind.LEASE_RENEWED: (Sync.RELAXED, "the run goes on; a lost renewal only shortens it"),
    Kind.LEASE_RELEASED: (Sync.RELAXED, "another worker may drive; a lost one expires"),
    Kind.STATUS_MOVED: (Sync.RELAXED, "the run goes on (Running): a lost move is redone"),
    Kind.INTERRUPTED: (Sync.DURABLE, "a resume decides from what was left running"),
    Kind.LEASE_TAKEN: (Sync.DURABLE, "the new driver acts on the session: a takeover"),
    Kind.ROLLED_BACK: (Sync.DURABLE, "a client hears of the rewind; the workspace is restored"),
    Kind.FORKED: (Sync.DURABLE, "a client is given the new session's id"),
    Kind.SESSION_CREATED: (Sync.DURABLE, "a client is given the session's id"),
    Kind.SESSION_EDITED: (Sync.RELAXED, "a title or metadata shown: a lost edit is redone"),
    Kind.SESSION_DELETED: (Sync.DURABLE, "a client hears it is gone"),
    Kind.WORKER_SEEN: (Sync.RELAXED, "presence: the lock says who lives, the row who it was"),
    Kind.BLOBS_PUT: (Sync.RELAXED, "the snapshot naming them, whose durable commit syncs them"),
    Kind.BLOBS_SWEPT: (Sync.RELAXED, "nothing: a lost sweep is swept again"),
    Kind.SNAPSHOT_SAVED: (Sync.DURABLE, "the step it precedes runs: files follow memory"),
    Kind.RESTORE_DONE: (Sync.DURABLE, "the workspace is used as restored"),
    Kind.IMPORTED: (Sync.DURABLE, "the import is reported done"),
    Kind.TEAM_CHANGED: (Sync.DURABLE, "a user, token or share takes effect"),
    Kind.ACTION_LOGGED: (Sync.RELAXED, "the audit line; the action's own write synced"),
    Kind.REPAIRED: (Sync.DURABLE, "fsck reports the repair"),
    # An LLM call begun with its budget reservation (docs/budgets.md): committed before the
    # model is called (the recorder waits for it), so no request reaches a provider with its
    # hold not on the record; a shared cap's check is answered by this commit. Not synced: a
    # power loss takes the hold with its step, and the session with them (nothing after it
    # is on disk either). A settlement rides in the finish; a lost one leaves the reservation
    # counted, never nothing.
    Kind.BUDGET_HELD: (Sync.RELAXED, "the model is called: its reservation is counted"),
    Kind.BUDGET_SET: (Sync.DURABLE, "an admin is told the cap or the grant holds"),
    Kind.BUDGET_STOPPED: (Sync.DURABLE, "a client hears the session waits for a budget"),
    # A run's unused allowance given back (docs/budgets.md, "Allowances"): a lost one leaves
    # it counted, never less, until the session's next run gives it back.
    Kind.BUDGET_RETURNED: (Sync.RELAXED, "others may use the room a run claimed"),
    Kind.QUEUED: (Sync.DURABLE, "the sender is told its message waits its turn"),
    Kind.UNQUEUED: (Sync.DURABLE, "clients are told a waiting message will not run"),
    # Schedules and webhooks (store/schedules/sql.py, docs/schedules.md).
    Kind.SCHEDULE_CHANGED: (Sync.DURABLE, "the person is told a schedule or webhook is saved"),
    Kind.TICK_CLAIMED: (Sync.DURABLE, "the fire is delivered: a lost claim would fire again"),
    Kind.DELIVERY_RECORDED: (Sync.DURABLE, "the webhook's sender is answered 202"),
    Kind.FIRE_TAKEN: (Sync.RELAXED, "a delivery is retried: its message id runs it once"),
    Kind.FIRE_SETTLED: (Sync.RELAXED, "a lost one is delivered again: its message id dedups"),
}

# Statuses a client must only hear of once they are on disk.
DURABLE_STATUSES = frozenset({Status.PAUSED, Status.SUCCESS, Status.FAILED})


class Slot:
    """Where the step a write made is set when it is applied (on the writer's thread), so a
    later write of the same stream can name it: complete the step it began, hang under it."""

    __slots__ = ("step",)

    def __init__(self) -> None:
        self.step: Step | None = None

    def resolved(self) -> Step:
        if self.step is None:
            raise RuntimeError("a write was used before it was committed")
        return self.step


@dataclass(frozen=True, slots=True)
class RollbackResult:
    session: Session
    target_seq: int
    deleted: int
    # The workspace restore journaled with the rollback (None: none asked, or the workspace
    # is already as it was before the target step).
    restore: PendingRestore | None = None


@dataclass(frozen=True, slots=True)
class PlanDone:
    """The plan of a rollback that undid outside effects (a running `system_alert`
    `rollback`, model.ROLLBACK_PLAN): completed with `output` in the rollback's own
    transaction, so the rewind and the plan's end are one (xclaw/runtime/rollbacks.py)."""

    seq: int
    output: Any = None


class Writes(Generic[R]):
    """A write value whose application returns an `R` (what `Store.write` returns)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Shared:
    """A cap on a scope several sessions share (a person's day or month, the deployment's):
    checked against the scope's counter in the hold's own transaction, exact across workers."""

    cap: str  # user_daily_tokens, ...
    scope: str  # ud:<user>:<day>, um:<user>:<month>, td:<day>, tm:<month>
    unit: str  # tokens | usd
    limit: float


@dataclass(frozen=True, slots=True)
class Refused:
    """What a hold's transaction answers when a shared cap has no room for it: the cap, what
    its scope counted, and the reservation. Nothing of the call is written."""

    cap: str
    unit: str
    limit: float
    spent: float
    needed: float


class Claim:
    """Room on a hold's shared scopes' counters claimed ahead for its run (docs/budgets.md,
    "Allowances"), asked with the hold: a `slice` (tokens, dollars) while every cap on them
    stays far, else what the run's room lacks for this hold (`short`). The hold's transaction
    sets `granted` (on the writer's thread): what it added to the counters and to the run's
    allowance — the slice, what was short, or nothing (refused)."""

    __slots__ = ("granted", "short", "slice")

    def __init__(self, slice: tuple[int, float], short: tuple[int, float]) -> None:
        self.slice = slice
        self.short = short
        self.granted: tuple[int, float] | None = None

    def __repr__(self) -> str:
        return f"Claim(slice={self.slice}, short={self.short}, granted={self.granted})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """An LLM call's budget reservation (docs/budgets.md): the request's maximum cost, whose
    spend it counts (the session's `owner`, the UTC `day` and `month`), recorded with the
    call's `running` step in one transaction; `shared`: the caps on shared scopes it is
    checked against there (their counters count it)."""

    tokens: int
    usd: float
    owner: str | None
    day: str  # 2026-12-06
    month: str  # 2026-12
    shared: tuple[Shared, ...] = ()
    # With `shared`: room claimed for the run's allowance instead of the reservation alone
    # counted (the run's holds then draw on it; Gate in xclaw/budgets/ledger.py).
    claim: Claim | None = field(default=None, compare=False)
    # Drawn on its run's allowance (room already counted): no counter moves in its transaction.
    drawn: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Spent:
    """What a call cost, its hold settled with the step's finish in one transaction (and the
    shared scopes' counters moved from the reservation to it)."""

    tokens: int
    usd: float
    held_tokens: int = 0
    held_usd: float = 0.0
    shared: tuple[str, ...] = ()  # the scopes whose counters counted the hold
    # A hold of the run's allowance: its counters and its allowance both moved by this
    # (tokens, dollars) instead — a refund given back near a cap, a cost past the room.
    moved: tuple[int, float] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginStep(Writes[Step]):
    """A step starting, `running` (a tool call, an approval asked, an LLM call); an LLM
    call under a budget carries its `hold`. A hold a shared cap refuses applies as `Refused`
    (nothing written, the slot left empty) instead of the step."""

    session_id: str
    step: NewStep  # redacted; its parent is `parent`
    parent: str | BeginStep | AddStep | FinishStep | None = None
    hold: Hold | None = None
    slot: Slot = field(default_factory=Slot, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AddStep(Writes[Step]):
    """A step already finished when written: the user's message, a refusal, an alert."""

    session_id: str
    step: NewStep
    status: StepStatus = StepStatus.COMPLETED
    output_data: Any = None
    error_message: str | None = None
    parent: str | BeginStep | AddStep | FinishStep | None = None
    # A decision recorded before anything acts on it (a declared agent's hook, the turn's
    # instructions): whatever acts on it waits for a later write, whose commit carries it.
    note: bool = False
    slot: Slot = field(default_factory=Slot, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishStep(Writes[Step]):
    """A running step finished: `done` (model.Completion), the session moved to
    `session_status` in the same transaction if given. `told`: a client (or the loop) hears
    of it before anything else happens; `blobs`: images its output names, stored with it."""

    session_id: str
    step: int | str | Step | BeginStep  # the step it finishes: a reference, or the write
    done: Completion
    session_status: Status | None = None
    told: bool = False
    blobs: Mapping[str, bytes] = field(default_factory=dict)
    # An LLM call's hold settled at what it cost (None: no hold, or left at its reservation).
    spent: Spent | None = None
    slot: Slot = field(default_factory=Slot, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenTurn(Writes[tuple[Lease | None, list[Step], Step | None]]):
    """What opens a message's turn, in one transaction: the session created if `create` (with
    `title` and `metadata`; else retitled and `metadata` merged in), its lease taken, what
    the last run left running marked interrupted (as `Store.mark_interrupted` with
    `keep_approvals` and `approval_output`), the user's `message` recorded. Applied: (lease, interrupted,
    message step), or (None, [], None) when another live worker drives the session."""

    session_id: str
    message: NewStep
    worker_id: str
    ttl_s: float
    create: bool
    title: str | None = None
    metadata: Mapping[str, Any] | None = None
    keep_approvals: bool = True
    approval_output: Mapping[str, Any] | None = None
    # A user of a shared server (docs/teams.md): `sent_by` is the message step's output (who
    # sent it); a session this write creates is `owner`'s; when `member`, a session that
    # already existed (another socket's, created a moment before) must give `owner` a part
    # that lets them act, else the write is refused as SessionNotFound with nothing written.
    sent_by: Mapping[str, Any] | None = None
    owner: str | None = None
    member: bool = False
    # The client's id for the message (docs/protocol.md `messageId`), kept in its step's
    # output; one already recorded in the session is refused as MessageRecorded, nothing
    # written (a resend is never run twice).
    message_id: str | None = None
    # The queued message (xclaw/store/queue/sql.py, its id `message_id`) this turn runs:
    # removed from the queue in this transaction, so it is either waiting or recorded.
    dequeue: bool = False

    def output(self) -> Mapping[str, Any] | None:
        """The message step's output: who sent it, the client's id for it, and `queued`
        when it waited in the session's queue (its A2A task kept the id it was given
        while it waited: docs/a2a.md)."""
        if self.message_id is None:
            return self.sent_by
        out: dict[str, Any] = {**(self.sent_by or {}), "messageId": self.message_id}
        if self.dequeue:
            out["queued"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RenewLease(Writes[Lease]):
    """Extend a lease still ours (same token); LeaseLost once another worker took it."""

    lease: Lease
    ttl_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseLease(Writes[bool]):
    """Expire the lease now (the owner stays on record); False if it was not ours."""

    lease: Lease


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInput(Writes[tuple[Any, bool]]):
    """A message sent while the session's run is busy, kept to run after it (`mode`
    `queue`, `interrupt`) or to be given to the model at its next tool boundary (`steer`):
    xclaw/store/queue/sql.py. `id`: the message id its turn will record; `content`
    redacted. Applied: (the entry, whether this write added it: False for a resend)."""

    session_id: str
    id: str
    mode: str
    content: str
    sent_by: Mapping[str, Any] | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unqueue(Writes[Any]):
    """A waiting message removed: cancelled by a person. Applied: the entry, or None when
    it was not waiting (it ran, or was cancelled, already)."""

    session_id: str
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AcquireLease(Writes[Lease | None]):
    """Take the session's lease (token + 1) unless another owner's lease is live: None then.
    A dead registered owner's lease is taken at once."""

    session_id: str
    owner: str
    ttl_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition(Writes[Session]):
    """A direct move of the session to `target` (model.EVENT_FOR_TARGET); `awaiting_input`
    (Running only): a cancelled run, waiting for the user's next instruction."""

    session_id: str
    target: Status
    awaiting_input: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkInterrupted(Writes[list[Step]]):
    """Dangling `running` steps -> failed "interrupted" (Store.mark_interrupted)."""

    session_id: str
    keep_approvals: bool = True
    approval_output: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollback(Writes[RollbackResult]):
    """Delete the target step and every later one but the records of undoing
    (Store.rollback); `workspace`: journal its restore; `plan`: complete that plan."""

    session_id: str
    ref: str | int
    workspace: WorkspaceRestore | None = None
    plan: PlanDone | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Fork(Writes[Session]):
    """A new session `new_session_id` whose steps copy the source's up to the target
    (Store.fork). The new id is in the value, so a write run twice makes one session."""

    session_id: str
    ref: str | int
    title: str | None = None
    workspace: WorkspaceRestore | None = None
    new_session_id: str = field(default_factory=new_session_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSession(Writes[Session]):
    """A new session in Init (StoreError if the id is taken). Generated ids carry 128
    random bits."""

    session_id: str = field(default_factory=new_session_id)
    title: str = ""
    metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_session_id(self.session_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateSession(Writes[Session]):
    """Rename, or replace the metadata. SessionNotFound."""

    session_id: str
    title: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSession(Writes[None]):
    """The session and (cascade) its steps; forks live on unlinked. SessionNotFound."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetBudget(Writes[Any]):
    """An admin's caps for `target` (`session:<id>`, `user:<name>`, `total`): each key of
    `caps` set (None: no cap, over xclaw.yaml's), the others kept; a grant adds to a
    session's allowance. Durable before the admin hears of it."""

    target: str
    caps: Mapping[str, float | None] = field(default_factory=dict)
    grant_tokens: int = 0
    grant_usd: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetStop(Writes[Any]):
    """The session stops for a budget (`detail`: which cap, spent, left; Running, awaiting
    input, `metadata.budget`), or (`detail` None) goes on: not awaiting input, so the next
    reconnect, the runtime or another worker's sweep resumes it where it stopped."""

    session_id: str
    detail: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReturnAllowance(Writes[Any]):
    """A run's allowance on the shared scopes (docs/budgets.md, "Allowances") given back: what
    the session's holds since each claim did not use is taken off the counters, from the
    rows (so a run killed before its return is made good by the next one's), fenced by the
    run's lease."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AddSchedule(Writes[Any]):
    """A new schedule, as made (its target session must exist)."""

    schedule: Schedule


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeSchedule(Writes[Any]):
    """A schedule paused (`paused`), resumed, or removed (`remove`)."""

    schedule_id: str
    paused: bool | None = None
    remove: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimTicks(Writes[Any]):
    """A worker's claim of a schedule's due ticks: `next_fire` moved on from `expected` only
    if no one else moved it (applied: False then, nothing written), with `fires` written
    pending and held by `worker_id` until `claimed_until`; `skipped` ticks counted."""

    schedule_id: str
    expected: int
    next_fire: int | None
    fires: tuple[NewFire, ...]
    skipped: int
    worker_id: str
    claimed_until: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordDelivery(Writes[Any]):
    """A webhook's delivery written as a pending fire; applied: False when its id (the
    delivery id) was recorded before."""

    fire: NewFire
    worker_id: str
    claimed_until: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeFire(Writes[Any]):
    """A worker takes a pending fire nobody holds at `now` (applied: whether it got it)."""

    fire_id: str
    worker_id: str
    now: int
    claimed_until: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SettleFire(Writes[Any]):
    """A pending fire delivered (`seq`: its message's step), refused (`note` says why), or
    left pending (`deferred`: counted, retried from `retry_at`)."""

    fire_id: str
    state: str  # delivered | refused | pending
    note: str | None = None
    seq: int | None = None
    deferred: bool = False
    retry_at: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AddHook(Writes[Any]):
    hook: Hook


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveHook(Writes[Any]):
    name: str


ScheduleWrite = (
    AddSchedule
    | ChangeSchedule
    | ClaimTicks
    | RecordDelivery
    | TakeFire
    | SettleFire
    | AddHook
    | RemoveHook
)
_SCHEDULE_KINDS: dict[type, Kind] = {
    AddSchedule: Kind.SCHEDULE_CHANGED,
    ChangeSchedule: Kind.SCHEDULE_CHANGED,
    AddHook: Kind.SCHEDULE_CHANGED,
    RemoveHook: Kind.SCHEDULE_CHANGED,
    ClaimTicks: Kind.TICK_CLAIMED,
    RecordDelivery: Kind.DELIVERY_RECORDED,
    TakeFire: Kind.FIRE_TAKEN,
    SettleFire: Kind.FIRE_SETTLED,
}

Write = (
    BeginStep
    | AddStep
    | FinishStep
    | OpenTurn
    | RenewLease
    | ReleaseLease
    | AcquireLease
    | Transition
    | MarkInterrupted
    | Rollback
    | Fork
    | CreateSession
    | UpdateSession
    | DeleteSession
    | SetBudget
    | BudgetStop
    | ReturnAllowance
    | QueueInput
    | Unqueue
    | ScheduleWrite
)


def kind_of(w: Writes[Any]) -> Kind:
    """A write's kind, read from the value (the row of SYNC it commits by)."""
    if isinstance(w, BeginStep):
        if w.hold is not None:
            return Kind.BUDGET_HELD
        if w.step.step_type is StepType.TOOL_CALL:
            return Kind.TOOL_BEGINS
        if is_undo_step(w.step.step_type, w.step.name):
            return Kind.UNDO_BEGINS
        return (
            Kind.APPROVAL_ASKED if is_approval(w.step.step_type, w.step.name) else Kind.STEP_BEGINS
        )
    if isinstance(w, AddStep):
        if w.step.step_type is StepType.USER_INPUT:
            return Kind.MESSAGE
        return Kind.NOTE if w.note else Kind.STEP_ADDED
    if isinstance(w, FinishStep):
        if w.session_status is not None and Status(w.session_status) in DURABLE_STATUSES:
            return Kind.FINAL
        return Kind.RESULT if w.told else Kind.ANSWER
    if isinstance(w, Transition):
        return Kind.FINAL if Status(w.target) in DURABLE_STATUSES else Kind.STATUS_MOVED
    return _KIND_OF_TYPE[type(w)]


_KIND_OF_TYPE: dict[type[Writes[Any]], Kind] = {
    OpenTurn: Kind.TURN_OPENED,
    RenewLease: Kind.LEASE_RENEWED,
    ReleaseLease: Kind.LEASE_RELEASED,
    AcquireLease: Kind.LEASE_TAKEN,
    MarkInterrupted: Kind.INTERRUPTED,
    Rollback: Kind.ROLLED_BACK,
    Fork: Kind.FORKED,
    CreateSession: Kind.SESSION_CREATED,
    UpdateSession: Kind.SESSION_EDITED,
    DeleteSession: Kind.SESSION_DELETED,
    SetBudget: Kind.BUDGET_SET,
    BudgetStop: Kind.BUDGET_STOPPED,
    ReturnAllowance: Kind.BUDGET_RETURNED,
    QueueInput: Kind.QUEUED,
    Unqueue: Kind.UNQUEUED,
    **_SCHEDULE_KINDS,
}


def sync_of(w: Writes[Any]) -> Sync:
    return SYNC[kind_of(w)][0]


def sync_for(kind: Kind) -> Sync:
    """How a write of this kind commits (its row of SYNC)."""
    return SYNC[kind][0]


def normalise_step(step: NewStep) -> NewStep:
    """Accept plain strings for the enum field; reject what the schema would refuse."""
    if not isinstance(step, NewStep):
        raise TypeError(f"expected a NewStep, got {type(step).__name__}")
    if not isinstance(step.step_type, StepType):
        step = replace(step, step_type=StepType(step.step_type))
    if not step.name:
        raise ValueError("a step needs a name (a tool name, a model name, 'user', ...)")
    return step


def step_id_of(parent: str | BeginStep | AddStep | FinishStep | None) -> str | None:
    """A parent named by id, or by the write queued before that makes it (resolved when
    this write is applied, on the writer's thread)."""
    if parent is None or isinstance(parent, str):
        return parent
    return parent.slot.resolved().step_id


class RecordBodies(Protocol):
    """The record's bodies: steps, sessions, the queue, rollback and fork."""

    def _insert_step_tx(
        self,
        session_id: str,
        step: NewStep,
        status: StepStatus,
        output_data: Any,
        error_message: str | None,
        lease: Lease | None,
        hold: Hold | None = None,
    ) -> Callable[[Any], Step]: ...

    def _finish_step_tx(
        self,
        session_id: str,
        seq: int,
        ref: int | str,
        done: Completion,
        wanted: Status | None,
        lease: Lease | None,
        spent: Spent | None = None,
    ) -> Callable[[Any], Step]: ...

    def _open_turn_tx(self, w: OpenTurn) -> Callable[[Any], Any]: ...

    def _queue_input_tx(self, w: QueueInput) -> Callable[[Any], Any]: ...

    def _unqueue_tx(self, w: Unqueue) -> Callable[[Any], Any]: ...

    def _transition_tx(self, w: Transition, lease: Lease | None) -> Callable[[Any], Session]: ...

    def _mark_interrupted_tx(
        self,
        session_id: str,
        keep_approvals: bool,
        approval_output: Mapping[str, Any] | None,
        lease: Lease | None,
    ) -> Callable[[Any], list[Step]]: ...

    def _rollback_tx(self, w: Rollback, lease: Lease | None) -> Callable[[Any], Any]: ...

    def _fork_tx(self, w: Fork) -> Callable[[Any], Session]: ...

    def _create_session_tx(
        self, sid: str, title: str, metadata: Mapping[str, Any] | None
    ) -> Callable[[Any], Session | None]: ...

    def _created_session_tx(self, w: CreateSession) -> Callable[[Any], Session]: ...

    def _update_session_tx(
        self,
        session_id: str,
        title: str | None,
        metadata: Mapping[str, Any] | None,
        *,
        merge: bool = False,
    ) -> Callable[[Any], Session]: ...

    def _delete_session_tx(self, session_id: str) -> Callable[[Any], None]: ...


class LeaseBodies(Protocol):
    """The lease role's bodies."""

    def _renew_lease_tx(self, lease: Lease, ttl_s: float) -> Callable[[Any], Lease]: ...

    def _release_lease_tx(self, lease: Lease) -> Callable[[Any], bool]: ...

    def _acquire_lease_tx(
        self, session_id: str, owner: str, ttl_s: float
    ) -> Callable[[Any], Lease | None]: ...


class BudgetBodies(Protocol):
    """The budget role's bodies: a hold's check and settlement on the shared caps'
    counters (the hold itself is in its step's row: the record's bodies write it), the caps."""

    def _shared_check_tx(self, hold: Hold) -> Callable[[Any], Refused | None]: ...

    def _settle_tx(self, spent: Spent, session_id: str, seq: int) -> Callable[[Any], None]: ...

    def _grant_tx(self, hold: Hold, session_id: str) -> Callable[[Any, int], None]: ...

    def _return_allowance_tx(
        self, w: ReturnAllowance, lease: Lease | None
    ) -> Callable[[Any], Any]: ...

    def _set_budget_tx(self, w: SetBudget) -> Callable[[Any], Any]: ...

    def _budget_stop_tx(self, w: BudgetStop, lease: Lease | None) -> Callable[[Any], Any]: ...


class BlobBodies(Protocol):
    """The snapshot role's body of the images a step brings."""

    def _put_blobs_tx(self, blobs: Mapping[str, bytes]) -> Callable[[Any], int]: ...


class ScheduleBodies(Protocol):
    """The schedule role's body."""

    def _schedule_tx(self, w: ScheduleWrite) -> Callable[[Any], Any]: ...


@dataclass(frozen=True, slots=True)
class TxBodies:
    """The transaction bodies `apply` runs, each from the role whose rows it writes (the
    store assembles them over its connection layer): each returns a function of the open
    transaction's connection."""

    record: RecordBodies
    leases: LeaseBodies
    budgets: BudgetBodies
    blobs: BlobBodies
    schedules: ScheduleBodies


def apply(b: TxBodies, conn: Any, w: Writes[Any], lease: Lease | None) -> Any:
    """Apply one write in the open transaction of `conn` (the writer's), the lease of the
    stream it came on fencing a step's write; a step write's step goes in its slot."""
    return prepare(b, w, lease)(conn)


def prepare(b: TxBodies, w: Writes[Any], lease: Lease | None) -> Callable[[Any], Any]:
    """The transaction body of one write, its values encoded now: `apply` makes it in the
    transaction (a parent or a step that is a queued write resolves only then); the store's
    own step methods make it before, on the caller's thread."""
    if isinstance(w, BeginStep | AddStep):
        new, parent = normalise_step(w.step), step_id_of(w.parent)
        if parent is not None:
            new = replace(new, parent_step_id=parent)
        if isinstance(w, BeginStep):
            tx = b.record._insert_step_tx(
                w.session_id, new, StepStatus.RUNNING, None, None, lease, w.hold
            )
            if w.hold is not None and w.hold.shared:
                check = b.budgets._shared_check_tx(w.hold)
                grant = None
                if w.hold.claim is not None:
                    grant = b.budgets._grant_tx(w.hold, w.session_id)
                return partial(_with_hold, w.slot, check, tx, grant)
        else:
            status = StepStatus(w.status)
            if status is StepStatus.RUNNING:
                raise ValueError("AddStep records a finished step; BeginStep a running one")
            tx = b.record._insert_step_tx(
                w.session_id, new, status, w.output_data, w.error_message, lease
            )
        return partial(_into_slot, w.slot, tx)
    if isinstance(w, FinishStep):
        target = w.step
        ref = (
            target.seq
            if isinstance(target, Step)
            else target.slot.resolved().seq
            if isinstance(target, BeginStep)
            else target
        )
        seq = parse_step_ref(ref, w.session_id)
        wanted = None if w.session_status is None else Status(w.session_status)
        finish = b.record._finish_step_tx(w.session_id, seq, ref, w.done, wanted, lease, w.spent)
        if w.spent is not None and w.spent.shared:  # the counters, from reservation to cost
            finish = partial(_then, finish, b.budgets._settle_tx(w.spent, w.session_id, seq))
        if not w.blobs:
            return partial(_into_slot, w.slot, finish)
        blobs = b.blobs._put_blobs_tx(w.blobs)

        def with_images(conn: Any) -> Step:  # the images first, in the same transaction
            blobs(conn)
            return _into_slot(w.slot, finish, conn)

        return with_images
    if isinstance(w, OpenTurn):
        return b.record._open_turn_tx(w)
    if isinstance(w, RenewLease):
        return b.leases._renew_lease_tx(w.lease, w.ttl_s)
    if isinstance(w, SetBudget):
        return b.budgets._set_budget_tx(w)
    if isinstance(w, BudgetStop):
        return b.budgets._budget_stop_tx(w, lease)
    if isinstance(w, ReturnAllowance):
        return b.budgets._return_allowance_tx(w, lease)
    if isinstance(w, QueueInput):
        return b.record._queue_input_tx(w)
    if isinstance(w, Unqueue):
        return b.record._unqueue_tx(w)
    if isinstance(w, ReleaseLease):
        return b.leases._release_lease_tx(w.lease)
    if isinstance(w, AcquireLease):
        return b.leases._acquire_lease_tx(w.session_id, w.owner, w.ttl_s)
    if isinstance(w, Transition):
        return b.record._transition_tx(w, lease)
    if isinstance(w, MarkInterrupted):
        return b.record._mark_interrupted_tx(
            w.session_id, w.keep_approvals, w.approval_output, lease
        )
    if isinstance(w, Rollback):
        return b.record._rollback_tx(w, lease)
    if isinstance(w, Fork):
        return b.record._fork_tx(w)
    if isinstance(w, CreateSession):
        return b.record._created_session_tx(w)
    if isinstance(w, UpdateSession):
        return b.record._update_session_tx(w.session_id, w.title, w.metadata)
    if isinstance(w, DeleteSession):
        return b.record._delete_session_tx(w.session_id)
    if isinstance(w, ScheduleWrite):
        return b.schedules._schedule_tx(w)
    raise TypeError(f"not a write value: {type(w).__name__}")


def _with_hold(
    slot: Slot,
    check: Callable[[Any], Refused | None],
    step_tx: Callable[[Any], Step],
    grant: Callable[[Any, int], None] | None,
    conn: Any,
) -> Step | Refused:
    """An LLM call's `running` step, its hold in its row, the shared caps checked first in
    the same transaction (their counters row-locked): refused, nothing of the call is
    written. Room claimed for the run (`grant`) is its allowance from this step on."""
    refused = check(conn)
    if refused is not None:
        return refused
    step = _into_slot(slot, step_tx, conn)
    if grant is not None:
        grant(conn, step.seq)
    return step


def _then(step_tx: Callable[[Any], Step], after: Callable[[Any], None], conn: Any) -> Step:
    """A step's write, then `after` in the same transaction (only if the write applied: a
    refused one raises)."""
    step = step_tx(conn)
    after(conn)
    return step


def _into_slot(slot: Slot, tx: Callable[[Any], Step], conn: Any) -> Step:
    slot.step = tx(conn)
    return slot.step
