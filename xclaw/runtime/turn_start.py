"""[runtime] Whether, and how, each kind of turn starts on this worker — a message, a resume, a
compaction: what it checks first, the session's lease (one driver) and configuration
(xclaw/runtime/session_configs.py), and the run it launches (xclaw/runtime/runs.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from xclaw.agents.catalog import AgentCatalog
from xclaw.errors import (
    AgentMismatch,
    ConfigError,
    ConfigMismatch,
    MessageRecorded,
    RollbackPending,
    SessionBusy,
    SessionNotFound,
    UnknownAgent,
    XclawError,
)
from xclaw.people.teams import Actor
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime.agent_choice import AgentChoice, choose, recorded_agent
from xclaw.runtime.leases import LeaseKeeper, busy_message
from xclaw.runtime.opening import open_turn
from xclaw.runtime.rollbacks import Rollbacks
from xclaw.runtime.runs import Runs
from xclaw.runtime.session_configs import SessionConfigs
from xclaw.runtime.subscribers import Broadcast
from xclaw.runtime.turn_plan import Turn
from xclaw.store.base import LeaseStore, RecordReader, StepWriter
from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import BUDGET_KEY, MAIN_AGENT, Session, Status, Step, StepType
from xclaw.views.record import title_from_message
from xclaw.wire.build import error_frame, for_session, notice_frame, renamed_frame


class StartReader(Protocol):
    """The roles deciding a start reads: the record, and who holds a session's lease."""

    @property
    def record(self) -> RecordReader: ...

    @property
    def leases(self) -> LeaseStore: ...


@dataclass(frozen=True, slots=True)
class StartParts:
    """What starting turns works with, wired once by the runtime's assembly."""

    runs: Runs
    reader: StoreCaller[StartReader]
    writer: StepWriter  # the write that opens a message's turn (xclaw/runtime/opening.py)
    leases: LeaseKeeper
    configs: SessionConfigs
    broadcast: Broadcast
    redact: Redactor
    # Raises ConfigError saying how to configure a model, when this worker has none.
    require_model: Callable[[], None]
    worker_id: str
    # A rollback a crash cut short (xclaw/runtime/rollbacks.py): finished before a turn.
    rollbacks: Rollbacks
    finish_rollback: Callable[[str], Awaitable[object]]
    agents: AgentCatalog  # the declared agents (docs/agents.md)


log = logging.getLogger("xclaw.runtime")


def resumable(session: Session) -> bool:
    """Interrupted work to continue (resume on reconnect): Paused, or Running and not waiting
    for input."""
    return session.status is Status.PAUSED or (
        session.status is Status.RUNNING and not session.awaiting_input
    )


class TurnStarts:
    def __init__(self, parts: StartParts) -> None:
        self.parts = parts
        self._refused: dict[str, str] = {}  # session -> the agent refusal logged last

    async def message(
        self,
        session_id: str,
        text: str,
        *,
        create: bool,
        actor: Actor | None = None,
        metadata: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        agent: str | None = None,
        queued: QueuedInput | None = None,
        session: Session | None = None,
    ) -> tuple[Step, bool]:
        """A run with the user's `text`; with `create`, an unknown session is created here, at
        its first message (only once a model is configured). `actor`: the user who sent it
        (recorded; a session created here is theirs). `agent`: the declared agent it runs
        (xclaw/runtime/agent_choice.py). Returns the message's step, and True when
        `message_id` (the client's id for it) was recorded before: a resend, which starts
        nothing — asked before anything else, a run in flight included (it may be this
        message's own). `queued`: the waiting message this is (xclaw/runtime/inputs.py),
        the only kind that may start while a run hands over to the session's queue;
        `session`: the session as its caller read it a moment before (the hand-over to a
        queued message: every read saved is a round trip on PostgreSQL). A queued message's
        id is not looked up first: the write that opens its turn refuses one recorded
        before (MessageRecorded, below), and its entry leaves the queue in that write."""
        p, runs = self.parts, self.parts.runs
        if message_id is not None and queued is None:
            earlier = await p.reader(p.reader.store.record.message_step, session_id, message_id)
            if earlier is not None:
                return earlier, True
        handing_over = session_id in runs.handing_over and queued is None
        if session_id in runs or session_id in runs.resuming or handing_over:
            raise SessionBusy(
                "a run is in flight for this session; wait for its reply or cancel it"
            )
        if runs.stopping:
            raise SessionBusy("this server is shutting down; send it again in a moment")
        found = session
        if found is None:
            found = await p.reader(p.reader.store.record.find_session, session_id)
        if found is None and not create:
            raise SessionNotFound(session_id)
        if found is not None:
            await self._no_rollback_pending(found)
            if isinstance(found.metadata.get(BUDGET_KEY), dict):
                # A new instruction: the session no longer waits for a budget (its run checks
                # the caps again before each call).
                metadata = {**(metadata or {}), BUDGET_KEY: None}
        p.require_model()  # before recording anything: say how to configure one
        # Another worker's session: with its model chain and approval mode, or refused.
        agreement = await p.configs.agreement(found, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        if found is not None and (why := p.configs.sandbox_refusal(found)) is not None:
            raise ConfigMismatch(why)  # its pinned sandbox policy is not this worker's
        chosen = self._agent(found, agent, new_turn=True)
        # A session is titled after its first message, in the write that opens the turn.
        title = None
        if found is None or (not found.title and not await self._has_user_input(session_id)):
            title = p.redact.text(title_from_message(p.redact.text(text)))
        run = runs.claim(session_id)
        run.agent = chosen
        try:
            await p.configs.equip(session_id, run, agreement)
            await p.leases.register()
            lease, opened = await open_turn(
                p.writer,
                session_id,
                p.redact(text),
                worker_id=p.worker_id,
                ttl_s=p.leases.ttl_s,
                create=found is None,
                title=title,
                record=agreement.record,
                actor=actor,
                metadata=metadata,
                message_id=message_id,
                agent=chosen.record,
                queued=queued,
            )
        except MessageRecorded as e:  # recorded between the look above and this write
            runs.unclaim(session_id, run)
            return await p.reader(p.reader.store.record.get_step, session_id, e.seq), True
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        if title is not None:
            p.broadcast.emit(session_id, renamed_frame(title))
        if lease is None:
            runs.unclaim(session_id, run)
            raise SessionBusy(
                busy_message(await p.reader(p.reader.store.leases.lease_info, session_id))
            )
        p.leases.acquired(lease)
        runs.launch(session_id, run, lease, Turn.MESSAGE, opened)
        assert opened is not None  # a lease taken: the message was recorded with it
        return opened.message, False

    async def _no_rollback_pending(self, session: Session) -> None:
        """A rollback a crash cut short is finished first (xclaw/runtime/rollbacks.py); one
        that stopped for a person refuses the turn (RollbackPending) until it is retried or
        abandoned. (Only a Running session can have one: its plan's step ran it.)"""
        p = self.parts
        if session.status is not Status.RUNNING:
            return
        plan = await p.reader(p.rollbacks.pending, session.session_id)
        if plan is None:
            return
        if not session.awaiting_input:
            await p.finish_rollback(session.session_id)
            return
        target = (
            (plan.input_data or {}).get("stepId") if isinstance(plan.input_data, dict) else None
        )
        raise RollbackPending(
            f"a rollback to before {target} stopped half-way ({plan.display_id}): retry it "
            f"(/rollback {target} --retry), rewind leaving the rest done (/rollback {target} "
            "--accept-irreversible), or abandon it (/rollback --abandon) before anything else"
        )

    def _agent(
        self, session: Session | None, requested: str | None, *, new_turn: bool
    ) -> AgentChoice:
        """The declared agent a run of `session` runs (xclaw/runtime/agent_choice.py), or the
        refusal as its error: UnknownAgent for a name nobody declared, AgentMismatch for a
        turn whose recorded definition is not this one."""
        recorded = None if session is None else recorded_agent(session.metadata)
        agents = self.parts.agents
        chosen = choose(recorded, agents, requested=requested, new_turn=new_turn)
        if chosen.refused:
            if requested is not None and requested not in agents:
                raise UnknownAgent(chosen.reason)
            raise AgentMismatch(chosen.reason)
        return chosen

    async def _has_user_input(self, session_id: str) -> bool:
        steps = await self.parts.reader(
            self.parts.reader.store.record.steps, session_id, agent=MAIN_AGENT
        )
        return any(st.step_type is StepType.USER_INPUT for st in steps)

    async def resume(self, session_id: str, *, failed: bool) -> bool:
        """Interrupted work continued, when there is some and no run is in flight; with
        `failed`, a Failed session too. True: a run started here."""
        runs = self.parts.runs
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
        p, runs = self.parts, self.parts.runs

        def wanted(session: Session) -> bool:
            return resumable(session) or (failed and session.status is Status.FAILED)

        session = await p.reader(p.reader.store.record.get_session, session_id)
        if not wanted(session):
            return False
        if resumable(session) and await p.reader(p.rollbacks.pending, session_id) is not None:
            # A rollback cut short by a crash: finished now, instead of a turn.
            try:
                await p.finish_rollback(session_id)
            except XclawError as e:
                p.broadcast.emit(session_id, error_frame(e.message, e.code))
            return False
        try:
            p.require_model()
        except ConfigError as e:
            p.broadcast.emit(session_id, error_frame(e.message, e.code))
            return False
        # A session this worker already declined (its model chain is not this worker's):
        # said again to whoever attaches, without taking its lease again (the sweep asks
        # every round).
        agreement = await p.configs.agreement(session, explicit=failed)
        if p.configs.declined_before(session_id, agreement):
            if (words := agreement.notice()) is not None:
                p.broadcast.deliver(session_id, for_session(notice_frame(words), session_id))
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
            lease, holder = await p.leases.try_acquire(session_id)
            if lease is not None:
                now = await p.reader(p.reader.store.record.get_session, session_id)
                if not wanted(now):
                    await p.leases.release(lease)  # its driver finished it meanwhile
                    lease = holder = None
                else:
                    agreement = await p.configs.agreement(now, explicit=failed)
                    try:
                        run.agent = self._agent(now, None, new_turn=False)
                    except AgentMismatch as e:  # switched by a message elsewhere meanwhile
                        await p.leases.release(lease)
                        self._refuse_agent(session_id, e)
                        runs.unclaim(session_id, run)
                        return False
                    if agreement.refused:
                        await p.configs.decline(session_id, lease, agreement)
                        lease = holder = None
                    elif (why := p.configs.sandbox_refusal(now)) is not None:
                        await p.configs.decline_sandbox(session_id, lease, why)
                        lease = holder = None
                    else:
                        await p.configs.equip(session_id, run, agreement, lease)
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        if lease is None:
            # Another live worker drives it: observe, and take over if its lease lapses.
            runs.unclaim(session_id, run)
            if holder is not None and p.broadcast.peers is not None:
                await p.broadcast.peers.observe(holder)
            return False
        runs.launch(session_id, run, lease, Turn.RESUME)
        return True

    def _refuse_agent(self, session_id: str, e: AgentMismatch) -> None:
        """A resume refused for its agent: said to whoever watches the session (an `error`
        frame, `agent_mismatch`) each time one is asked; logged once per session."""
        self.parts.broadcast.emit(session_id, error_frame(e.message, e.code))
        if self._refused.get(session_id) != e.message:
            self._refused[session_id] = e.message
            log.warning("event=agent_mismatch session=%s reason=%r", session_id, e.message)

    async def compaction(self, session_id: str) -> None:
        """/compact, between turns only."""
        p, runs = self.parts, self.parts.runs
        if session_id in runs:
            raise SessionBusy("a run is in flight for this session; compact after its reply")
        if runs.stopping:
            raise SessionBusy("this server is shutting down; try again in a moment")
        session = await p.reader(p.reader.store.record.get_session, session_id)
        if resumable(session):
            raise SessionBusy(
                "this session has interrupted work: resume it (or send a message) first"
            )
        await self._no_rollback_pending(session)
        p.require_model()
        agreement = await p.configs.agreement(session, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        if (why := p.configs.sandbox_refusal(session)) is not None:
            raise ConfigMismatch(why)
        chosen = self._agent(session, None, new_turn=False)
        run = runs.claim(session_id)
        run.agent = chosen
        try:
            lease = await p.leases.acquire(session_id)
            await p.configs.equip(session_id, run, agreement, lease)
        except BaseException:
            runs.unclaim(session_id, run)
            raise
        runs.launch(session_id, run, lease, Turn.COMPACTION)
