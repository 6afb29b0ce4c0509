"""[store] Session leases: who drives a session ("one driver", docs/architecture.md), as values,
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
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import LeaseLost
from xclaw.store.steps.model import SessionState, Status, state_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from xclaw.store.base import PlanDone, RollbackResult, StepWriter
    from xclaw.store.snapshots.model import WorkspaceRestore
    from xclaw.store.steps.model import Session, Step
    from xclaw.store.steps.stream import WriteStream
    from xclaw.store.steps.writes import Writes

R = TypeVar("R")


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
    """The step writer of one lease holder (base.StepWriter): every write of the leased
    session carries the fencing token, and the backend checks it in the same transaction
    (LeaseLost, nothing written). Only the writes: reads and the rest of the store need no
    token and are asked of the store itself. Each method is written out, so the type checker
    sees the whole role here (a method added to StepWriter without one here fails it)."""

    def __init__(self, store: StepWriter, lease: Lease) -> None:
        self.store = store
        self.lease = lease

    def __repr__(self) -> str:
        return f"DrivenStore({self.store!r}, {self.lease.owner} #{self.lease.token})"

    def _fence(self, lease: Lease | None) -> Lease:
        """The lease a write carries: this view's, unless the caller names one."""
        return self.lease if lease is None else lease

    def write_stream(self, lease: Lease | None = None) -> WriteStream:
        # The backend's stream, every step write on it fenced by this lease.
        return self.store.write_stream(self._fence(lease))

    def write(self, w: Writes[R], lease: Lease | None = None) -> R:
        return self.store.write(w, lease=self._fence(lease))

    def transition(
        self,
        session_id: str,
        target: Status,
        *,
        lease: Lease | None = None,
        awaiting_input: bool = False,
    ) -> Session:
        return self.store.transition(
            session_id, target, awaiting_input=awaiting_input, lease=self._fence(lease)
        )

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
        plan: PlanDone | None = None,
    ) -> RollbackResult:
        return self.store.rollback(
            session_id, ref, workspace=workspace, lease=self._fence(lease), plan=plan
        )
