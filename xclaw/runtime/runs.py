"""The runs in flight on this worker, at most one per session (one driver): claimed at once,
launched under the session's lease, let go when they end, stopped at shutdown."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xclaw.agent.hooks import ApprovalRequest
from xclaw.agent.loop import Policy
from xclaw.answered_by import Answer
from xclaw.errors import LeaseLost, SessionBusy, StoreError
from xclaw.llm.base import Model
from xclaw.protocol import notice_frame
from xclaw.runtime.agent_choice import AgentChoice
from xclaw.runtime.agreement import Agreement
from xclaw.runtime.drive import TurnDrive
from xclaw.store.leases import Lease
from xclaw.store.rows import now_ms

if TYPE_CHECKING:
    from xclaw.runtime.opening import Opened
    from xclaw.runtime.runtime import Runtime
    from xclaw.runtime.turn_plan import Turn

log = logging.getLogger("xclaw.runtime")

LEASE_LOST_NOTICE = "[lease] another worker took over this session; this one stopped driving it"


@dataclass
class Run:
    """One run in flight: the single driver of its session."""

    task: asyncio.Task[None] | None = None
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    # The session's lease while this worker drives it, renewed in the background; `lost`
    # says why once another worker took it (the run then stops without writing).
    lease: Lease | None = None
    renewer: asyncio.Task[None] | None = None
    lost: str | None = None
    # What this run drives with, when the session's configuration is not this worker's
    # (xclaw/runtime/agreement.py): said in a notice and a session_config alert as it starts.
    agreement: Agreement | None = None
    model: Model | None = None
    policy: Policy | None = None
    # The declared agent the run runs (xclaw/runtime/agent_choice.py); None: xclaw's own.
    agent: AgentChoice | None = None
    # display step id -> (request, future answered by answer_approval)
    approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[Answer]]] = field(
        default_factory=dict
    )


class Runs:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._runs: dict[str, Run] = {}
        self.resuming: set[str] = set()  # sessions whose resume is being decided
        self.stopping = False  # shutting down: no run starts

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
        rt = self.rt
        run.lease = lease
        if rt.cluster is not None:
            rt.cluster.forget(session_id)  # driven here now
        run.renewer = rt.leases.keep_alive(
            lambda: run.lease,  # type: ignore[arg-type,return-value]
            lambda renewed: setattr(run, "lease", renewed),
            lambda why: self.lose_lease(session_id, run, why),
        )
        run.task = asyncio.create_task(self._turn(session_id, run, turn, opened))

    async def _turn(self, sid: str, run: Run, turn: Turn, opened: Opened | None) -> None:
        """The turn driven (xclaw/runtime/drive.py), then what it held let go: its place here
        and its lease."""
        rt = self.rt
        started = now_ms()
        try:
            await TurnDrive(rt, sid, run, turn).drive(opened)
        finally:
            if rt.telemetry is not None:  # spans from what this run committed (never blocks)
                rt.telemetry.run_ended(sid, started)
            if run.renewer is not None:
                # Cancelled, and let go: the renewer's frame holds this run (a cycle through
                # its CancelledError's traceback would otherwise wait for a full collection).
                run.renewer.cancel()
                run.renewer = None
            self.unclaim(sid, run)
            if run.lease is not None and run.lost is None and not self.stopping:
                # The next run may start at once, here or anywhere. (One that starts here
                # first takes a newer token, and this release of the old one is a no-op.)
                await rt.leases.release(run.lease, rt.store.write_stream())

    def lose_lease(self, sid: str, run: Run, why: str) -> None:
        """Another worker took the session: stop at once; every later write is refused."""
        if run.lost is None:
            run.lost = why
            log.warning(
                "event=lease_lost session=%s worker=%s reason=%r", sid, self.rt.worker_id, why
            )
            self.rt.deliver(sid, notice_frame(LEASE_LOST_NOTICE))
        task = run.task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()  # the renewer noticed: stop the run where it waits

    async def wait_idle(self, session_id: str) -> None:
        run = self._runs.get(session_id)
        if run is not None and run.task is not None:
            await asyncio.shield(run.task)

    async def stop(self) -> None:
        """Every run stopped where it is; what was running stays for the next start."""
        rt = self.rt
        self.stopping = True
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
                    await rt.db(rt.store.mark_interrupted, sid, lease=run.lease)
            except LeaseLost:
                log.warning("event=lease_lost session=%s worker=%s", sid, rt.worker_id)
            except StoreError as e:  # the next start marks them (nothing lost holds on resume)
                log.warning("could not mark steps of %s interrupted: %s", sid, e.message)
            except Exception:
                log.exception("could not mark steps of %s interrupted", sid)
            if run.renewer is not None:
                run.renewer.cancel()
            if run.lease is not None and run.lost is None:
                await rt.leases.release(run.lease)  # another worker may resume it at once
