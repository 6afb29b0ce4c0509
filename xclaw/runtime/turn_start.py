"""Whether, and how, each kind of turn starts on this worker — a message, a resume, a
compaction: what it checks first, the session's lease (one driver) and configuration
(xclaw/runtime/session_configs.py), and the run it launches (xclaw/runtime/runs.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from xclaw.errors import (
    AgentMismatch,
    ConfigError,
    ConfigMismatch,
    SessionBusy,
    SessionNotFound,
    UnknownAgent,
)
from xclaw.protocol import error_frame, notice_frame
from xclaw.runtime.agent_choice import AgentChoice, choose, recorded_agent
from xclaw.runtime.leases import busy_message
from xclaw.runtime.opening import open_turn
from xclaw.runtime.turn_plan import Turn
from xclaw.store.model import MAIN_AGENT, Session, Status, StepType
from xclaw.teams import Actor
from xclaw.views import title_from_message

if TYPE_CHECKING:
    from xclaw.runtime.runtime import Runtime

log = logging.getLogger("xclaw.runtime")


def resumable(session: Session) -> bool:
    """Interrupted work to continue (resume on reconnect): Paused, or Running and not waiting
    for input."""
    return session.status is Status.PAUSED or (
        session.status is Status.RUNNING and not session.awaiting_input
    )


class TurnStarts:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._refused: dict[str, str] = {}  # session -> the agent refusal logged last

    async def message(
        self,
        session_id: str,
        text: str,
        *,
        create: bool,
        actor: Actor | None = None,
        agent: str | None = None,
    ) -> None:
        """A run with the user's `text`; with `create`, an unknown session is created here, at
        its first message (only once a model is configured). `actor`: the user who sent it
        (recorded; a session created here is theirs). `agent`: the declared agent it runs
        (xclaw/runtime/agent_choice.py)."""
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
        rt.require_model()  # before recording anything: say how to configure one
        # Another worker's session: with its model chain and approval mode, or refused.
        agreement = await rt.configs.agreement(found, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        chosen = self._agent(found, agent, new_turn=True)
        # A session is titled after its first message, in the write that opens the turn.
        title = None
        if found is None or (not found.title and not await self._has_user_input(session_id)):
            title = rt.title_of(title_from_message(rt.redact.text(text)))
        run = runs.claim(session_id)
        run.agent = chosen
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
                agent=chosen.record,
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

    def _agent(
        self, session: Session | None, requested: str | None, *, new_turn: bool
    ) -> AgentChoice:
        """The declared agent a run of `session` runs (xclaw/runtime/agent_choice.py), or the
        refusal as its error: UnknownAgent for a name nobody declared, AgentMismatch for a
        turn whose recorded definition is not this one."""
        recorded = None if session is None else recorded_agent(session.metadata)
        chosen = choose(recorded, self.rt.agents, requested=requested, new_turn=new_turn)
        if chosen.refused:
            if requested is not None and requested not in self.rt.agents:
                raise UnknownAgent(chosen.reason)
            raise AgentMismatch(chosen.reason)
        return chosen

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
        # Only the definition that ran the unfinished turn finishes it (agent_choice.py).
        try:
            chosen = self._agent(session, None, new_turn=False)
        except AgentMismatch as e:
            self._refuse_agent(session_id, e)
            return False
        if session_id in runs:  # a message started a run meanwhile
            return False
        run = runs.claim(session_id)
        run.agent = chosen
        try:
            lease, holder = await rt.leases.try_acquire(session_id)
            if lease is not None:
                now = await rt.db(rt.store.get_session, session_id)
                if not wanted(now):
                    await rt.leases.release(lease)  # its driver finished it meanwhile
                    lease = holder = None
                else:
                    agreement = await rt.configs.agreement(now, explicit=failed)
                    try:
                        run.agent = self._agent(now, None, new_turn=False)
                    except AgentMismatch as e:  # switched by a message elsewhere meanwhile
                        await rt.leases.release(lease)
                        self._refuse_agent(session_id, e)
                        runs.unclaim(session_id, run)
                        return False
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

    def _refuse_agent(self, session_id: str, e: AgentMismatch) -> None:
        """A resume refused for its agent: said to whoever watches the session (an `error`
        frame, `agent_mismatch`) each time one is asked; logged once per session."""
        rt = self.rt
        rt.emit(session_id, error_frame(e.message, e.code))
        if self._refused.get(session_id) != e.message:
            self._refused[session_id] = e.message
            log.warning("event=agent_mismatch session=%s reason=%r", session_id, e.message)

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
        rt.require_model()
        agreement = await rt.configs.agreement(session, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        chosen = self._agent(session, None, new_turn=False)
        run = runs.claim(session_id)
        run.agent = chosen
        try:
            lease = await rt.leases.acquire(session_id)
            await rt.configs.equip(session_id, run, agreement, lease)
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        runs.launch(session_id, run, lease, Turn.COMPACTION)
