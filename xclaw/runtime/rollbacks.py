"""[runtime] Rollback that undoes outside effects (docs/workspace.md, "Rollback and outside
effects").

Rewinding memory and files is one transaction (files follow memory); undoing what a call did
outside the workspace — the row it inserted, the object it uploaded — is not: each
compensation is a call of its own, which can fail, hang or be cut short by a crash. So a
rollback past outside effects is a durable process, modelled on the restore journal:

1. **the preview** (`Rollbacks.preview`): every outside effect after the target step, from the
   record (the `outside_effects` marks and the calls' own steps) and the tools' declarations —
   compensable ones with their compensation, the others with why nothing undoes them
   (irreversible, outcome unknown, owned by the session a fork came from, its tool gone);
2. **the plan**, written first: a `system_alert` step `rollback`, running, holding which
   compensations run in which order (the calls' input and output with them) and who asked.
   Effects nothing undoes need the person's explicit word (`accept_irreversible`), else
   `IrreversibleEffects` names them and nothing is written;
3. **each compensation a step**: a `system_alert` `compensation`, written (durably) before it
   runs — write-ahead, like a tool call — beside the effect it undoes (its parent), then
   completed or failed; run in reverse order of the effects;
4. **the rewind**: memory and files, one transaction as always, which also completes the plan.
   Rollback keeps the plan and compensation steps (model.UNDO_STEPS): they are the record of
   what was undone, by whom and when, after the effects' own steps are gone.

A rollback cut short (the process killed) is finished by whoever next starts the session —
a reconnect, a resume, `xclaw rollback`, `xclaw run --session` (`finish_pending`): completed
compensations are not run again; one cut short mid-run is run again only when declared
idempotent, otherwise a person decides. A compensation that fails stops the rollback with
the session consistent (which effects were undone, which not, memory and files not yet
rewound) and waiting: the person retries (`retry`), goes on leaving the rest as they are
(`accept_irreversible`), or abandons it (`abandon`). Until then no turn starts.

Every method is given the session's lease by its caller (one driver): the runtime's, or the
command line's `holding_lease`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from xclaw.errors import BadCommand, CompensationFailed, IrreversibleEffects, RollbackPending
from xclaw.recorder.redact import Redactor
from xclaw.store.base import LeaseStore, PlanDone, Record, RollbackResult
from xclaw.store.leases import Lease
from xclaw.store.steps.model import (
    COMPENSATION,
    INTERRUPTED,
    ROLLBACK_PLAN,
    Completion,
    NewStep,
    Session,
    Status,
    Step,
    StepStatus,
    StepType,
    full_step_id,
)
from xclaw.store.steps.writes import BeginStep, FinishStep
from xclaw.tools.base import Tool, ToolContext, ToolResult
from xclaw.tools.effects import (
    Compensation,
    CompensationUnavailable,
    EffectClass,
    effect_of,
    recorded_output,
)
from xclaw.views.outside_effects import describe_preview, outside_steps
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.runtime")

# The tools the compensations run with, ready (an MCP server's tools join once it starts).
ToolsNow = Callable[[], Awaitable[Mapping[str, Tool]]]
# A frame to the session's clients (the runtime's emit); None offline.
# How a step the rollback wrote is told to the session's clients (the runtime: a `step`
# frame, priced).
Tell = Callable[[str, Step], None]


@dataclass(frozen=True)
class OutsideEffect:
    """One call after the rollback point whose effects reach outside the workspace."""

    step_id: str  # display id of the call's step (its last attempt)
    tool: str
    call_id: str
    agent: str
    # What undoes it here, or why nothing does.
    compensation: Compensation | None = None
    why: str = ""
    # A compensation step of an earlier rollback that undid it already.
    undone_by: str | None = None
    # The call as recorded, for its compensation.
    input: Any = None
    output: Any = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stepId": self.step_id,
            "tool": self.tool,
            "callId": self.call_id,
            "agent": self.agent,
        }
        if self.compensation is not None:
            out["compensation"] = self.compensation.as_json()
        if self.why:
            out["why"] = self.why
        if self.undone_by:
            out["undoneBy"] = self.undone_by
        return out


@dataclass(frozen=True)
class Preview:
    """What rolling back to `target` would do outside the workspace."""

    session_id: str
    target: str
    effects: tuple[OutsideEffect, ...] = ()
    # A rollback of this session stopped half-way (its plan step), if any.
    pending: str | None = None
    pending_target: str | None = None

    @property
    def to_undo(self) -> list[OutsideEffect]:
        """Compensable effects, in the order their compensations run (the latest first)."""
        return [e for e in self.effects if e.compensation is not None and not e.undone_by]

    @property
    def not_undone(self) -> list[OutsideEffect]:
        return [e for e in self.effects if e.compensation is None and not e.undone_by]

    @property
    def plain(self) -> bool:
        """Nothing outside to undo or to accept: the rollback of the seed, as it always was."""
        return not self.to_undo and not self.not_undone and self.pending is None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionId": self.session_id,
            "stepId": self.target,
            "compensable": [e.as_json() for e in self.to_undo],
            "irreversible": [e.as_json() for e in self.not_undone],
            "undoneAlready": [e.as_json() for e in self.effects if e.undone_by],
        }
        if self.pending is not None:
            out["pending"] = {"planStepId": self.pending, "stepId": self.pending_target}
        return out

    def text(self) -> str:
        """The preview in words (the `/rollback` notice, `xclaw rollback`'s question)."""
        return describe_preview(self.as_json())


@dataclass
class Outcome:
    """How a rollback ended: rewound (`result`), with the compensation steps that ran."""

    result: RollbackResult
    compensated: list[Step] = field(default_factory=list)
    not_undone: list[OutsideEffect] = field(default_factory=list)
    plan: Step | None = None

    # What a rollback always said (RollbackResult's), for callers of the plain rewind.
    @property
    def session(self) -> Session:
        return self.result.session

    @property
    def target_seq(self) -> int:
        return self.result.target_seq

    @property
    def deleted(self) -> int:
        return self.result.deleted

    @property
    def restore(self) -> Any:
        return self.result.restore

    def compensated_json(self) -> list[dict[str, Any]]:
        out = []
        for c in self.compensated:
            data = c.input_data if isinstance(c.input_data, dict) else {}
            out.append(
                {
                    "stepId": c.display_id,
                    "effect": str(data.get("effect")),
                    "tool": str(data.get("tool")),
                    "action": str(data.get("action")),
                }
            )
        return out

    def not_undone_json(self) -> list[dict[str, Any]]:
        return [e.as_json() for e in self.not_undone]

    def text(self) -> str:
        lines = []
        if self.compensated:
            lines.append(
                f"[rollback] {len(self.compensated)} outside effect(s) undone: "
                + ", ".join(
                    f"{(c.input_data or {}).get('effect', '?')} by {c.display_id}"
                    for c in self.compensated
                )
            )
        if self.not_undone:
            lines.append(
                f"[rollback] {len(self.not_undone)} outside effect(s) NOT undone (they stay "
                "done): " + ", ".join(f"{e.step_id} {e.tool}" for e in self.not_undone)
            )
        return "\n".join(lines)


def _compensations_of(steps: Sequence[Step]) -> list[Step]:
    return [s for s in steps if s.step_type is StepType.SYSTEM_ALERT and s.name == COMPENSATION]


def pending_plan(steps: Sequence[Step]) -> Step | None:
    """The plan of a rollback this session has not finished (at most one)."""
    return next(
        (
            s
            for s in reversed(steps)
            if s.step_type is StepType.SYSTEM_ALERT
            and s.name == ROLLBACK_PLAN
            and s.status is StepStatus.RUNNING
        ),
        None,
    )


def effects_after(
    session: Session, steps: Sequence[Step], target_seq: int, tools: Mapping[str, Tool]
) -> list[OutsideEffect]:
    """The outside effects at or after `target_seq`, the latest first (the order their
    compensations run): each with its compensation, or why nothing here undoes it."""
    done: dict[tuple[str, str], str] = {}  # (call id, effect step) -> the compensation step
    for c in _compensations_of(steps):
        data = c.input_data if isinstance(c.input_data, dict) else {}
        if c.status is StepStatus.COMPLETED:
            done[(str(data.get("callId")), str(data.get("effect")))] = c.display_id
    owned_elsewhere = session.parent_session_id if session.is_forked else None
    found: list[OutsideEffect] = []
    for mark in outside_steps(steps, target_seq):
        data = mark.input_data if isinstance(mark.input_data, dict) else {}
        call_id, agent = str(data.get("callId") or ""), str(data.get("agent") or "main")
        attempts = [
            s
            for s in steps
            if s.step_type is StepType.TOOL_CALL
            and s.call_id == call_id
            and s.agent == agent
            and s.seq > mark.seq
        ]
        if not attempts:
            continue  # never started: the crash or a refusal came first
        last = attempts[-1]
        base = {
            "step_id": last.display_id,
            "tool": last.name,
            "call_id": call_id,
            "agent": agent,
            "input": last.input_data,
            "output": recorded_output(last.output_data),
        }
        undone = done.get((call_id, last.display_id))
        if undone is not None:
            found.append(OutsideEffect(**base, undone_by=undone))
            continue
        why, comp = "", None
        tool = tools.get(last.name)
        forked = session.forked_from_seq or 0
        if owned_elsewhere and last.seq <= forked:
            why = (
                f"made by the session this one was forked from ({owned_elsewhere}), which "
                "owns it: only a rollback of that session undoes it"
            )
        elif last.status is not StepStatus.COMPLETED:
            why = (
                "its outcome is unknown (cut short by a crash)"
                if last.interrupted
                else f"it failed ({(last.error_message or '?')[:80]}); what it did is not known"
            )
        elif tool is None:
            why = f"its tool {last.name} is not configured here"
        elif effect_of(tool) is not EffectClass.COMPENSABLE:
            why = "irreversible"
        else:
            try:
                comp = tool.compensation(
                    dict(last.input_data) if isinstance(last.input_data, dict) else {},
                    recorded_output(last.output_data),
                )
            except CompensationUnavailable as e:
                why = str(e)
            if comp is None and not why:
                why = "its tool gives no compensation for this call"
        found.append(OutsideEffect(**base, compensation=comp, why=why))
    return sorted(found, key=lambda e: -_seq(e.step_id))


def _seq(display: str) -> int:
    """`s0007` -> 7; 0 for anything else (a plan read from an imported record may hold it)."""
    digits = display[1:] if display.startswith("s") else ""
    return int(digits) if digits.isascii() and digits.isdigit() else 0


class RollbackRoles(Protocol):
    """The roles a rollback takes: the record it rewinds, the leases that fence its writes."""

    @property
    def record(self) -> Record: ...

    @property
    def leases(self) -> LeaseStore: ...


class Rollbacks:
    """Rollback with compensations, for the runtime (`Runtime.rollback`) and the command
    line: the store, the tools the compensations run with, the workspaces the rewind
    restores, the redactor every recorded value goes through, and the clients' frames."""

    def __init__(
        self,
        store: RollbackRoles,
        tools: ToolsNow,
        workspaces: Workspaces,
        redact: Redactor,
        told: Tell | None = None,
        workspace_of: Callable[[str], Any] | None = None,
    ) -> None:
        self.store = store
        self.tools = tools
        self.workspaces = workspaces
        self.redact = redact
        self.told = told
        self.workspace_of = workspace_of or workspaces.path

    # --- reading ------------------------------------------------------------------------------
    async def preview(self, session_id: str, ref: str | int) -> Preview:
        preview, _ = await self._look(session_id, ref)
        return preview

    async def _look(self, session_id: str, ref: str | int) -> tuple[Preview, Mapping[str, Tool]]:
        """The preview, and the tools it was made with: asked for (MCP servers started) only
        when there are outside effects after `ref` — a plain rollback stays as it was."""
        session, target, steps = await asyncio.to_thread(self._read, session_id, ref)
        pending = pending_plan(steps)
        tools: Mapping[str, Tool] = {}
        effects: list[OutsideEffect] = []
        if outside_steps(steps, target.seq):
            tools = await self.tools()
            effects = effects_after(session, steps, target.seq, tools)
        preview = Preview(
            session_id,
            target.display_id,
            tuple(effects),
            pending.display_id if pending else None,
            _plan_target(pending) if pending else None,
        )
        return preview, tools

    def _read(self, session_id: str, ref: str | int) -> tuple[Session, Step, list[Step]]:
        session = self.store.record.get_session(session_id)
        target = self.store.record.get_step(session_id, ref)
        return session, target, self.store.record.steps(session_id)

    def pending(self, session_id: str) -> Step | None:
        """Blocking: the plan of a rollback the session has not finished."""
        return pending_plan(self.store.record.steps(session_id, statuses=[StepStatus.RUNNING]))

    # --- doing --------------------------------------------------------------------------------
    async def rollback(
        self,
        session_id: str,
        ref: str | int,
        *,
        lease: Lease | None,
        by: Mapping[str, Any],
        accept_irreversible: bool = False,
        retry: bool = False,
    ) -> Outcome:
        """Undo the outside effects after `ref`, then rewind to just before it. A pending
        rollback to the same step is carried on (`retry`: failed and interrupted
        compensations run again; `accept_irreversible`: they stay not undone); to another
        step, RollbackPending. IrreversibleEffects when effects nothing undoes are not
        accepted; CompensationFailed when a compensation fails (the rollback then waits)."""
        preview, tools = await self._look(session_id, ref)
        if preview.pending is not None:
            if preview.pending_target != preview.target:
                raise RollbackPending(_pending_words(preview))
            tools = await self.tools()
            plan = await asyncio.to_thread(self.store.record.get_step, session_id, preview.pending)
            return await self._carry_on(
                session_id, plan, tools, lease, retry=retry, accept=accept_irreversible
            )
        if preview.plain:
            result = await asyncio.to_thread(self.workspaces.rollback, session_id, ref)
            return Outcome(result)
        if preview.not_undone and not accept_irreversible:
            raise IrreversibleEffects(_irreversible_words(preview), preview.as_json())
        plan = await self._write_plan(session_id, preview, lease, by, accept_irreversible)
        return await self._carry_on(session_id, plan, tools, lease, retry=False, accept=False)

    async def finish_pending(self, session_id: str, lease: Lease | None) -> Outcome | None:
        """At the next start: carry on a rollback a crash cut short (compensations never
        attempted run; one cut short runs again only when idempotent, else it waits for a
        person). None: none pending. CompensationFailed when it stops for a person."""
        plan = await asyncio.to_thread(self.pending, session_id)
        if plan is None:
            return None
        tools = await self.tools()
        log.info("event=rollback_resumed session=%s plan=%s", session_id, plan.display_id)
        return await self._carry_on(session_id, plan, tools, lease, retry=False, accept=False)

    async def abandon(self, session_id: str, lease: Lease | None, by: Mapping[str, Any]) -> Step:
        """Stop a pending rollback: nothing more is undone, memory and files stay as they are
        (what was undone stays recorded). BadCommand when none is pending."""
        plan = await asyncio.to_thread(self.pending, session_id)
        if plan is None:
            raise BadCommand(f"session {session_id} has no pending rollback to abandon")
        db = self.store.leases.driven(lease) if lease is not None else self.store.record
        who = self.redact(dict(by))
        abandoned = Completion(
            status=StepStatus.FAILED,
            error_message=f"abandoned by {_who_words(who)}: nothing more is undone, memory and "
            "files were not rewound",
            output_data={"abandonedBy": who},
        )
        ended = await asyncio.to_thread(
            db.write, FinishStep(session_id=session_id, step=plan.seq, done=abandoned, told=True)
        )
        self._tell(session_id, ended)
        return ended

    # --- the process ------------------------------------------------------------------------
    async def _write_plan(
        self,
        session_id: str,
        preview: Preview,
        lease: Lease | None,
        by: Mapping[str, Any],
        accept: bool,
    ) -> Step:
        entries = []
        for e in preview.to_undo:
            entry = e.as_json() | {"input": e.input, "output": e.output}
            entries.append(entry)
        plan = NewStep(
            step_type=StepType.SYSTEM_ALERT,
            name=ROLLBACK_PLAN,
            input_data=self.redact(
                {
                    "stepId": preview.target,
                    "compensations": entries,
                    "notUndone": [e.as_json() for e in preview.not_undone],
                    "acceptIrreversible": accept,
                    "by": dict(by),
                }
            ),
        )
        db = self.store.leases.driven(lease) if lease is not None else self.store.record
        step = await asyncio.to_thread(db.write, BeginStep(session_id=session_id, step=plan))
        self._tell(session_id, step)
        return step

    async def _carry_on(
        self,
        session_id: str,
        plan: Step,
        tools: Mapping[str, Tool],
        lease: Lease | None,
        *,
        retry: bool,
        accept: bool,
    ) -> Outcome:
        db = self.store.leases.driven(lease) if lease is not None else self.store.record
        data = plan.input_data if isinstance(plan.input_data, dict) else {}
        entries = [e for e in data.get("compensations") or () if isinstance(e, dict)]
        steps = await asyncio.to_thread(self.store.record.steps, session_id)
        attempts: dict[str, list[Step]] = {}
        for c in _compensations_of(steps):
            cdata = c.input_data if isinstance(c.input_data, dict) else {}
            if cdata.get("plan") == plan.display_id:
                attempts.setdefault(str(cdata.get("effect")), []).append(c)
        present = {s.display_id for s in steps}
        compensated: list[Step] = []
        skipped: list[dict[str, Any]] = []
        for entry in entries:
            effect = str(entry.get("stepId"))
            last = attempts.get(effect, [None])[-1]
            if last is not None and last.status is StepStatus.COMPLETED:
                compensated.append(last)
                continue
            if last is not None:
                cut_short = last.status is StepStatus.RUNNING or last.interrupted
                if last.status is StepStatus.RUNNING:
                    # Its process died (this one holds the lease now): kept, marked.
                    cut = Completion(status=StepStatus.FAILED, error_message=INTERRUPTED)
                    marked = await asyncio.to_thread(
                        db.write,
                        FinishStep(session_id=session_id, step=last.seq, done=cut, told=True),
                    )
                    self._tell(session_id, marked)
                again = retry or (
                    cut_short and bool((entry.get("compensation") or {}).get("idempotent"))
                )
                if not again:
                    if accept:
                        skipped.append(entry)
                        continue
                    await self._stop(session_id, plan, db, entry, last, cut_short, compensated)
            done = await self._compensate(session_id, plan, entry, tools, db, effect in present)
            if done.status is not StepStatus.COMPLETED:
                await self._stop(session_id, plan, db, entry, done, False, compensated)
            compensated.append(done)
        not_undone = [*(data.get("notUndone") or ()), *skipped]
        output = {
            "compensated": [c.display_id for c in compensated],
            "notUndone": [e.get("stepId") for e in not_undone if isinstance(e, dict)],
        }
        target = str(data.get("stepId"))
        result = await asyncio.to_thread(
            self.workspaces.rollback, session_id, target, PlanDone(plan.seq, output)
        )
        return Outcome(
            result,
            compensated,
            [_effect_of_json(e) for e in not_undone if isinstance(e, dict)],
            plan,
        )

    async def _compensate(
        self,
        session_id: str,
        plan: Step,
        entry: Mapping[str, Any],
        tools: Mapping[str, Tool],
        db: Any,
        beside: bool,
    ) -> Step:
        """One compensation: its step written (durably) first, then run, then finished."""
        effect = str(entry.get("stepId"))
        try:
            comp = Compensation.from_json(entry.get("compensation"))
        except ValueError:  # a plan not written by this xclaw: nothing it can run
            comp = Compensation("(unreadable)", {}, False)
        by = (plan.input_data or {}).get("by") if isinstance(plan.input_data, dict) else None
        step = NewStep(
            step_type=StepType.SYSTEM_ALERT,
            name=COMPENSATION,
            input_data=self.redact(
                {
                    "effect": effect,
                    "tool": entry.get("tool"),
                    "callId": entry.get("callId"),
                    "action": comp.action,
                    "args": dict(comp.args),
                    "plan": plan.display_id,
                    "by": by,
                }
            ),
            # Beside the effect it undoes, while that step exists (the rewind deletes it).
            parent_step_id=full_step_id(session_id, _seq(effect))
            if beside and _seq(effect)
            else None,
        )
        running = await asyncio.to_thread(db.write, BeginStep(session_id=session_id, step=step))
        self._tell(session_id, running)
        tool = tools.get(str(entry.get("tool")))
        args = entry.get("input")
        args = dict(args) if isinstance(args, dict) else {}
        if comp.action == "(unreadable)":
            result = ToolResult("the plan does not say what undoes this effect", is_error=True)
        elif tool is None:
            result = ToolResult(
                f"its tool {entry.get('tool')} is not configured here: the compensation cannot "
                "run (configure it, then retry)",
                is_error=True,
            )
        else:
            ctx = ToolContext(workspace=self.workspace_of(session_id), session_id=session_id)
            try:
                result = await tool.compensate(comp, args, entry.get("output"), ctx)
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except Exception as e:  # noqa: BLE001 - a failing compensation stops the rollback
                result = ToolResult(f"{type(e).__name__}: {e}", is_error=True)
        text = self.redact.text(result.content)
        outcome = (
            Completion(
                status=StepStatus.FAILED,
                output_data=text,
                error_message=text[:500] or "the compensation failed",
            )
            if result.is_error
            else Completion(status=StepStatus.COMPLETED, output_data=text)
        )
        done: Step = await asyncio.to_thread(
            db.write, FinishStep(session_id=session_id, step=running.seq, done=outcome, told=True)
        )
        self._tell(session_id, done)
        return done

    async def _stop(
        self,
        session_id: str,
        plan: Step,
        db: Any,
        entry: Mapping[str, Any],
        attempt: Step,
        cut_short: bool,
        compensated: list[Step],
    ) -> NoReturn:
        """The rollback waits for a person: the session stays as it is (nothing rewound) and
        waits (no run resumes it); CompensationFailed says what is done and what to do."""
        await asyncio.to_thread(db.transition, session_id, Status.RUNNING, awaiting_input=True)
        data = plan.input_data if isinstance(plan.input_data, dict) else {}
        target = data.get("stepId")
        effect = f"{entry.get('stepId')} {entry.get('tool')}"
        if cut_short:
            what = (
                f"the compensation of {effect} ({attempt.display_id}) was cut short by a crash "
                "and may or may not have run (it is not declared idempotent)"
            )
        else:
            what = (
                f"the compensation of {effect} ({attempt.display_id}) failed: "
                f"{attempt.error_message or '?'}"
            )
        done_ids = {str((c.input_data or {}).get("effect")) for c in compensated}
        rest = [
            str(e.get("stepId"))
            for e in data.get("compensations") or ()
            if isinstance(e, dict) and str(e.get("stepId")) not in done_ids
        ]
        undone = ", ".join(
            f"{(c.input_data or {}).get('effect')} ({c.display_id})" for c in compensated
        )
        raise CompensationFailed(
            f"the rollback to before {target} stopped: {what}. Undone so far: {undone or 'none'}; "
            f"not yet undone: {', '.join(rest) or 'none'}. Memory and files are not rewound. "
            f"Retry it: /rollback {target} --retry (xclaw rollback … --retry); rewind leaving "
            f"the rest done: /rollback {target} --accept-irreversible; or stop the rollback: "
            "/rollback --abandon"
        )

    def _tell(self, session_id: str, step: Step) -> None:
        if self.told is not None:
            self.told(session_id, step)


def _plan_target(plan: Step) -> str | None:
    data = plan.input_data if isinstance(plan.input_data, dict) else {}
    target = data.get("stepId")
    return str(target) if target else None


def _effect_of_json(data: Mapping[str, Any]) -> OutsideEffect:
    return OutsideEffect(
        str(data.get("stepId")),
        str(data.get("tool")),
        str(data.get("callId")),
        str(data.get("agent") or "main"),
        why=str(data.get("why") or "not undone"),
    )


def _who_words(by: Mapping[str, Any]) -> str:
    user = by.get("user")
    client = by.get("client")
    return f"{user or 'the user'}" + (f" ({client})" if client else "")


def _pending_words(preview: Preview) -> str:
    return (
        f"a rollback to before {preview.pending_target} is pending ({preview.pending}): "
        f"finish it first (/rollback {preview.pending_target} --retry, or --accept-irreversible "
        "to leave what is not undone as it is) or abandon it (/rollback --abandon)"
    )


def _irreversible_words(preview: Preview) -> str:
    names = ", ".join(f"{e.step_id} {e.tool} ({e.why})" for e in preview.not_undone)
    n = len(preview.not_undone)
    return (
        f"rolling back to before {preview.target} leaves {n} outside effect"
        f"{'s' if n != 1 else ''} done that nothing undoes: {names}. Say so explicitly to go "
        "on: /rollback … --accept-irreversible, xclaw rollback --accept-irreversible, "
        "rollback(step, accept_irreversible=True)"
    )
