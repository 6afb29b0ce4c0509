"""[runtime] The drive: one turn of a session carried out. It reads the record, asks the turn plan
(xclaw/runtime/turn_plan.py) what to do, does it — settles, says, runs the agent (or the
compaction) — and writes how the run ended, one row of xclaw/runtime/outcomes.py. The lease
and the run's place on this worker are the runs' (xclaw/runtime/runs.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from xclaw.agent.loop import Agent, AgentConfig
from xclaw.agents.definition import DEFAULT_NAME, AgentDefinition
from xclaw.budgets.ledger import Gate
from xclaw.config.settings import Settings
from xclaw.llm.base import Model
from xclaw.llm.prices import PriceTable
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.history import History
from xclaw.recorder.recorder import Recorder, SteerInbox
from xclaw.recorder.redact import Redactor
from xclaw.runtime.agent_choice import ALERT as AGENT_ALERT
from xclaw.runtime.agent_setup import AgentSetups
from xclaw.runtime.approvals import WireApprover, approval_frame
from xclaw.runtime.budgets import BudgetRoles, Budgets
from xclaw.runtime.frames import event_frame
from xclaw.runtime.opening import Opened
from xclaw.runtime.outcomes import end_with
from xclaw.runtime.rebuild import Rebuilder
from xclaw.runtime.run import Run
from xclaw.runtime.session_configs import SessionConfigs
from xclaw.runtime.settle import ask_the_tools, evidence_step, look_at_workspace
from xclaw.runtime.subscribers import Broadcast
from xclaw.runtime.turn_plan import Record, Turn, TurnPlan, plan_turn, settled_notice, worth_looking
from xclaw.runtime.wiring import Toolbox
from xclaw.store.base import RecordReader, StepWriter
from xclaw.store.leases import Lease
from xclaw.store.steps.model import MAIN_AGENT, Status, Step, StepType
from xclaw.store.steps.writes import AddStep
from xclaw.tools.base import ToolContext
from xclaw.wire.build import notice_frame, reply_frame, status_frame, step_frame
from xclaw.wire.shapes import FrameJson
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.runtime")


@dataclass(frozen=True, slots=True)
class DriveParts:
    """What a turn's drive works with, wired once by the runtime's assembly."""

    reader: StoreCaller[RecordReader]  # reads, which need no lease
    budget_reader: StoreCaller[BudgetRoles]  # the caps and totals a run's gate reads
    # A run's writes: with its lease, every one carries the fencing token (one driver).
    writer: Callable[[Lease | None], StoreCaller[StepWriter]]
    broadcast: Broadcast
    toolbox: Toolbox
    workspaces: Workspaces
    rebuild: Rebuilder
    redact: Redactor
    prices: PriceTable
    model: Callable[[], Model]  # this worker's model chain (built on first use)
    agent_config: AgentConfig
    configs: SessionConfigs
    # Another worker took the session: the run stops (xclaw/runtime/runs.py).
    lose_lease: Callable[[str, Run, str], None]
    worker_id: str
    # How each declared agent runs here (docs/agents.md), and the program's own object its
    # tools get (`xclaw.open(deps=...)`, set after the runtime is made).
    agent_setups: AgentSetups
    deps: Callable[[], Any]
    budgets: Budgets  # the caps and running totals of this worker's runs (docs/budgets.md)
    # The messages sent to steer a run of the session (xclaw/runtime/inputs.py).
    steers: Callable[[str], SteerInbox] | None = None


Drive = Callable[[str, Run, Turn, Opened | None], Awaitable[None]]
"""A turn driven: (session, its run, the kind of turn, what opened it)."""


def drive_with(parts: DriveParts) -> Drive:
    """The drive the runs launch (xclaw/runtime/runs.py), each turn with these parts."""

    async def drive(sid: str, run: Run, turn: Turn, opened: Opened | None) -> None:
        await TurnDrive(parts, sid, run, turn).drive(opened)

    return drive


class TurnDrive:
    """One turn of session `sid`, driven by `run` (which holds its lease: one driver)."""

    def __init__(self, parts: DriveParts, sid: str, run: Run, turn: Turn) -> None:
        self.parts = parts
        self.sid = sid
        self.run = run
        self.turn = turn
        self.worker_id = parts.worker_id
        # Every write of this run carries the lease's fencing token (one driver); its reads
        # need none.
        self.db = parts.writer(run.lease)
        self.reader = parts.reader

    async def drive(self, opened: Opened | None) -> None:
        """`opened`: what the write that opened a message's turn did (Runtime.send)."""
        recorder: Recorder | None = None
        try:
            record, context = await self._read(opened)
            plan = plan_turn(self.turn, record)
            settled, hist = await self._settle(plan, record)
            gate = await self.parts.budgets.gate_for(self.parts.budget_reader, self.sid)
            recorder = self._recorder(hist, gate)
            await self._say(plan, recorder, settled)
            agent = self._agent(recorder, context)
            if self.turn is Turn.COMPACTION:
                await self._compact(plan, agent, recorder, hist)
            else:
                await self._answer(plan, agent, recorder, hist)
        except BaseException as e:
            if not await end_with(e, self):
                raise
        finally:
            # Room the run claimed on shared caps and did not use, given back however it
            # ended (a lost or failed return: the session's next run gives it back).
            if recorder is not None:
                recorder.give_back()

    # --- what the outcome table asks of a run (xclaw/runtime/outcomes.py) --------------------
    @property
    def lost(self) -> str | None:
        return self.run.lost

    def emit(self, frame: FrameJson) -> None:
        self.parts.broadcast.emit(self.sid, frame)

    def lose_lease(self, why: str) -> None:
        self.parts.lose_lease(self.sid, self.run, why)

    # --- the steps of a turn ---------------------------------------------------------------
    async def _read(self, opened: Opened | None) -> tuple[Record, ToolContext]:
        """The record the turn is planned from; what the last run left `running` marked as
        the turn marks it (`Turn.marking`, nothing lost) first."""
        p, db, reader, sid, emit = self.parts, self.db, self.reader, self.sid, self.emit
        if opened is not None:
            # Told at once: the turn is open, the message recorded.
            for step in opened.interrupted:  # the dangling steps marked (nothing lost)
                emit(step_frame(step, p.prices))
            emit(status_frame(Status.RUNNING))
            emit(step_frame(opened.message, p.prices))
        else:
            # A restore cut short by a crash is completed before anything touches the files.
            await reader(p.workspaces.recover, sid, self.run.lease)
        await self._prepare_tools()
        await p.configs.pin_sandbox(sid)  # the policy it runs under, from its first run
        if opened is not None:
            status, interrupted = Status.RUNNING, opened.interrupted
            # Read in one trip: the steps to continue from (the message is the last) and the
            # workspace (made 0700), a restore cut short by a crash completed first.
            steps, workspace = await reader(self._read_steps, recover=True)
        else:
            session = await reader(reader.store.get_session, sid)
            status = session.status
            # The tools its client declared (docs/ag-ui.md), for a run resumed before any
            # client is back (after a restart).
            p.toolbox.client.load(sid, session.metadata)
            marking = self.turn.marking
            interrupted = await db(
                db.store.mark_interrupted,
                sid,
                keep_approvals=marking.keep_approvals,
                approval_output=marking.approval_output,
            )
            for step in interrupted:  # live views see the dangling steps marked
                emit(step_frame(step, p.prices))
            steps, workspace = await reader(self._read_steps, recover=False)
        hist = p.rebuild(steps)
        chosen = self.run.agent
        context = ToolContext(
            workspace=workspace,
            session_id=sid,
            user=sent_by(steps),
            agent=DEFAULT_NAME
            if chosen is None or chosen.definition is None
            else chosen.definition.name,
            deps=p.deps(),
        )
        looking = worth_looking(self.turn, hist)
        tools = p.toolbox.tools_for(sid)
        seen = await look_at_workspace(steps, looking, tools, context)
        # What the workspace cannot show, the tools' settle checks are asked (evidence).
        asking = [ref for ref in looking if ref not in seen]
        evidence = await ask_the_tools(steps, asking, tools, context)
        return Record(status, steps, interrupted, hist, seen, evidence), context

    async def _prepare_tools(self) -> None:
        """MCP servers start on first use; one that cannot start is named, the rest work."""
        toolbox = self.parts.toolbox
        for server, why in (await toolbox.prepare()).items():
            log.warning("event=mcp_unavailable server=%s reason=%r", server, why)
            self.emit(notice_frame(f"[tools] {why}; its tools are unavailable in this run"))
        for why in toolbox.policy_warnings():
            log.warning("event=tool_policy_unmatched reason=%r", why)
            self.emit(notice_frame(f"[tools] {why}"))
        definition = self._definition()
        if definition is not None:
            # Built now, before the record is read back: its own tools (and its sub-agents')
            # are then known to the resume rules (an interrupted read-only one is retried).
            self.parts.agent_setups.parts(definition, self.parts.agent_config)
            for name in self.parts.agent_setups.missing_tools(definition):
                self.emit(
                    notice_frame(
                        f"[tools] agent {definition.name!r} names {name!r}, "
                        "which no tool here matches"
                    )
                )

    def _definition(self) -> AgentDefinition | None:
        """The declared agent this run runs (None: xclaw's own)."""
        chosen = self.run.agent
        if chosen is None or chosen.definition is None or chosen.definition.is_default:
            return None
        return chosen.definition

    def _read_steps(self, *, recover: bool) -> tuple[list[Step], Path]:
        """On a worker thread, in one hop: (with `recover`) a restore cut short by a crash
        completed, then the main agent's steps and the session's workspace directory (made
        0700: a new directory is a few hundred µs of disk work)."""
        p = self.parts
        if recover:
            p.workspaces.recover(self.sid, self.run.lease)
        steps = self.reader.store.steps(self.sid, agent=MAIN_AGENT)
        return steps, p.workspaces.directory(self.sid)

    async def _settle(self, plan: TurnPlan, record: Record) -> tuple[list[Step], History]:
        """Each settle check's answer recorded, then the calls the evidence shows ran,
        recorded completed (no blind repeat); the history the agent goes on from, in which
        the calls found not done run again at once."""
        p, db, reader = self.parts, self.db, self.reader
        for step, evidence in plan.checks:  # recorded before anything acts on it
            said = evidence_step(step, evidence)
            said = replace(said, input_data=p.redact(said.input_data))
            check = await db(db.store.write, AddStep(session_id=self.sid, step=said))
            self.emit(step_frame(check, p.prices))
        settled = [
            await db(
                db.store.write,
                AddStep(
                    session_id=self.sid,
                    step=s.step,
                    output_data=p.redact.text(s.output),  # as every tool output is
                ),
            )
            for s in plan.settle
        ]
        if not settled and not plan.rerun:
            return settled, record.history
        steps = await reader(reader.store.steps, self.sid, agent=MAIN_AGENT)
        rerun = {s.call_id for s in plan.rerun if s.call_id}
        return settled, p.rebuild(steps, rerun=rerun)

    def _recorder(self, hist: History, gate: Gate | None) -> Recorder:
        p, sid, lease, reader = self.parts, self.sid, self.run.lease, self.reader
        spaces = p.workspaces
        return Recorder(
            db=reader,
            writes=self.db.store.write_stream(),
            session_id=sid,
            emit=lambda event: p.broadcast.emit(sid, event_frame(event, p.prices), redacted=True),
            redact=p.redact,
            call_parents=hist.call_parents,
            pending_approvals=hist.pending_approvals,
            turn_root=hist.last_user_step,
            # Fenced by the run's lease: a worker that lost the session references no
            # snapshot (and so none of the contents it uploaded).
            before_side_effect=lambda step: reader(spaces.snapshot, sid, step, lease),
            after_side_effect=(
                (lambda step: reader(spaces.snapshot_after, sid, step, lease))
                if spaces.records_after
                else None
            ),
            resumable_calls=hist.resumable_calls,
            rebuild=p.rebuild,
            budget=gate,
            steers=None if p.steers is None else p.steers(sid),
        )

    async def _say(self, plan: TurnPlan, recorder: Recorder, settled: list[Step]) -> None:
        """The plan's notices, the configuration the run drives with, the resume alert, and
        the settled calls (told only now: the alert's durable commit carries them too)."""
        for notice in plan.notices:
            self.emit(notice_frame(notice))
        await self.parts.configs.announce(self.sid, self.run, recorder)
        chosen = self.run.agent
        if chosen is not None and (said := chosen.alert()) is not None:
            if (words := chosen.notice()) is not None:
                self.emit(notice_frame(words))
            await recorder.alert(AGENT_ALERT, said)
        if plan.resume_alert is not None:
            await recorder.alert("resume", plan.resume_alert.details(settled))
        for step, how in zip(settled, plan.settle, strict=True):
            self.emit(step_frame(step, self.parts.prices))
            self.emit(notice_frame(settled_notice(step, by_check=how.by_check)))

    def _agent(self, recorder: Recorder, context: ToolContext) -> Agent:
        p, run = self.parts, self.run
        config = p.agent_config
        definition = self._definition()
        parts = None if definition is None else p.agent_setups.parts(definition, config)
        return Agent(
            model=(parts.model if parts and parts.model else None) or run.model or p.model(),
            tools=p.toolbox.tools_for(self.sid) if parts is None else parts.tools,
            policy=run.policy or p.toolbox.policy,
            approver=WireApprover(run, lambda req: self.emit(approval_frame(req, p.redact))),
            observer=recorder,
            context=context,
            config=config if parts is None else parts.config,
            cancel_event=run.cancel,
            steering=None if parts is None else parts.steering,
        )

    async def _answer(
        self, plan: TurnPlan, agent: Agent, recorder: Recorder, hist: History
    ) -> None:
        """The agent runs to its final answer; the session ends Success."""
        if self.turn is Turn.RESUME:  # (a message's turn said Running as it opened)
            self.emit(status_frame(Status.RUNNING))
        try:
            answer = await agent.run(
                hist.messages, resume=hist.resume_state(with_note=plan.resume_note)
            )
        finally:
            # Queued writes reach the disk before the outcome is decided and written.
            await recorder.settle()
        if not recorder.answered:  # else Success was committed with the final answer
            await self._end_as(Status.SUCCESS)
        definition = self._definition()
        output = None if agent.output is None else self.parts.redact(agent.output)
        reply = reply_frame(
            self.parts.redact.text(answer),
            output=output,  # the structured answer, as the final step holds it
            agent=None if definition is None else definition.name,
        )
        self.parts.broadcast.emit(self.sid, reply, redacted=True)

    async def _compact(
        self, plan: TurnPlan, agent: Agent, recorder: Recorder, hist: History
    ) -> None:
        """/compact: one summary call; the session ends as it was."""
        self.emit(status_frame(Status.RUNNING))
        try:
            done = await agent.compact(hist.messages)
        finally:
            await recorder.settle()
        if plan.compaction_ends is not None:
            await self._end_as(plan.compaction_ends)
        status = (await self.reader(self.reader.store.get_session, self.sid)).status
        self.emit(status_frame(status))
        if not done:
            self.emit(
                notice_frame(
                    "[compact] nothing was summarised: the conversation is empty, has open tool "
                    "calls, or the model call failed (see /steps)"
                )
            )

    async def _end_as(self, target: Status) -> None:
        db = self.db
        session = await self.reader(self.reader.store.get_session, self.sid)
        if session.status is not target:
            await db(db.store.transition, self.sid, target)


def sent_by(steps: list[Step]) -> str | None:
    """The user of a shared server who sent the turn's message (its step's `by`), if one did."""
    for st in reversed(steps):
        if st.step_type is StepType.USER_INPUT:
            out = st.output_data
            by = out.get("by") if isinstance(out, dict) else None
            user = by.get("user") if isinstance(by, dict) else None
            return user if isinstance(user, str) else None
    return None


def agent_config(s: Settings) -> AgentConfig:
    return AgentConfig(
        max_iterations=s.max_iterations,
        max_tokens=s.max_tokens,
        temperature=s.temperature,
        approval_timeout_s=s.approval.timeout_s,
        context_window_tokens=s.context_window_tokens,
        compact_at=s.compact_at,
        parallel_side_effects=s.sandbox.parallel_side_effects,
    )
