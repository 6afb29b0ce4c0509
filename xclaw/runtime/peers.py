"""[runtime] The seams between this worker and the others on one database: what the runtime asks of
its Cluster while serving, and the message bus a store may offer (PostgreSQL's LISTEN/NOTIFY).
Protocols, so the runtime does not import the cluster and the cluster no store backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from xclaw.people.answered_by import AnsweredBy
from xclaw.store.leases import LeaseInfo
from xclaw.wire.shapes import Frame


class FrameBus(Protocol):
    """Messages between the workers: publish never blocks; `key` lets listeners skip one."""

    def publish(self, message: dict[str, Any], key: str = "") -> None: ...
    def close(self) -> None: ...


@runtime_checkable
class BusStore(Protocol):
    """A store whose workers can talk to each other (PostgresStore; SQLite has no bus)."""

    def open_bus(
        self,
        on_message: Callable[[dict[str, Any]], None],
        wants: Callable[[str], bool] | None = None,
    ) -> FrameBus: ...


class Peers(Protocol):
    """What the runtime asks of the other workers (xclaw.runtime.cluster.Cluster)."""

    def publish(self, session_id: str, frame: Frame) -> None: ...
    def driven_elsewhere(self, session_id: str) -> str | None: ...
    def remote_approval_frames(self, session_id: str) -> list[Frame]: ...
    def forward_approval(
        self,
        session_id: str,
        step_ref: str,
        approve: bool,
        by: AnsweredBy,
        *,
        message: str | None = None,
        edited: dict[str, Any] | None = None,
    ) -> bool: ...
    def forward_cancel(self, session_id: str) -> bool: ...
    async def announce_queued(self, session_id: str) -> None: ...
    async def observe(self, info: LeaseInfo) -> None: ...
    def forget(self, session_id: str) -> None: ...
    async def stop(self) -> None: ...
