"""[runtime] The runs in flight on this worker, at most one per session (one driver): claimed at
once, launched under the session's lease, let go when they end, stopped at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from xclaw.errors import LeaseLost, SessionBusy, StoreError
from xclaw.recorder.caller import StoreCaller
from xclaw.runtime.drive import Drive
from xclaw.runtime.leases import LeaseKeeper
from xclaw.runtime.opening import Opened
from xclaw.runtime.run import Run
from xclaw.runtime.subscribers import Broadcast
from xclaw.runtime.turn_plan import Turn
from xclaw.store.base import StepWriter
from xclaw.store.leases import Lease
from xclaw.store.steps.rows import now_ms
from xclaw.store.steps.stream import WriteStream
from xclaw.telemetry.exporter import TurnExporter
from xclaw.wire.build import notice_frame

log = logging.getLogger("xclaw.runtime")

LEASE_LOST_NOTICE = "[lease] another worker took over this session; this one stopped driving it"


@dataclass(frozen=True, slots=True)
class RunsParts:
    """What the runs work with, wired once by the runtime's assembly."""

    drive: Drive  # a turn carried out (xclaw/runtime/drive.py)
    leases: LeaseKeeper
    broadcast: Broadcast
    # A run's writes under its lease (the marks a shutdown leaves).
    writer: Callable[[Lease | None], StoreCaller[StepWriter]]
    # Straight to the writer, batched with other sessions' writes (a lease's release).
    write_stream: Callable[[], WriteStream]
    telemetry: TurnExporter | None
    worker_id: str


class Runs:
    def __init__(self, parts: RunsParts) -> None:
        self.parts = parts
        self._runs: dict[str, Run] = {}
        self.resuming: set[str] = set()  # sessions whose resume is being decided
        self.stopping = False  # shutting down: no run starts
        # Sessions this worker knows have messages waiting (xclaw/runtime/inputs.py), and
        # those whose run just ended and hands over to the first of them: busy meanwhile,
        # so no new message slips in ahead of the queue.
        self.queued: set[str] = set()
        self.handing_over: dict[str, asyncio.Task[None]] = {}
        self.after_run: Callable[[str], Awaitable[None]] | None = None

    def get(self, session_id: str) -> Run | None:
        return self._runs.get(session_id)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._runs

    def driven(self) -> list[str]:
        """Sessions this worker drives right now (under its lease)."""
        return sorted(sid for sid, run in self._runs.items() if run.lease is not None)

    def claim(self, session_id: str) -> Run:
        """The session's one place here, taken synchronously: no second driver can slip in.
        SessionBusy if it is taken: a caller that checked before an await (a message, a
        compaction) must not take another's place, whose unclaim would then orphan the run
        that holds it (one driver)."""
        if session_id in self._runs:
            raise SessionBusy(
                "a run is in flight for this session; wait for its reply or cancel it"
            )
        run = Run()
        self._runs[session_id] = run
        return run

    def unclaim(self, session_id: str, run: Run) -> None:
        if self._runs.get(session_id) is run:
            del self._runs[session_id]

    def launch(
        self, session_id: str, run: Run, lease: Lease, turn: Turn, opened: Opened | None = None
    ) -> None:
        p = self.parts
        run.lease = lease
        if p.broadcast.peers is not None:
            p.broadcast.peers.forget(session_id)  # driven here now
        run.renewer = p.leases.keep_alive(
            lambda: run.lease,  # type: ignore[arg-type,return-value]
            lambda renewed: setattr(run, "lease", renewed),
            lambda why: self.lose_lease(session_id, run, why),
        )
        run.task = asyncio.create_task(self._turn(session_id, run, turn, opened))

    async def _turn(self, sid: str, run: Run, turn: Turn, opened: Opened | None) -> None:
        """The turn driven (xclaw/runtime/drive.py), then what it held let go: its place here
        and its lease."""
        p = self.parts
        started = now_ms()
        try:
            await p.drive(sid, run, turn, opened)
        finally:
            if p.telemetry is not None:  # spans from what this run committed (never blocks)
                p.telemetry.run_ended(sid, started)
            if run.renewer is not None:
                # Cancelled, and let go: the renewer's frame holds this run (a cycle through
                # its CancelledError's traceback would otherwise wait for a full collection).
                run.renewer.cancel()
                run.renewer = None
            hand_over = (
                sid in self.queued
                and run.lost is None
                and not self.stopping
                and self.after_run is not None
            )
            lease = run.lease if run.lost is None and not self.stopping else None
            if hand_over:
                # The first waiting message starts, in a task of its own (this run's
                # watchers see this run end first); the session stays busy meanwhile. The
                # lease is kept for it: the write that opens its turn takes a newer token
                # of it, instead of waiting on this release's commit (a row lock and a
                # synced commit on PostgreSQL); it is released only if nothing started.
                self.handing_over[sid] = asyncio.create_task(self._hand_over(sid, lease))
                lease = None
            self.unclaim(sid, run)
            if lease is not None:
                # The next run may start at once, here or anywhere. (One that starts here
                # first takes a newer token, and this release of the old one is a no-op.)
                await p.leases.release(lease, p.write_stream())

    async def _hand_over(self, sid: str, lease: Lease | None) -> None:
        try:
            if self.after_run is not None:
                await self.after_run(sid)
        except Exception:
            log.exception("event=hand_over_failed session=%s", sid)
        finally:
            if self.handing_over.get(sid) is asyncio.current_task():
                del self.handing_over[sid]
            started = self._runs.get(sid)
            if (
                lease is not None
                and not self.stopping
                and (started is None or started.lease is None)
            ):
                # Nothing started here with it: the session is free for anyone.
                await self.parts.leases.release(lease, self.parts.write_stream())

    def lose_lease(self, sid: str, run: Run, why: str) -> None:
        """Another worker took the session: stop at once; every later write is refused."""
        if run.lost is None:
            run.lost = why
            log.warning(
                "event=lease_lost session=%s worker=%s reason=%r", sid, self.parts.worker_id, why
            )
            self.parts.broadcast.deliver(sid, notice_frame(LEASE_LOST_NOTICE))
        task = run.task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()  # the renewer noticed: stop the run where it waits

    async def wait_idle(self, session_id: str, *, following: bool = True) -> None:
        """Until no run of the session is in flight here — with `following`, the runs of
        the queued messages that follow it included (xclaw/runtime/inputs.py)."""
        while True:
            run = self._runs.get(session_id)
            if run is not None and run.task is not None:
                await asyncio.shield(run.task)
                if not following:
                    return
            elif following and (hand := self.handing_over.get(session_id)) is not None:
                await asyncio.shield(hand)
            else:
                return

    async def stop(self) -> None:
        """Every run stopped where it is; what was running stays for the next start."""
        p = self.parts
        self.stopping = True
        for hand in list(self.handing_over.values()):
            hand.cancel()  # the next start finds its message still waiting
        runs = list(self._runs.items())
        for _, run in runs:
            if run.task is not None:
                run.task.cancel()
        for sid, run in runs:
            if run.task is not None:
                try:
                    await run.task
                except (asyncio.CancelledError, Exception):
                    log.debug("run of %s ended while shutting down", sid, exc_info=True)
            try:
                # Nothing lost: in-flight steps end as interrupted (kept, not deleted); a
                # pending approval stays pending so it is asked again after restart.
                if run.lost is None:
                    db = p.writer(run.lease)
                    await db(db.store.mark_interrupted, sid)
            except LeaseLost:
                log.warning("event=lease_lost session=%s worker=%s", sid, p.worker_id)
            except StoreError as e:  # the next start marks them (nothing lost holds on resume)
                log.warning("could not mark steps of %s interrupted: %s", sid, e.message)
            except Exception:
                log.exception("could not mark steps of %s interrupted", sid)
            if run.renewer is not None:
                run.renewer.cancel()
            if run.lease is not None and run.lost is None:
                await p.leases.release(run.lease)  # another worker may resume it at once
