"""Session leases: who drives a session ("one driver", docs/architecture.md), as values,
plus the fenced view of a store that one lease holder writes through.

A lease lives in the session's row (owner, expiry, fencing token). The token increases on
every acquisition, so a write carrying an older token comes from a worker that lost the
session — e.g. one that was paused past its expiry while another took over — and is refused
with LeaseLost inside the write's own transaction. Expiry is measured by one clock: the
database server's (PostgreSQL) or the host's (SQLite, whose writers share one machine).

A worker also registers itself (`workers` table) and holds a presence lock while its process
lives (a PostgreSQL advisory lock on its own connection; an flock on a file beside the SQLite
database). A lease whose registered owner no longer holds its presence lock belongs to a dead
worker and may be taken over before it expires; a lease of an unregistered owner only by
expiry. Fencing keeps every takeover safe for the record either way.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xclaw.errors import LeaseLost
from xclaw.store.model import SessionState, Status, StepStatus, state_of

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from xclaw.store.base import RollbackResult, Store
    from xclaw.store.changes import SessionChange
    from xclaw.store.model import NewStep, Session, Step, StepTreeNode
    from xclaw.store.snapshot_model import (
        Manifest,
        PendingRestore,
        SnapshotInfo,
        WorkspaceRestore,
    )
    from xclaw.store.stream import WriteStream
    from xclaw.store.transfer import Exported, Imported

# Store methods that write a session's record: through a DrivenStore each one carries the
# lease, and the backend checks its token in the same transaction as the write.
FENCED_METHODS = frozenset(
    {
        "begin_step",
        "add_step",
        "complete_step",
        "fail_step",
        "transition",
        "mark_interrupted",
        "rollback",
    }
)


def new_worker_id() -> str:
    """hostname:pid:random — readable in `xclaw workers`, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to drive one session, as its holder sees it."""

    session_id: str
    owner: str
    token: int
    expires_at: int  # ms since the epoch, by the store's lease clock


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A session's lease as anyone may read it (busy messages, `xclaw workers`, the sweep)."""

    session_id: str
    status: Status
    owner: str | None
    token: int
    expires_at: int | None
    now: int  # the lease clock when this was read: expiry is compared with it, not ours
    # True: the owner's presence lock is held; False: it registered and is gone (dead);
    # None: unknown (never registered), so only the expiry counts.
    owner_alive: bool | None = None
    awaiting_input: bool = False

    @property
    def live(self) -> bool:
        """Someone drives the session right now: nobody else may."""
        return (
            self.owner is not None
            and self.expires_at is not None
            and self.expires_at > self.now
            and self.owner_alive is not False
        )

    @property
    def run_in_flight(self) -> bool:
        """A run of the session is going on somewhere: the `busy` of session_state for
        whoever reads leases without a server. A run holds a live lease on a Running or Paused
        session; a finished session's lease that has not expired yet is no run."""
        return self.live and self.status in (Status.RUNNING, Status.PAUSED)

    @property
    def state(self) -> SessionState:
        """The session's state in words, by the one rule (session_state)."""
        return state_of(self.status, busy=self.run_in_flight, awaiting_input=self.awaiting_input)

    @property
    def expires_in_s(self) -> float:
        return 0.0 if self.expires_at is None else max(0.0, (self.expires_at - self.now) / 1000)


@dataclass(frozen=True, slots=True)
class SweepTargets:
    """What a sweep acts on, read without loading every session that ever had a driver
    (a server keeps thousands waiting for their next instruction, each with its owner on
    record): the Running sessions not waiting for input whose lease expired at least the
    grace period ago, and the dead workers that hold no unexpired lease of an unfinished
    (Running or Paused) session, whose rows may go."""

    sessions: list[LeaseInfo]
    dead_workers: list[str]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    worker_id: str
    host: str
    pid: int
    started_at: int
    seen_at: int
    info: dict[str, Any] = field(default_factory=dict)
    alive: bool | None = None


def check_lease_for(lease: Lease | None, session_id: str) -> None:
    """A lease may only fence writes of its own session."""
    if lease is not None and lease.session_id != session_id:
        raise LeaseLost(
            f"the lease of session {lease.session_id} cannot write session {session_id}"
        )


def lease_lost(session_id: str, lease: Lease, token: int | None, owner: str | None) -> LeaseLost:
    return LeaseLost(
        f"session {session_id} is now driven by {owner or 'nobody'} (lease token {token}); "
        f"the write of {lease.owner} with token {lease.token} was refused"
    )


class DrivenStore:
    """A store as one lease holder sees it: every write of the leased session carries the
    fencing token (the methods in FENCED_METHODS); reads and everything else pass through.
    The recorder writes through it without knowing leases exist. Each method is written
    out, so the type checker sees the whole Store protocol here and a method added to it
    without a decision on fencing fails the check (DrivenStore must stay a Store)."""

    def __init__(self, store: Store, lease: Lease) -> None:
        self.store = store
        self.lease = lease

    def __repr__(self) -> str:
        return f"DrivenStore({self.store!r}, {self.lease.owner} #{self.lease.token})"

    def _fence(self, lease: Lease | None) -> Lease:
        """The lease a fenced write carries: this view's, unless the caller names one."""
        return self.lease if lease is None else lease

    @property
    def url(self) -> str:
        return self.store.url

    @property
    def commits(self) -> int:
        return self.store.commits

    @property
    def writer_busy_s(self) -> float | None:
        return self.store.writer_busy_s

    def driven(self, lease: Lease) -> Store:
        return self.store.driven(lease)

    def close(self) -> None:
        self.store.close()

    def create_session(
        self,
        *,
        session_id: str | None = None,
        title: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        return self.store.create_session(session_id=session_id, title=title, metadata=metadata)

    def get_session(self, session_id: str) -> Session:
        return self.store.get_session(session_id)

    def find_session(self, session_id: str) -> Session | None:
        return self.store.find_session(session_id)

    def resolve_session(self, ref: str) -> Session:
        return self.store.resolve_session(ref)

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        return self.store.list_sessions(limit=limit)

    def update_session(
        self, session_id: str, *, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Session:
        return self.store.update_session(session_id, title=title, metadata=metadata)

    def delete_session(self, session_id: str) -> None:
        return self.store.delete_session(session_id)

    def transition(
        self,
        session_id: str,
        target: Status,
        *,
        awaiting_input: bool = False,
        lease: Lease | None = None,
    ) -> Session:
        return self.store.transition(
            session_id, target, awaiting_input=awaiting_input, lease=self._fence(lease)
        )

    def begin_step(self, session_id: str, step: NewStep, *, lease: Lease | None = None) -> Step:
        return self.store.begin_step(session_id, step, lease=self._fence(lease))

    def add_step(
        self,
        session_id: str,
        step: NewStep,
        *,
        status: StepStatus = StepStatus.COMPLETED,
        output_data: Any = None,
        error_message: str | None = None,
        lease: Lease | None = None,
    ) -> Step:
        return self.store.add_step(
            session_id,
            step,
            status=status,
            output_data=output_data,
            error_message=error_message,
            lease=self._fence(lease),
        )

    def complete_step(
        self,
        session_id: str,
        seq: int,
        *,
        output_data: Any = None,
        token_usage_prompt: int | None = 0,
        token_usage_completion: int | None = 0,
        session_status: Status | None = None,
        durable: bool = False,
        lease: Lease | None = None,
    ) -> Step:
        return self.store.complete_step(
            session_id,
            seq,
            output_data=output_data,
            token_usage_prompt=token_usage_prompt,
            token_usage_completion=token_usage_completion,
            session_status=session_status,
            durable=durable,
            lease=self._fence(lease),
        )

    def fail_step(
        self,
        session_id: str,
        seq: int,
        *,
        error_message: str,
        output_data: Any = None,
        token_usage_prompt: int | None = 0,
        token_usage_completion: int | None = 0,
        session_status: Status | None = None,
        durable: bool = False,
        lease: Lease | None = None,
    ) -> Step:
        return self.store.fail_step(
            session_id,
            seq,
            error_message=error_message,
            output_data=output_data,
            token_usage_prompt=token_usage_prompt,
            token_usage_completion=token_usage_completion,
            session_status=session_status,
            durable=durable,
            lease=self._fence(lease),
        )

    def get_step(self, session_id: str, ref: str | int) -> Step:
        return self.store.get_step(session_id, ref)

    def latest_steps(self, session_id: str, n: int = 10) -> list[Step]:
        return self.store.latest_steps(session_id, n)

    def steps(
        self,
        session_id: str,
        *,
        agent: str | None = None,
        statuses: Iterable[StepStatus] | None = None,
        after_seq: int = 0,
    ) -> list[Step]:
        return self.store.steps(session_id, agent=agent, statuses=statuses, after_seq=after_seq)

    def step_tree(self, session_id: str) -> list[StepTreeNode]:
        return self.store.step_tree(session_id)

    def mark_interrupted(
        self,
        session_id: str,
        *,
        keep_approvals: bool = True,
        approval_output: Mapping[str, Any] | None = None,
        lease: Lease | None = None,
    ) -> list[Step]:
        return self.store.mark_interrupted(
            session_id,
            keep_approvals=keep_approvals,
            approval_output=approval_output,
            lease=self._fence(lease),
        )

    def rollback(
        self,
        session_id: str,
        ref: str | int,
        *,
        workspace: WorkspaceRestore | None = None,
        lease: Lease | None = None,
    ) -> RollbackResult:
        return self.store.rollback(session_id, ref, workspace=workspace, lease=self._fence(lease))

    def fork(
        self,
        session_id: str,
        ref: str | int,
        *,
        title: str | None = None,
        workspace: WorkspaceRestore | None = None,
    ) -> Session:
        return self.store.fork(session_id, ref, title=title, workspace=workspace)

    def import_sessions(self, exported: Sequence[Exported]) -> list[Imported]:
        return self.store.import_sessions(exported)

    def retention_preview(self, session_ids: Sequence[str]) -> tuple[int, int, int]:
        return self.store.retention_preview(session_ids)

    def missing_blobs(self, hashes: Iterable[str]) -> set[str]:
        return self.store.missing_blobs(hashes)

    def put_blobs(self, blobs: Mapping[str, bytes]) -> int:
        return self.store.put_blobs(blobs)

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        return self.store.get_blobs(hashes)

    def gc_blobs(self) -> int:
        return self.store.gc_blobs()

    def save_snapshot(
        self, session_id: str, seq: int, manifest: Mapping[str, Any], *, new_bytes: int = 0
    ) -> SnapshotInfo:
        return self.store.save_snapshot(session_id, seq, manifest, new_bytes=new_bytes)

    def list_snapshots(self, session_id: str) -> list[SnapshotInfo]:
        return self.store.list_snapshots(session_id)

    def get_snapshot(self, session_id: str, seq: int) -> Manifest | None:
        return self.store.get_snapshot(session_id, seq)

    def snapshot_from(self, session_id: str, seq: int) -> tuple[int, Manifest] | None:
        return self.store.snapshot_from(session_id, seq)

    def pending_restores(self, session_id: str | None = None) -> list[PendingRestore]:
        return self.store.pending_restores(session_id)

    def finish_restore(self, session_id: str, restore_id: str) -> bool:
        return self.store.finish_restore(session_id, restore_id)

    def register_worker(self, worker_id: str, info: dict[str, Any] | None = None) -> None:
        return self.store.register_worker(worker_id, info)

    def heartbeat(self, worker_id: str) -> None:
        return self.store.heartbeat(worker_id)

    def unregister_worker(self, worker_id: str) -> None:
        return self.store.unregister_worker(worker_id)

    def workers(self) -> list[WorkerInfo]:
        return self.store.workers()

    def changes_since(self, since_ms: int) -> list[SessionChange]:
        return self.store.changes_since(since_ms)

    def forget_worker(self, worker_id: str) -> bool:
        return self.store.forget_worker(worker_id)

    def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease | None:
        return self.store.acquire_lease(session_id, owner, ttl_s)

    def renew_lease(self, lease: Lease, ttl_s: float) -> Lease:
        return self.store.renew_lease(lease, ttl_s)

    def release_lease(self, lease: Lease) -> bool:
        return self.store.release_lease(lease)

    def lease_info(self, session_id: str) -> LeaseInfo:
        return self.store.lease_info(session_id)

    def leases(self, *, statuses: Iterable[Status] | None = None) -> list[LeaseInfo]:
        return self.store.leases(statuses=statuses)

    def sweep_targets(self, grace_ms: int) -> SweepTargets:
        return self.store.sweep_targets(grace_ms)

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        # The backend's stream, every step write on it fenced by this lease.
        return self.store.write_stream(self._fence(lease))
