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
from functools import partial
from typing import TYPE_CHECKING, Any

from xclaw.errors import LeaseLost
from xclaw.store.model import Status

if TYPE_CHECKING:
    from xclaw.store.base import Store

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
    def expires_in_s(self) -> float:
        return 0.0 if self.expires_at is None else max(0.0, (self.expires_at - self.now) / 1000)


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
    fencing token; reads and everything else pass through. The recorder writes through it
    without knowing leases exist."""

    def __init__(self, store: Store, lease: Lease) -> None:
        self.store = store
        self.lease = lease

    @property
    def url(self) -> str:
        return self.store.url

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name in FENCED_METHODS:
            return partial(attr, lease=self.lease)
        return attr

    def __repr__(self) -> str:
        return f"DrivenStore({self.store!r}, {self.lease.owner} #{self.lease.token})"
