"""[runtime] The runtime's side of session leases ("one driver", docs/architecture.md): take one
before a run starts, renew it while the run lives, give it back when the run ends.

A run whose lease another worker took (this process was paused past its expiry, or lost its
database connection) is stopped without writing: every write it still attempts carries the
old fencing token and is refused by the store (LeaseLost), so the session's record stays the
new driver's alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from xclaw import __version__
from xclaw.errors import LeaseLost, SessionBusy
from xclaw.recorder.caller import StoreCaller
from xclaw.store.base import LeaseStore, StepWriter
from xclaw.store.leases import Lease, LeaseInfo
from xclaw.store.steps.stream import WriteStream
from xclaw.store.steps.writes import ReleaseLease, RenewLease

log = logging.getLogger("xclaw.leases")


def busy_message(info: LeaseInfo) -> str:
    return (
        f"session {info.session_id} is being driven by worker {info.owner} (lease "
        f"#{info.token}, expires in {info.expires_in_s:.0f} s unless renewed); wait for its "
        "reply or cancel it"
    )


class LeaseWriter(Protocol):
    """The roles the keeper takes: the leases, and the record's write stream for renewals
    and releases (batched with the runs' writes); where it is (for the log)."""

    @property
    def url(self) -> str: ...

    @property
    def leases(self) -> LeaseStore: ...

    @property
    def record(self) -> StepWriter: ...


class LeaseKeeper:
    """Acquires, renews and releases the leases of one worker's runs."""

    def __init__(
        self, store: LeaseWriter, db: StoreCaller[LeaseStore], worker_id: str, ttl_s: float
    ) -> None:
        self.store = store
        self.db = db
        self.worker_id = worker_id
        self.ttl_s = ttl_s
        self.info: dict[str, Any] = {"version": __version__}
        self._registered = False

    async def register(self) -> None:
        """Announce this worker (idempotent): its presence lets others tell it is alive."""
        if not self._registered:
            await self.db(self.store.leases.register_worker, self.worker_id, self.info)
            self._registered = True
            log.info("event=worker_registered worker=%s db=%s", self.worker_id, self.store.url)

    async def unregister(self) -> None:
        if self._registered:
            self._registered = False
            await self.db(self.store.leases.unregister_worker, self.worker_id)

    async def try_acquire(self, session_id: str) -> tuple[Lease | None, LeaseInfo | None]:
        """(lease, None), or (None, the live lease of the worker that drives it)."""
        await self.register()
        lease = await self.db(
            self.store.leases.acquire_lease, session_id, self.worker_id, self.ttl_s
        )
        if lease is not None:
            self.acquired(lease)
            return lease, None
        return None, await self.db(self.store.leases.lease_info, session_id)

    def acquired(self, lease: Lease) -> None:
        """Say so in the log (every lease taken, however it was taken)."""
        log.info(
            "event=lease_acquired session=%s worker=%s token=%s",
            lease.session_id,
            self.worker_id,
            lease.token,
        )

    async def acquire(self, session_id: str) -> Lease:
        """The lease, or SessionBusy naming the worker that holds it."""
        lease, holder = await self.try_acquire(session_id)
        if lease is None:
            assert holder is not None
            raise SessionBusy(busy_message(holder))
        return lease

    def keep_alive(
        self, get: Callable[[], Lease], put: Callable[[Lease], None], lost: Callable[[str], None]
    ) -> asyncio.Task[None]:
        """Renew every third of the TTL while the run lives; `lost` once another owns it."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(self.ttl_s / 3)
                lease = get()
                try:
                    # Straight to the writer, batched with the runs' writes (a stream of its
                    # own each time: a failed renewal must not break the next one's).
                    renewed = await self.store.record.write_stream().put(
                        RenewLease(lease=lease, ttl_s=self.ttl_s)
                    )
                    put(renewed)
                except LeaseLost as e:
                    lost(e.message)
                    return
                except Exception as e:  # noqa: BLE001 - the database is away: the fence still protects
                    log.warning(
                        "event=lease_renew_failed session=%s worker=%s error=%r",
                        lease.session_id,
                        self.worker_id,
                        str(e)[:200],
                    )

        return asyncio.create_task(loop(), name="xclaw-lease-renewer")

    async def release(self, lease: Lease, writes: WriteStream | None = None) -> None:
        """Give the lease back. With `writes` (on the loop), the release goes to the writer
        straight, batched with other sessions' writes, instead of through a thread."""
        try:
            if writes is not None:
                await writes.put(ReleaseLease(lease=lease))
            else:
                await self.db(self.store.leases.release_lease, lease)
        except Exception as e:  # noqa: BLE001 - the lease then simply expires
            log.warning(
                "event=lease_release_failed session=%s worker=%s error=%r",
                lease.session_id,
                self.worker_id,
                str(e)[:200],
            )
