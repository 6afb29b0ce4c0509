"""The drive: one turn of a session carried out. It reads the record, asks the turn plan
(xclaw/runtime/turn_plan.py) what to do, does it — settles, says, runs the agent (or the
compaction) — and writes how the run ended, one row of xclaw/runtime/outcomes.py. The lease
and the run's place on this worker are the runtime's (`Runtime._turn`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xclaw.agent.loop import Agent, AgentConfig
from xclaw.config import Settings
from xclaw.protocol import notice_frame, step_json
from xclaw.recorder.history import History
from xclaw.recorder.recorder import Recorder
from xclaw.runtime.approvals import WireApprover, approval_frame
from xclaw.runtime.frames import event_frame
from xclaw.runtime.opening import Opened
from xclaw.runtime.outcomes import end_with
from xclaw.runtime.settle import look_at_workspace
from xclaw.runtime.turn_plan import Record, Turn, TurnPlan, plan_turn, settled_notice, worth_looking
from xclaw.store.model import MAIN_AGENT, Status, Step, StepStatus
from xclaw.tools.base import ToolContext

if TYPE_CHECKING:
    from xclaw.runtime.runs import Run
    from xclaw.runtime.runtime import Runtime

log = logging.getLogger("xclaw.runtime")


class TurnDrive:
    """One turn of session `sid`, driven by `run` (which holds its lease: one driver)."""

    def __init__(self, runtime: Runtime, sid: str, run: Run, turn: Turn) -> None:
        self.rt = runtime
        self.sid = sid
        self.run = run
        self.turn = turn
        self.worker_id = runtime.worker_id
        # Every write of this run carries the lease's fencing token (one driver); its reads
        # need none.
        self.db = runtime.caller(run.lease)
        self.reader = runtime.db

    async def drive(self, opened: Opened | None) -> None:
        """`opened`: what the write that opened a message's turn did (Runtime.send)."""
        try:
            record, context = await self._read(opened)
            plan = plan_turn(self.turn, record)
            settled, hist = await self._settle(plan, record)
            recorder = self._recorder(hist)
            await self._say(plan, recorder, settled)
            agent = self._agent(recorder, context)
            if self.turn is Turn.COMPACTION:
                await self._compact(plan, agent, recorder, hist)
            else:
                await self._answer(plan, agent, recorder, hist)
        except BaseException as e:
            if not await end_with(e, self):
                raise

    # --- what the outcome table asks of a run (xclaw/runtime/outcomes.py) --------------------
    @property
    def lost(self) -> str | None:
        return self.run.lost

    def emit(self, frame: dict[str, Any]) -> None:
        self.rt.emit(self.sid, frame)

    def lose_lease(self, why: str) -> None:
        self.rt.runs.lose_lease(self.sid, self.run, why)

    # --- the steps of a turn ---------------------------------------------------------------
    async def _read(self, opened: Opened | None) -> tuple[Record, ToolContext]:
        """The record the turn is planned from; what the last run left `running` marked as
        the turn marks it (`Turn.marking`, nothing lost) first."""
        rt, db, sid, emit = self.rt, self.db, self.sid, self.emit
        if opened is not None:
            # Told at once: the turn is open, the message recorded.
            for step in opened.interrupted:  # the dangling steps marked (nothing lost)
                emit({"type": "step", "step": step_json(step)})
            emit({"type": "status", "status": Status.RUNNING.value})
            emit({"type": "step", "step": step_json(opened.message)})
        else:
            # A restore cut short by a crash is completed before anything touches the files.
            await rt.db(rt.workspaces.recover, sid, self.run.lease)
        await self._prepare_tools()
        if opened is not None:
            status, interrupted = Status.RUNNING, opened.interrupted
            # Read in one trip: the steps to continue from (the message is the last) and the
            # workspace (made 0700), a restore cut short by a crash completed first.
            steps, workspace = await rt.db(self._read_steps, recover=True)
        else:
            status = (await rt.db(rt.store.get_session, sid)).status
            marking = self.turn.marking
            interrupted = await db(
                db.store.mark_interrupted,
                sid,
                keep_approvals=marking.keep_approvals,
                approval_output=marking.approval_output,
            )
            for step in interrupted:  # live views see the dangling steps marked
                emit({"type": "step", "step": step_json(step)})
            steps, workspace = await rt.db(self._read_steps, recover=False)
        hist = rt.rebuild(steps)
        context = ToolContext(workspace=workspace, session_id=sid)
        looking = worth_looking(self.turn, hist)
        seen = await look_at_workspace(steps, looking, rt.toolbox.tools, context)
        return Record(status, steps, interrupted, hist, seen), context

    async def _prepare_tools(self) -> None:
        """MCP servers start on first use; one that cannot start is named, the rest work."""
        toolbox = self.rt.toolbox
        for server, why in (await toolbox.prepare()).items():
            log.warning("event=mcp_unavailable server=%s reason=%r", server, why)
            self.emit(notice_frame(f"[tools] {why}; its tools are unavailable in this run"))
        for why in toolbox.policy_warnings():
            log.warning("event=tool_policy_unmatched reason=%r", why)
            self.emit(notice_frame(f"[tools] {why}"))

    def _read_steps(self, *, recover: bool) -> tuple[list[Step], Path]:
        """On a worker thread, in one hop: (with `recover`) a restore cut short by a crash
        completed, then the main agent's steps and the session's workspace directory (made
        0700: a new directory is a few hundred µs of disk work)."""
        rt = self.rt
        if recover:
            rt.workspaces.recover(self.sid, self.run.lease)
        return rt.store.steps(self.sid, agent=MAIN_AGENT), rt.workspaces.directory(self.sid)

    async def _settle(self, plan: TurnPlan, record: Record) -> tuple[list[Step], History]:
        """The calls the workspace shows ran, recorded completed (no blind repeat); the
        history the agent goes on from."""
        rt, db = self.rt, self.db
        settled = [
            await db(
                db.store.add_step,
                self.sid,
                s.step,
                status=StepStatus.COMPLETED,
                output_data=rt.redact.text(s.output),  # as every tool output is
            )
            for s in plan.settle
        ]
        if not settled:
            return settled, record.history
        steps = await rt.db(rt.store.steps, self.sid, agent=MAIN_AGENT)
        return settled, rt.rebuild(steps)

    def _recorder(self, hist: History) -> Recorder:
        rt, sid, lease = self.rt, self.sid, self.run.lease
        return Recorder(
            db=rt.db,
            writes=self.db.store.write_stream(),
            session_id=sid,
            emit=lambda event: rt.emit(sid, event_frame(event), redacted=True),
            redact=rt.redact,
            call_parents=hist.call_parents,
            pending_approvals=hist.pending_approvals,
            turn_root=hist.last_user_step,
            # Fenced by the run's lease: a worker that lost the session references no
            # snapshot (and so none of the contents it uploaded).
            before_side_effect=lambda step: rt.db(rt.workspaces.snapshot, sid, step, lease),
            after_side_effect=(
                (lambda step: rt.db(rt.workspaces.snapshot_after, sid, step, lease))
                if rt.workspaces.follows
                else None
            ),
            resumable_calls=hist.resumable_calls,
            rebuild=rt.rebuild,
        )

    async def _say(self, plan: TurnPlan, recorder: Recorder, settled: list[Step]) -> None:
        """The plan's notices, the configuration the run drives with, the resume alert, and
        the settled calls (told only now: the alert's durable commit carries them too)."""
        for notice in plan.notices:
            self.emit(notice_frame(notice))
        await self.rt.configs.announce(self.sid, self.run, recorder)
        if plan.resume_alert is not None:
            await recorder.alert("resume", plan.resume_alert.details(settled))
        for step in settled:
            self.emit({"type": "step", "step": step_json(step)})
            self.emit(notice_frame(settled_notice(step)))

    def _agent(self, recorder: Recorder, context: ToolContext) -> Agent:
        rt, run = self.rt, self.run
        return Agent(
            model=run.model or rt.model,
            tools=rt.toolbox.tools,
            policy=run.policy or rt.toolbox.policy,
            approver=WireApprover(run, lambda req: self.emit(approval_frame(req, rt.redact))),
            observer=recorder,
            context=context,
            config=agent_config(rt.settings),
            cancel_event=run.cancel,
        )

    async def _answer(
        self, plan: TurnPlan, agent: Agent, recorder: Recorder, hist: History
    ) -> None:
        """The agent runs to its final answer; the session ends Success."""
        if self.turn is Turn.RESUME:  # (a message's turn said Running as it opened)
            self.emit({"type": "status", "status": Status.RUNNING.value})
        try:
            answer = await agent.run(
                hist.messages, resume=hist.resume_state(with_note=plan.resume_note)
            )
        finally:
            # Queued writes reach the disk before the outcome is decided and written.
            await recorder.settle()
        if not recorder.answered:  # else Success was committed with the final answer
            await self._end_as(Status.SUCCESS)
        reply = {"type": "reply", "content": self.rt.redact.text(answer)}
        self.rt.emit(self.sid, reply, redacted=True)

    async def _compact(
        self, plan: TurnPlan, agent: Agent, recorder: Recorder, hist: History
    ) -> None:
        """/compact: one summary call; the session ends as it was."""
        self.emit({"type": "status", "status": Status.RUNNING.value})
        try:
            done = await agent.compact(hist.messages)
        finally:
            await recorder.settle()
        if plan.compaction_ends is not None:
            await self._end_as(plan.compaction_ends)
        status = (await self.reader(self.rt.store.get_session, self.sid)).status
        self.emit({"type": "status", "status": status.value})
        if not done:
            self.emit(
                notice_frame(
                    "[compact] nothing was summarised: the conversation is empty, has open tool "
                    "calls, or the model call failed (see /steps)"
                )
            )

    async def _end_as(self, target: Status) -> None:
        db = self.db
        session = await self.reader(self.rt.store.get_session, self.sid)
        if session.status is not target:
            await db(db.store.transition, self.sid, target)


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
