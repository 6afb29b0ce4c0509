"""[workspace] Containers nobody runs: stopped, and removed once their session is gone
(docs/containers.md, "Reaping").

A session's container is kept running between turns, so what it started in the background
answers the next turn. A container whose session no worker drives — its lease expired, or
released, longer ago than `sandbox.container_grace_s` — is stopped (its processes end; its
file system stays, and starts again with the session's next run). One whose session no
longer exists (deleted, or never in this database) is removed with its mount point. The
serving workers do this in their sweep; `xclaw gc` does it by hand and lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from xclaw.sandbox.container.lifecycle import Containers
    from xclaw.store.base import LeaseStore, RecordReader


class ReapStore(Protocol):
    """The roles the reaper reads: the sessions, and who drives them."""

    @property
    def record(self) -> RecordReader: ...

    @property
    def leases(self) -> LeaseStore: ...


@dataclass(frozen=True, slots=True)
class Reaped:
    session_id: str
    action: str  # "stopped" or "removed"
    why: str


def reap(
    store: ReapStore, containers: Containers, grace_s: float, *, dry_run: bool = False
) -> list[Reaped]:
    """Stop or remove the containers of this workspace root that nobody runs (see the module's
    docstring); with `dry_run`, only say which."""
    out = []
    for sid, state, name in containers.listed():
        if name != containers.name(sid):
            out.append(Reaped(sid, "removed", "a creation a crash cut short"))
            if not dry_run:
                containers.discard(name)
            continue
        session = store.record.find_session(sid)
        if session is None:
            out.append(Reaped(sid, "removed", "its session does not exist in this database"))
            if not dry_run:
                containers.remove(sid)
            continue
        if state != "running":
            continue
        lease = store.leases.lease_info(sid)
        if lease.live:
            continue
        since = lease.expires_at if lease.expires_at is not None else session.updated_at
        idle_s = (lease.now - since) / 1000
        if idle_s < grace_s:
            continue
        out.append(
            Reaped(sid, "stopped", f"no worker has run it for {idle_s:.0f} s (grace {grace_s:g} s)")
        )
        if not dry_run:
            containers.stop(sid)
    return out
