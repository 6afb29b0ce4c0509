"""[runtime] The turn plan: what a turn does, decided from the record before anything runs (docs/
architecture.md, "Resume").

A turn is one of three requests (`Turn`): the user's new message, a resume of interrupted work
(after a crash, or after Failed when the user asks) or a compaction. How it marks what the last
run left `running` (`Turn.marking`), which interrupted calls it settles by looking at the
workspace, what it says to the clients, whether it writes a `resume` alert and with which
details: all of it is computed here from values — the session's status, its steps, what the
workspace shows, the request — so it reads, and is tested, as a table. xclaw/runtime/drive.py
reads the record and carries the plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from xclaw.people.answered_by import NEW_INPUT, AnsweredBy, answer_output
from xclaw.recorder.history import History
from xclaw.runtime.settle import settling_step
from xclaw.store.steps.model import NewStep, Status, Step
from xclaw.tools.base import ToolResult
from xclaw.tools.effects import Evidence, Outcome

RESUME_NOTICE = "[resume] detected interrupted tool_call, retrying..."
# What an approval still waiting records when new input (a message, /compact) ends the wait.
SUPERSEDED = answer_output(False, AnsweredBy(NEW_INPUT))


# After RESUME_NOTICE (a fixed line of the seed's), one line per interrupted call says how
# that call is retried: at once, or only once the model asks again and the person approves.
# They read on from "retrying...", never against it.


def safe_retry_notice(name: str, step: str) -> str:
    """A call that is safe to repeat (read-only, idempotent): the runtime runs it again."""
    return f"[resume] {name} {step} is retried now, automatically: repeating it is safe"


def unsafe_retry_notice(name: str, step: str) -> str:
    """A call that may or may not have run (no blind repeat): retried only by the model, and
    only with the person's approval."""
    return (
        f"[resume] {name} {step} may or may not have run: it is retried only if the model asks "
        "for it again, and only once you approve"
    )


def settled_notice(step: Step, by_check: bool = False) -> str:
    """Said once `step`, the completed record of a call the workspace (or the tool's settle
    check) shows ran, is written."""
    shown = "its settle check shows" if by_check else "the workspace shows"
    return (
        f"[resume] {step.name} {step.call_id} was interrupted; {shown} it ran, "
        f"recorded as {step.display_id}"
    )


def not_done_notice(name: str, step: str) -> str:
    """A call its settle check says never took effect: run now, nothing repeats."""
    return (
        f"[resume] {name} {step} was interrupted before it took effect (its settle check "
        "says not done): it runs now"
    )


@dataclass(frozen=True)
class Marking:
    """How a turn marks the steps the last run left `running`: failed, `interrupted`, kept
    (nothing lost). `approval_output`: what a pending approval records when the turn answers
    it; with `keep_approvals` it stays pending and is asked again."""

    keep_approvals: bool
    approval_output: Mapping[str, Any] | None = None


class Turn(Enum):
    MESSAGE = "message"  # the user's new message (Runtime.send)
    RESUME = "resume"  # interrupted work continued; after Failed on request (resume_if_needed)
    COMPACTION = "compaction"  # /compact (Runtime.compact)

    @property
    def marking(self) -> Marking:
        """A resume asks a pending approval again (approval asked again); new input answers
        it (superseded)."""
        if self is Turn.RESUME:
            return Marking(keep_approvals=True)
        return Marking(keep_approvals=False, approval_output=SUPERSEDED)


@dataclass(frozen=True)
class Record:
    """What a turn is planned from, read before it runs."""

    status: Status  # the session's, when the turn started (a message: Running, as it opened)
    steps: Sequence[Step]  # the main agent's, after the marking
    interrupted: Sequence[Step]  # what the marking marked
    history: History  # `steps` as messages, with this toolbox's tool kinds
    # What the workspace shows: display id -> the result of each interrupted call (among
    # `worth_looking`) whose effect is there.
    seen: Mapping[str, ToolResult] = field(default_factory=dict)
    # What the tools' settle checks answered of the others: display id -> evidence.
    evidence: Mapping[str, Evidence] = field(default_factory=dict)


@dataclass(frozen=True)
class Settlement:
    """An interrupted call the workspace shows ran: recorded as completed by `step`, a new
    tool_call with the same call id, whose output is `output` (the interrupted attempt stays:
    nothing lost)."""

    interrupted: Step
    step: NewStep
    output: str
    by_check: bool = False  # the tool's settle check said done (else the workspace shows it)


@dataclass(frozen=True)
class ResumeAlert:
    """The `resume` system_alert: what the resume found and how it goes on."""

    after_failed: bool
    interrupted: tuple[str, ...]  # display ids the marking marked
    retrying: tuple[str, ...]  # calls run again automatically
    may_have_run: tuple[str, ...]  # calls reported to the model as interrupted
    not_done: tuple[str, ...] = ()  # calls their settle check says never took effect: rerun
    checked_calls: frozenset[str] = frozenset()  # call ids a settle check settled as done

    def details(self, settled: Sequence[Step]) -> dict[str, Any]:
        """The alert's details, with the ids the settling steps got (known once written)."""
        details: dict[str, Any] = {"after": Status.FAILED.value} if self.after_failed else {}
        by_check = [s.display_id for s in settled if s.call_id in self.checked_calls]
        details |= {
            "interrupted": list(self.interrupted),
            "retrying": list(self.retrying),
            "mayHaveRun": list(self.may_have_run),
            "settledByWorkspace": [
                s.display_id for s in settled if s.call_id not in self.checked_calls
            ],
        }
        if by_check or self.not_done:  # settled by evidence (a tool's settle check)
            details |= {"settledByCheck": by_check, "notDone": list(self.not_done)}
        return details


@dataclass(frozen=True)
class TurnPlan:
    turn: Turn
    settle: tuple[Settlement, ...] = ()
    # Each settle check's answer, recorded as a step before anything acts on it.
    checks: tuple[tuple[Step, Evidence], ...] = ()
    # Interrupted calls whose check says not done: the history runs them again at once.
    rerun: tuple[Step, ...] = ()
    notices: tuple[str, ...] = ()  # said before the run starts
    resume_alert: ResumeAlert | None = None
    resume_note: bool = False  # the resume note goes with the next LLM request
    # What a compaction leaves the session in (its summary call ran it for a moment);
    # None: it stays Running.
    compaction_ends: Status | None = None


def worth_looking(turn: Turn, history: History) -> list[str]:
    """The interrupted calls whose effect the workspace may show (display ids): a resume's
    calls that may or may not have run (no blind repeat)."""
    return list(history.interrupted_unsafe) if turn is Turn.RESUME else []


def plan_turn(turn: Turn, record: Record) -> TurnPlan:
    """What `turn` does, from `record` alone."""
    if turn is Turn.COMPACTION:
        before = record.status
        if before is Status.RUNNING:
            return TurnPlan(turn)
        return TurnPlan(turn, compaction_ends=Status.SUCCESS if before is Status.INIT else before)
    if turn is not Turn.RESUME:
        return TurnPlan(turn)
    hist = record.history
    wanted = set(worth_looking(turn, hist))
    settle: list[Settlement] = []
    checks: list[tuple[Step, Evidence]] = []
    rerun: list[Step] = []
    for step in record.steps:  # in the record's order
        ref = step.display_id
        if ref not in wanted:
            continue
        if ref in record.seen:  # the workspace shows it: no check needs asking
            settle.append(Settlement(step, settling_step(step), record.seen[ref].content))
            continue
        evidence = record.evidence.get(ref)
        if evidence is None:
            continue
        checks.append((step, evidence))
        if evidence.outcome is Outcome.DONE:
            output = evidence.result or f"[settled] {step.name}: {evidence.detail}"
            settle.append(Settlement(step, settling_step(step), output, by_check=True))
        elif evidence.outcome is Outcome.NOT_DONE:
            rerun.append(step)
    decided = {s.interrupted.display_id for s in settle} | {s.display_id for s in rerun}
    unsafe = tuple(ref for ref in hist.interrupted_unsafe if ref not in decided)
    notices: list[str] = []
    if hist.interrupted_retry or unsafe or rerun:
        notices.append(RESUME_NOTICE)
    names = {s.display_id: s.name for s in record.steps}
    # Each goes on from RESUME_NOTICE (how this call is retried), never against it.
    notices += [safe_retry_notice(names.get(ref, "tool"), ref) for ref in hist.interrupted_retry]
    notices += [not_done_notice(s.name, s.display_id) for s in rerun]
    notices += [unsafe_retry_notice(names.get(ref, "tool"), ref) for ref in unsafe]
    after_failed = record.status is Status.FAILED
    alert = None
    if record.interrupted or hist.pending_approvals or after_failed or settle:
        alert = ResumeAlert(
            after_failed,
            tuple(s.display_id for s in record.interrupted),
            (*hist.interrupted_retry, *(s.display_id for s in rerun)),
            unsafe,
            tuple(s.display_id for s in rerun),
            frozenset(
                s.interrupted.call_id for s in settle if s.by_check and s.interrupted.call_id
            ),
        )
    return TurnPlan(
        turn, tuple(settle), tuple(checks), tuple(rerun), tuple(notices), alert, resume_note=True
    )
