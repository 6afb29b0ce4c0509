"""[store] The Store protocol: the seam between the layers above and a database backend. What
`open_store` returns (`Store`) is the roles, each an object of its own over the backend's one
connection layer (store/roles.py, store/role.py), and their closing — no role's methods of its
own. A caller takes the role it uses and hands on only that (tests/test_layering.py checks):

- `store.record` (Record): sessions and their steps —
  - RecordReader: read (read-only commands, views, history rebuilds);
  - StepWriter: a run's writes to a session's record (the recorder's write stream, a run's
    outcome, rollback) — the only methods that carry a fencing token (`lease=`);
  - RecordStore: sessions as wholes (create, rename, delete, fork, import, retention);
- `store.snapshots` (SnapshotStore): blobs, snapshots, the restore journal (the workspaces);
- `store.leases` (LeaseStore): workers and leases (the cluster), `driven(lease)`: the
  StepWriter of one lease holder (leases.DrivenStore), every write fenced;
- `store.teams` (TeamStore), `store.budgets` (BudgetStore), `store.schedules` (ScheduleStore).

A part that uses several roles names them in a protocol of role attributes (e.g.
runtime/cluster.py ClusterStore: `record` and `leases`), which the Store satisfies.

The one write path, `write(value)` (WritePath), is the connection layer's, reached the same
from every role that writes (the record, the budgets, the schedules).
Each method is exactly one transaction, so no caller can get a transaction boundary wrong;
`write_stream` hands a run's writes to the backend's writer in order, each still its own
all-or-nothing unit, and says when each is committed.
Why write-ahead holds (docs/architecture.md) is told in store/steps/writes.py. The StepWriter's
methods take an optional `lease=`: its fencing token is checked in the same transaction
(LeaseLost, nothing written), so a worker that lost the session cannot write it (one driver;
`driven(lease)` binds a lease to every such write).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar, runtime_checkable

from xclaw.store.blobs.store import BlobStore
from xclaw.store.leases import Lease, LeaseInfo, SweepTargets, WorkerInfo
from xclaw.store.snapshots.model import Manifest, PendingRestore, SnapshotInfo, WorkspaceRestore
from xclaw.store.steps.changes import SessionChange
from xclaw.store.steps.model import Session, Status, Step, StepStatus, StepTreeNode
from xclaw.store.steps.stream import WriteStream

# Defined beside the write values that return them, kept importable from here.
from xclaw.store.steps.writes import PlanDone as PlanDone
from xclaw.store.steps.writes import RollbackResult as RollbackResult
from xclaw.store.steps.writes import Writes

if TYPE_CHECKING:
    from xclaw.people.teams import ShareRole, UserRole
    from xclaw.store.budgets.sql import BudgetRow
    from xclaw.store.fsck_rows import FsckAccess
    from xclaw.store.queue.sql import QueuedInput
    from xclaw.store.schedules.sql import Fire, Hook, Schedule
    from xclaw.store.teams.sql import SessionAction, Share, User
    from xclaw.store.transfer.format import Exported, Imported

R = TypeVar("R")


@runtime_checkable
class RecordReader(Protocol):
    """The record read: sessions and their steps, never a write (read-only commands, views,
    history rebuilds, telemetry)."""

    @property
    def url(self) -> str:
        """Where the data lives, for banners and messages (a path or a redacted URL)."""
        ...

    def get_session(self, session_id: str) -> Session:
        """Raises SessionNotFound."""
        ...

    def find_session(self, session_id: str) -> Session | None: ...

    def resolve_session(self, ref: str) -> Session:
        """A full id or a unique prefix. Raises SessionNotFound / AmbiguousSession."""
        ...

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """Most recently updated first."""
        ...

    def get_step(self, session_id: str, ref: str | int) -> Step:
        """`s0005`, `5` or the full step id. Raises StepNotFound (`bad_step`)."""
        ...

    def latest_steps(self, session_id: str, n: int = 10) -> list[Step]:
        """The last n steps, oldest first (for /steps)."""
        ...

    def steps(
        self,
        session_id: str,
        *,
        agent: str | None = None,
        statuses: Iterable[StepStatus] | None = None,
        after_seq: int = 0,
    ) -> list[Step]:
        """Steps in sequence order (never by timestamp), optionally of one agent only."""
        ...

    def step_tree(self, session_id: str) -> list[StepTreeNode]:
        """Roots (steps without a parent) with their descendants, in sequence order."""
        ...

    def message_step(self, session_id: str, message_id: str) -> Step | None:
        """The user_input step that recorded the message a client sent with this id
        (`messageId`, docs/protocol.md); None when there is none (or no such session)."""
        ...

    def queued(self, session_id: str) -> list[QueuedInput]:
        """The messages waiting for the session's run to end, in the order they run
        (xclaw/store/queue/sql.py)."""
        ...

    def queued_sessions(self) -> list[str]:
        """Sessions with a message waiting."""
        ...


class WritePath(Protocol):
    """The store's one way to write, reached from every role that writes (the record, the
    budgets, the schedules): the same method of the same connection layer, never a copy."""

    def write(self, w: Writes[R], lease: Lease | None = None) -> R:
        """Apply one write value of store/steps/writes.py as its own transaction, fenced by
        `lease`, committed as its kind's row of writes.SYNC says (a durable one is synced
        when this returns); what the value's type says it returns. The store's one way to
        write: its other write methods build a value and apply it here."""
        ...


@runtime_checkable
class StepWriter(WritePath, Protocol):
    """A run's writes to one session's record: its write stream (store/steps/writes.py), `write`
    (the same values applied one at a time: a step begun, added, finished), its status,
    marking, rollback. These are the methods that carry a fencing token;
    `LeaseStore.driven(lease)` is this role of one lease holder (leases.DrivenStore)."""

    def transition(
        self,
        session_id: str,
        target: Status,
        *,
        lease: Lease | None = None,
        awaiting_input: bool = False,
    ) -> Session:
        """A direct move to `target`, as the event `model.EVENT_FOR_TARGET[target]` (checked
        transitions: `model.next_status`). Raises IllegalTransition. With `awaiting_input`
        (only to Running, else ValueError: a cancelled run, `RUN_CANCELLED`) the session then
        waits for the user's next instruction, as after a rollback, and is not resumed."""
        ...

    def mark_interrupted(
        self,
        session_id: str,
        *,
        keep_approvals: bool = True,
        approval_output: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> list[Step]:
        """Dangling `running` steps -> failed with error "interrupted" (nothing lost); pending
        approval requests are kept running so they can be asked again. With
        `keep_approvals=False` they are settled too, and `approval_output` (the approval
        step's `{"approved", "why", "by"}`) says what ended their wait."""
        ...

    def rollback(
        self,
        session_id: str,
        ref: str | int,
        *,
        workspace: WorkspaceRestore | None = None,
        lease: Lease | None = None,
        plan: PlanDone | None = None,
    ) -> RollbackResult:
        """Delete the target step and every later one — but the records of rollbacks and
        their compensations (model.UNDO_STEPS), which say what was undone; the session goes
        Running and waits for a new instruction. The snapshots of the deleted steps go too,
        and blobs nothing refers to any more are swept. With `workspace`, the workspace state
        before the target (the first snapshot at or after it) is journaled as a pending
        restore (result.restore); with `plan`, that rollback plan is completed. One
        transaction."""
        ...

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        """A stream for one run's writes: values of store/steps/writes.py put on it commit in the
        order put, each all-or-nothing; a write's future resolves once it and every earlier
        one are committed — synced to disk when its kind must be (writes.SYNC). With `lease`,
        every step write on it is fenced by it. The one store call under the write-ahead
        rule (xclaw/store/steps/stream.py)."""
        ...


@runtime_checkable
class RecordStore(RecordReader, Protocol):
    """Sessions as wholes (the original tutorial's two tables): created, renamed, deleted,
    forked, imported; retention; the process's commit counters."""

    @property
    def commits(self) -> int:
        """Write transactions this process has committed (group commit makes it fewer than
        the writes): GET /api/health, bench/gateway_bench.py."""
        ...

    @property
    def writer_busy_s(self) -> float | None:
        """Seconds SQLite's one writer has spent running transactions (how close it is to
        saturation); None where there is no single writer (PostgreSQL's pool)."""
        ...

    def create_session(
        self,
        *,
        session_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """A new session in Init. Generated ids carry >= 96 random bits."""
        ...

    def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """Rename, or replace metadata. Raises SessionNotFound."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Deletes the session and (cascade) its steps; forks keep living, their
        parent_session_id set to NULL. Raises SessionNotFound."""
        ...

    def fork(
        self,
        session_id: str,
        ref: str | int,
        *,
        title: str | None = None,
        workspace: WorkspaceRestore | None = None,
        new_session_id: str | None = None,
    ) -> Session:
        """A new session (is_forked, parent_session_id) whose steps are a copy of the source
        up to and including the target, ids and parent links remapped, with the
        snapshots up to the target. With `workspace`, the new session's workspace is
        journaled (pending_restores): the first snapshot after the target, or (manifest
        None) a copy of the source's current workspace. One transaction; the source is
        untouched. `new_session_id`: the new session's id (else a random one)."""
        ...

    # --- moving sessions, retention (xclaw import / gc) --------------------------------
    def import_sessions(self, exported: Sequence[Exported]) -> list[Imported]:
        """Insert the sessions of an export (store/transfer/format.py), their steps and blobs exactly
        as given (ids, seqs, times, statuses) in one durable transaction: all, or none. A
        session whose id is taken gets a new one; a parent session absent is unlinked."""
        ...

    def retention_preview(self, session_ids: Sequence[str]) -> tuple[int, int, int]:
        """(snapshots, blobs, blob bytes) that deleting these sessions would free."""
        ...


@runtime_checkable
class Record(RecordStore, StepWriter, Protocol):
    """`store.record`: sessions and their steps, read and written (the session manager and
    the step store of the original tutorial, one role since a step write moves its session)."""


@runtime_checkable
class SnapshotStore(Protocol):
    """Workspace snapshots (files follow memory): content-addressed blobs, snapshot rows
    and the restore journal (docs/storage.md "Workspace snapshots")."""

    @property
    def blobs(self) -> BlobStore:
        """Where the contents are (store/blobs/store.py): the database or an object store."""
        ...

    def use_blob_store(self, url: str | None, *, grace_s: float | None = None) -> None:
        """Keep contents in the object store at `url` (None: the database), once, at open."""
        ...

    def missing_blobs(self, hashes: Iterable[str]) -> set[str]:
        """Which of these content hashes the store does not hold."""
        ...

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        """Store contents by sha256 hex (each checked); returns the bytes added."""
        ...

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        """Contents by hash. Raises MissingBlobs."""
        ...

    def gc_blobs(self) -> int:
        """Delete blobs no snapshot, no pending restore and no tool step's image refers to;
        returns how many."""
        ...

    def save_snapshot(
        self,
        session_id: str,
        seq: int,
        manifest: Mapping[str, Any],
        *,
        new_bytes: int = 0,
        lease: Lease | None = None,
        replace: bool = False,
    ) -> SnapshotInfo:
        """Record the whole workspace manifest as it is just before step `seq` (durable).
        Raises MissingBlobs when a content it adds is not stored (put it and save again);
        LeaseLost when `lease` is no longer the session's (the fence). `replace` lets it
        take the place of the session's latest snapshot if that one has the same seq."""
        ...

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]: ...

    def get_snapshot(self, session_id: str, seq: int) -> Manifest | None:
        """The whole manifest of the snapshot before step `seq`; None if there is none."""
        ...

    def snapshot_from(self, session_id: str, seq: int) -> tuple[int, Manifest] | None:
        """The first snapshot at or after `seq`: the workspace just before step `seq`."""
        ...

    def pending_restores(self, session_id: str | None = None) -> list[PendingRestore]: ...

    def finish_restore(self, session_id: str, restore_id: str) -> bool:
        """Drop a completed restore's journal row (only if it is still that restore)."""
        ...


@runtime_checkable
class LeaseStore(Protocol):
    """One driver per session (xclaw/store/leases.py): worker presence and leases with
    fencing tokens; `driven(lease)` is the store as one lease holder writes it."""

    def register_worker(self, worker_id: str, info: dict[str, Any] | None = None) -> None:
        """Announce a live worker; its presence lasts until unregister, close or death."""
        ...

    def heartbeat(self, worker_id: str) -> None: ...

    def unregister_worker(self, worker_id: str) -> None: ...

    def workers(self) -> list[WorkerInfo]: ...

    def changes_since(self, since_ms: int) -> list[SessionChange]:
        """Rollbacks and deletions recorded at or after `since_ms` (ms), oldest first, with
        the process that made each (xclaw/store/steps/changes.py)."""
        ...

    def forget_worker(self, worker_id: str) -> bool:
        """Drop a dead worker's row (its leases then count by expiry alone)."""
        ...

    def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease | None:
        """The lease with a fencing token above every earlier one, unless another owner's
        lease is live (not expired and its owner not known dead): None then."""
        ...

    def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend a lease still ours. Raises LeaseLost once another owner took it."""
        ...

    def release_lease(self, lease: Lease) -> bool:
        """Expire it now (the owner stays on record); False if it was not ours any more."""
        ...

    def lease_info(self, session_id: str) -> LeaseInfo: ...

    def leases(self, *, statuses: Iterable[Status] | None = None) -> list[LeaseInfo]:
        """Every session that has had a driver (only these statuses, if given)."""
        ...

    def sweep_targets(self, grace_ms: int) -> SweepTargets:
        """The sessions a sweep may resume (Running, not awaiting input, lease expired at
        least `grace_ms` ago by the lease clock, latest expiry first) and the dead workers
        it may forget; in SQL, so its cost does not grow with the sessions at rest."""
        ...

    def driven(self, lease: Lease) -> StepWriter:
        """The step writer of the lease holder: every write of its session fenced."""
        ...


@runtime_checkable
class TeamStore(Protocol):
    """Users, who may see each session, and who did what (xclaw/store/teams/sql.py,
    docs/teams.md), `store.teams`. Only hashes of tokens are stored. A run's writes (a
    DrivenStore) never touch it."""

    def add_user(self, name: str, role: UserRole, token_hash: str | None) -> User:
        """TeamError if the name is taken."""
        ...

    def get_user(self, name: str) -> User | None: ...

    def user_by_token_hash(self, token_hash: str) -> User | None: ...

    def users(self) -> list[User]: ...

    def remove_user(self, name: str) -> None:
        """The user and every share of theirs; their sessions become the admin's."""
        ...

    def set_user_token(self, name: str, token_hash: str | None) -> None:
        """The old token stops working with this commit."""
        ...

    def set_user_role(self, name: str, role: UserRole) -> None: ...

    def session_role(self, session_id: str, user: str) -> ShareRole | None:
        """owner, a shared role, or None (no access)."""
        ...

    def session_part(self, session_id: str, user: str) -> tuple[bool, ShareRole | None]:
        """Whether the session exists and the user's part in it, in one query (the same
        work for another's session as for an id nobody has)."""
        ...

    def session_owner(self, session_id: str) -> str | None:
        """None: the admin's."""
        ...

    def create_session_as(
        self, session_id: str, user: str | None, *, title: str = "", member: bool
    ) -> Session | None:
        """A new session and its ownership in one transaction; an id already written: None
        if `user` may act on it (or is not a `member`), else SessionNotFound."""
        ...

    def claim_session(self, session_id: str, user: str, *, granted_by: str | None = None) -> None:
        """Make `user` the owner of a session nobody owns yet (its creator, a fork's maker)."""
        ...

    def session_roles(self, session_ids: list[str]) -> list[tuple[str, str, ShareRole]]:
        """(session, user, role) of every part in these sessions, in one query."""
        ...

    def shares(self, session_id: str) -> list[Share]: ...

    def share_session(
        self, session_id: str, user: str, role: ShareRole, *, by: str | None
    ) -> ShareRole | None:
        """Give `user` a role in the session, logged as a `share` action; the role they had."""
        ...

    def unshare_session(self, session_id: str, user: str, *, by: str | None) -> bool: ...

    def sessions_of(self, user: str, *, limit: int | None = None) -> list[Session]:
        """What the user owns or is shared, most recently updated first."""
        ...

    def record_action(
        self,
        session_id: str,
        kind: str,
        user: str | None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Log a cancel, rollback or fork and who did it."""
        ...

    def session_actions(self, session_id: str) -> list[SessionAction]: ...


@runtime_checkable
class BudgetStore(WritePath, Protocol):
    """Budgets in the record (store/budgets/sql.py, docs/budgets.md): the caps an admin set
    (written with `write(SetBudget(...))`) and what the holds of each scope count."""

    def budget_rows(self, targets: Iterable[str] | None = None) -> dict[str, BudgetRow]: ...

    def budget_totals(self, scopes: Iterable[str]) -> dict[str, tuple[int, float]]: ...

    def budget_holds(self, session_id: str) -> list[tuple[int, int, int, bool]]: ...

    def budget_counters(self, scopes: Iterable[str]) -> dict[str, tuple[int, float]]: ...

    def drop_budget_counters(self) -> None: ...


@runtime_checkable
class ScheduleStore(WritePath, Protocol):
    """Schedules, webhooks and their fires (store/schedules/sql.py, docs/schedules.md): the
    reads; the writes are values (`write(AddSchedule(...))`, store/steps/writes.py)."""

    def get_schedule(self, schedule_id: str) -> Schedule: ...
    def schedules(self, *, created_by: str | None = None) -> list[Schedule]: ...
    def due_schedules(self, now_ms: int, limit: int = 500) -> list[Schedule]: ...
    def next_due(self) -> int | None: ...
    def get_fire(self, fire_id: str) -> Fire | None: ...
    def pending_fires(self, now_ms: int, limit: int = 100) -> list[Fire]: ...
    def fires_of(self, source_id: str, limit: int = 50) -> list[Fire]: ...
    def get_hook(self, name: str) -> Hook | None: ...
    def hooks(self) -> list[Hook]: ...


@runtime_checkable
class Store(Protocol):
    """What `open_store` returns: the roles, each its own object over the backend's one
    connection layer, and their closing. Only what wires the layers together holds it (the
    runtime, the gateway, the commands that open a database); each of them hands every
    other part only the roles it uses (tests/test_layering.py)."""

    @property
    def url(self) -> str:
        """Where the data lives, for banners and messages (a path or a redacted URL)."""
        ...

    @property
    def record(self) -> Record: ...

    @property
    def snapshots(self) -> SnapshotStore: ...

    @property
    def leases(self) -> LeaseStore: ...

    @property
    def teams(self) -> TeamStore: ...

    @property
    def budgets(self) -> BudgetStore: ...

    @property
    def schedules(self) -> ScheduleStore: ...

    def fsck_access(self) -> FsckAccess:
        """The rows xclaw fsck checks (store/fsck_rows.py), read on this connection layer."""
        ...

    def close(self) -> None:
        """Finish every queued write, then close the connections (every role with them)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
