"""Whether, and how, each kind of turn starts on this worker — a message, a resume, a
compaction: what it checks first, the session's lease (one driver) and configuration
(xclaw/runtime/session_configs.py), and the run it launches (xclaw/runtime/runs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xclaw.errors import (
    ConfigError,
    ConfigMismatch,
    RollbackPending,
    SessionBusy,
    SessionNotFound,
    XclawError,
)
from xclaw.protocol import error_frame, notice_frame
from xclaw.runtime.leases import busy_message
from xclaw.runtime.opening import open_turn
from xclaw.runtime.turn_plan import Turn
from xclaw.store.model import MAIN_AGENT, Session, Status, StepType
from xclaw.teams import Actor
from xclaw.views import title_from_message

if TYPE_CHECKING:
    from xclaw.runtime.runtime import Runtime


def resumable(session: Session) -> bool:
    """Interrupted work to continue (resume on reconnect): Paused, or Running and not waiting
    for input."""
    return session.status is Status.PAUSED or (
        session.status is Status.RUNNING and not session.awaiting_input
    )


class TurnStarts:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    async def message(
        self, session_id: str, text: str, *, create: bool, actor: Actor | None = None
    ) -> None:
        """A run with the user's `text`; with `create`, an unknown session is created here, at
        its first message (only once a model is configured). `actor`: the user who sent it
        (recorded; a session created here is theirs)."""
        rt, runs = self.rt, self.rt.runs
        if session_id in runs or session_id in runs.resuming:
            raise SessionBusy(
                "a run is in flight for this session; wait for its reply or cancel it"
            )
        if runs.stopping:
            raise SessionBusy("this server is shutting down; send it again in a moment")
        found = await rt.db(rt.store.find_session, session_id)
        if found is None and not create:
            raise SessionNotFound(session_id)
        if found is not None:
            await self._no_rollback_pending(found)
        rt.require_model()  # before recording anything: say how to configure one
        # Another worker's session: with its model chain and approval mode, or refused.
        agreement = await rt.configs.agreement(found, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        # A session is titled after its first message, in the write that opens the turn.
        title = None
        if found is None or (not found.title and not await self._has_user_input(session_id)):
            title = rt.title_of(title_from_message(rt.redact.text(text)))
        run = runs.claim(session_id)
        try:
            await rt.configs.equip(session_id, run, agreement)
            await rt.leases.register()
            lease, opened = await open_turn(
                rt.store,
                session_id,
                rt.redact(text),
                worker_id=rt.worker_id,
                ttl_s=rt.leases.ttl_s,
                create=found is None,
                title=title,
                record=agreement.record,
                actor=actor,
            )
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        if title is not None:
            rt.emit(session_id, {"type": "renamed", "title": title})
        if lease is None:
            runs.unclaim(session_id, run)
            raise SessionBusy(busy_message(await rt.db(rt.store.lease_info, session_id)))
        rt.leases.acquired(lease)
        runs.launch(session_id, run, lease, Turn.MESSAGE, opened)

    async def _no_rollback_pending(self, session: Session) -> None:
        """A rollback a crash cut short is finished first (xclaw/runtime/rollbacks.py); one
        that stopped for a person refuses the turn (RollbackPending) until it is retried or
        abandoned. (Only a Running session can have one: its plan's step ran it.)"""
        rt = self.rt
        if session.status is not Status.RUNNING:
            return
        plan = await rt.db(rt.rollbacks.pending, session.session_id)
        if plan is None:
            return
        if not session.awaiting_input:
            await rt.finish_rollback(session.session_id)
            return
        target = (
            (plan.input_data or {}).get("stepId") if isinstance(plan.input_data, dict) else None
        )
        raise RollbackPending(
            f"a rollback to before {target} stopped half-way ({plan.display_id}): retry it "
            f"(/rollback {target} --retry), rewind leaving the rest done (/rollback {target} "
            "--accept-irreversible), or abandon it (/rollback --abandon) before anything else"
        )

    async def _has_user_input(self, session_id: str) -> bool:
        steps = await self.rt.db(self.rt.store.steps, session_id, agent=MAIN_AGENT)
        return any(st.step_type is StepType.USER_INPUT for st in steps)

    async def resume(self, session_id: str, *, failed: bool) -> bool:
        """Interrupted work continued, when there is some and no run is in flight; with
        `failed`, a Failed session too. True: a run started here."""
        runs = self.rt.runs
        if session_id in runs or session_id in runs.resuming or runs.stopping:
            return False
        # One decision at a time per session (the sweep, a watcher and an attaching client
        # may ask at once): a second would take the lease again and fence the first out.
        runs.resuming.add(session_id)
        try:
            return await self._resume(session_id, failed=failed)
        finally:
            runs.resuming.discard(session_id)

    async def _resume(self, session_id: str, *, failed: bool) -> bool:
        rt, runs = self.rt, self.rt.runs

        def wanted(session: Session) -> bool:
            return resumable(session) or (failed and session.status is Status.FAILED)

        session = await rt.db(rt.store.get_session, session_id)
        if not wanted(session):
            return False
        if resumable(session) and await rt.db(rt.rollbacks.pending, session_id) is not None:
            # A rollback cut short by a crash: finished now, instead of a turn.
            try:
                await rt.finish_rollback(session_id)
            except XclawError as e:
                rt.emit(session_id, error_frame(e.message, e.code))
            return False
        try:
            rt.require_model()
        except ConfigError as e:
            rt.emit(session_id, error_frame(e.message, e.code))
            return False
        # A session this worker already declined (its model chain is not this worker's):
        # said again to whoever attaches, without taking its lease again (the sweep asks
        # every round).
        agreement = await rt.configs.agreement(session, explicit=failed)
        if rt.configs.declined_before(session_id, agreement):
            if (words := agreement.notice()) is not None:
                rt.deliver(session_id, {**notice_frame(words), "sessionId": session_id})
            return False
        if session_id in runs:  # a message started a run meanwhile
            return False
        run = runs.claim(session_id)
        try:
            lease, holder = await rt.leases.try_acquire(session_id)
            if lease is not None:
                now = await rt.db(rt.store.get_session, session_id)
                if not wanted(now):
                    await rt.leases.release(lease)  # its driver finished it meanwhile
                    lease = holder = None
                else:
                    agreement = await rt.configs.agreement(now, explicit=failed)
                    if agreement.refused:
                        await rt.configs.decline(session_id, lease, agreement)
                        lease = holder = None
                    else:
                        await rt.configs.equip(session_id, run, agreement, lease)
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        if lease is None:
            # Another live worker drives it: observe, and take over if its lease lapses.
            runs.unclaim(session_id, run)
            if holder is not None and rt.cluster is not None:
                await rt.cluster.observe(holder)
            return False
        runs.launch(session_id, run, lease, Turn.RESUME)
        return True

    async def compaction(self, session_id: str) -> None:
        """/compact, between turns only."""
        rt, runs = self.rt, self.rt.runs
        if session_id in runs:
            raise SessionBusy("a run is in flight for this session; compact after its reply")
        if runs.stopping:
            raise SessionBusy("this server is shutting down; try again in a moment")
        session = await rt.db(rt.store.get_session, session_id)
        if resumable(session):
            raise SessionBusy(
                "this session has interrupted work: resume it (or send a message) first"
            )
        await self._no_rollback_pending(session)
        rt.require_model()
        agreement = await rt.configs.agreement(session, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        run = runs.claim(session_id)
        try:
            lease = await rt.leases.acquire(session_id)
            await rt.configs.equip(session_id, run, agreement, lease)
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        runs.launch(session_id, run, lease, Turn.COMPACTION)
