"""The turn plan as a table: a record in (the session's status, its steps after the turn's
marking, what the marking marked, the workspace's files), the plan out (what is settled by
looking, the notices, the resume alert, the resume note, how a compaction ends). The
workspace is real: the file tools' own checks look at it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from xclaw.recorder.history import build_history
from xclaw.runtime.settle import look_at_workspace
from xclaw.runtime.turn_plan import (
    RESUME_NOTICE,
    SUPERSEDED,
    Marking,
    Record,
    Turn,
    plan_turn,
    safe_retry_notice,
    settled_notice,
    unsafe_retry_notice,
    worth_looking,
)
from xclaw.store.steps.model import (
    APPROVAL_STEP_NAME,
    INTERRUPTED,
    Status,
    Step,
    StepStatus,
    StepType,
)
from xclaw.tools.base import ToolContext, retries_on_resume
from xclaw.tools.registry import default_tools

SID = "plan"
TOOLS = default_tools()


def _step(seq: int, kind: StepType, name: str, status: StepStatus, **kw: Any) -> Step:
    return Step(
        step_id=f"{SID}:s{seq:04d}",
        session_id=SID,
        seq=seq,
        parent_step_id=kw.pop("parent", None),
        step_type=kind,
        name=name,
        status=status,
        **kw,
    )


def user(seq: int, text: str = "do it") -> Step:
    return _step(seq, StepType.USER_INPUT, "user", StepStatus.COMPLETED, input_data=text)


def llm(seq: int, *calls: tuple[str, str, dict[str, Any]]) -> Step:
    out = {"text": "", "tool_calls": [{"id": i, "name": n, "input": a} for i, n, a in calls]}
    return _step(seq, StepType.LLM_CALL, "script:x", StepStatus.COMPLETED, output_data=out)


def llm_failed(seq: int) -> Step:
    return _step(seq, StepType.LLM_CALL, "script:x", StepStatus.FAILED, error_message="429")


def tool(seq: int, call: tuple[str, str, dict[str, Any]], *, interrupted: bool = True) -> Step:
    call_id, name, args = call
    status, error = (
        (StepStatus.FAILED, INTERRUPTED) if interrupted else (StepStatus.COMPLETED, None)
    )
    return _step(
        seq,
        StepType.TOOL_CALL,
        name,
        status,
        call_id=call_id,
        input_data=args,
        error_message=error,
        parent=f"{SID}:s{seq - 1:04d}",
    )


def approval(seq: int, call_id: str, *, pending: bool) -> Step:
    status, error = (StepStatus.RUNNING, None) if pending else (StepStatus.FAILED, INTERRUPTED)
    return _step(
        seq,
        StepType.SYSTEM_ALERT,
        APPROVAL_STEP_NAME,
        status,
        call_id=call_id,
        error_message=error,
        output_data=None if pending else SUPERSEDED,
    )


WRITE = ("c1", "write_file", {"path": "a.txt", "content": "hello"})
EDIT = ("c2", "edit_file", {"path": "b.txt", "old_text": "old", "new_text": "new"})
READ = ("c3", "read_file", {"path": "a.txt"})
SHELL = ("c4", "shell", {"command": "rm -rf build"})


@dataclass
class Case:
    turn: Turn
    status: Status
    steps: list[Step]
    interrupted: list[str] = field(default_factory=list)  # display ids the marking marked
    files: dict[str, str] = field(default_factory=dict)  # the workspace
    # The plan expected:
    settled: list[str] = field(default_factory=list)  # interrupted steps settled by looking
    notices: list[str] = field(default_factory=list)
    alert: dict[str, Any] | None = None  # the resume alert's details (before settling)
    note: bool = False
    compaction_ends: Status | None = None


def alert(
    interrupted: list[str] = [],  # noqa: B006 - read only
    retrying: list[str] = [],  # noqa: B006
    may_have_run: list[str] = [],  # noqa: B006
    after_failed: bool = False,
) -> dict[str, Any]:
    details: dict[str, Any] = {"after": "Failed"} if after_failed else {}
    return details | {
        "interrupted": interrupted,
        "retrying": retrying,
        "mayHaveRun": may_have_run,
        "settledByWorkspace": [],
    }


CASES = {
    "resume: an interrupted write_file whose effect is there is settled by looking": Case(
        Turn.RESUME,
        Status.RUNNING,
        [user(1), llm(2, WRITE), tool(3, WRITE)],
        interrupted=["s0003"],
        files={"a.txt": "hello"},
        settled=["s0003"],
        alert=alert(interrupted=["s0003"]),
        note=True,
    ),
    "resume: an interrupted write_file whose effect is not there may have run": Case(
        Turn.RESUME,
        Status.RUNNING,
        [user(1), llm(2, WRITE), tool(3, WRITE)],
        interrupted=["s0003"],
        files={"a.txt": "hell"},
        notices=[RESUME_NOTICE, unsafe_retry_notice("write_file", "s0003")],
        alert=alert(interrupted=["s0003"], may_have_run=["s0003"]),
        note=True,
    ),
    "resume: of two interrupted edits only the one the workspace shows is settled": Case(
        Turn.RESUME,
        Status.RUNNING,
        [user(1), llm(2, WRITE, EDIT), tool(3, WRITE), tool(4, EDIT)],
        interrupted=["s0003", "s0004"],
        files={"a.txt": "other", "b.txt": "the new text"},
        settled=["s0004"],
        notices=[RESUME_NOTICE, unsafe_retry_notice("write_file", "s0003")],
        alert=alert(interrupted=["s0003", "s0004"], may_have_run=["s0003"]),
        note=True,
    ),
    "resume: an interrupted read_file runs again": Case(
        Turn.RESUME,
        Status.RUNNING,
        [user(1), llm(2, READ), tool(3, READ)],
        interrupted=["s0003"],
        notices=[RESUME_NOTICE, safe_retry_notice("read_file", "s0003")],
        alert=alert(interrupted=["s0003"], retrying=["s0003"]),
        note=True,
    ),
    "resume: an interrupted shell command is the model's to retry, with approval": Case(
        Turn.RESUME,
        Status.RUNNING,
        [user(1), llm(2, SHELL), tool(3, SHELL)],
        interrupted=["s0003"],
        notices=[RESUME_NOTICE, unsafe_retry_notice("shell", "s0003")],
        alert=alert(interrupted=["s0003"], may_have_run=["s0003"]),
        note=True,
    ),
    "resume after Failed: the failed LLM call is made again": Case(
        Turn.RESUME,
        Status.FAILED,
        [user(1), llm_failed(2)],
        alert=alert(after_failed=True),
        note=True,
    ),
    "resume with a pending approval: asked again": Case(
        Turn.RESUME,
        Status.PAUSED,
        [user(1), llm(2, SHELL), approval(3, "c4", pending=True)],
        alert=alert(),
        note=True,
    ),
    "resume with nothing interrupted: no alert": Case(
        Turn.RESUME, Status.RUNNING, [user(1), llm(2, SHELL)], note=True
    ),
    "a new message answers a pending approval, and plans nothing more": Case(
        Turn.MESSAGE,
        Status.RUNNING,
        [user(1), llm(2, SHELL), approval(3, "c4", pending=False), user(4, "no, instead")],
        interrupted=["s0003"],
    ),
    "a new message never settles by looking, even when the effect is there": Case(
        Turn.MESSAGE,
        Status.RUNNING,
        [user(1), llm(2, WRITE), tool(3, WRITE), user(4, "next")],
        interrupted=["s0003"],
        files={"a.txt": "hello"},
    ),
    "a compaction of a finished session leaves it Success": Case(
        Turn.COMPACTION, Status.SUCCESS, [user(1)], compaction_ends=Status.SUCCESS
    ),
    "a compaction of a new session leaves it Success": Case(
        Turn.COMPACTION, Status.INIT, [], compaction_ends=Status.SUCCESS
    ),
    "a compaction of a Failed session leaves it Failed": Case(
        Turn.COMPACTION, Status.FAILED, [user(1), llm_failed(2)], compaction_ends=Status.FAILED
    ),
    "a compaction while waiting for input leaves it Running": Case(
        Turn.COMPACTION, Status.RUNNING, [user(1)]
    ),
}


def history(steps: list[Step], turn: Turn) -> Any:
    return build_history(
        steps,
        read_only=lambda name: name in TOOLS and retries_on_resume(TOOLS[name]),
        resumable=lambda name: name in TOOLS and TOOLS[name].resumable,
        new_input=False,
    )


async def record_of(case: Case, workspace: Path) -> Record:
    """What the drive reads: the history, and what the workspace shows (looked at only for
    the calls the plan may settle)."""
    for name, text in case.files.items():
        (workspace / name).write_text(text)
    hist = history(case.steps, case.turn)
    ctx = ToolContext(workspace=workspace, session_id=SID)
    seen = await look_at_workspace(case.steps, worth_looking(case.turn, hist), TOOLS, ctx)
    marked = [s for s in case.steps if s.display_id in case.interrupted]
    return Record(case.status, case.steps, marked, hist, seen)


@pytest.mark.parametrize("name", list(CASES))
async def test_the_plan_of_a_turn_follows_from_its_record(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    plan = plan_turn(case.turn, await record_of(case, tmp_path))
    assert [s.interrupted.display_id for s in plan.settle] == case.settled
    assert list(plan.notices) == case.notices
    got = None if plan.resume_alert is None else plan.resume_alert.details([])
    assert got == case.alert
    assert plan.resume_note is case.note
    assert plan.compaction_ends is case.compaction_ends


async def test_a_settled_call_is_recorded_as_the_interrupted_one_completed(tmp_path: Path) -> None:
    """Same call id, name, input and parent; the output is what the tool's check found; the
    alert names the new step, and so does the notice said once it is written."""
    case = CASES["resume: an interrupted write_file whose effect is there is settled by looking"]
    (settle,) = plan_turn(case.turn, await record_of(case, tmp_path)).settle
    step = settle.step
    assert (step.step_type, step.name, step.call_id) == (StepType.TOOL_CALL, "write_file", "c1")
    assert step.input_data == WRITE[2] and step.parent_step_id == f"{SID}:s0002"
    assert "wrote 5 bytes" in settle.output and "checked after an interruption" in settle.output
    written = replace(case.steps[2], seq=4, step_id=f"{SID}:s0004", status=StepStatus.COMPLETED)
    plan = plan_turn(case.turn, await record_of(case, tmp_path))
    assert plan.resume_alert is not None
    assert plan.resume_alert.details([written])["settledByWorkspace"] == ["s0004"]
    assert settled_notice(written) == (
        "[resume] write_file c1 was interrupted; the workspace shows it ran, recorded as s0004"
    )


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n].settled])
async def test_what_the_plan_says_may_have_run_is_what_the_record_says_once_settled(
    name: str, tmp_path: Path
) -> None:
    """The plan decides before the settling steps are written; the history rebuilt after
    (what the agent goes on from) agrees with it."""
    case = CASES[name]
    plan = plan_turn(case.turn, await record_of(case, tmp_path))
    seq = len(case.steps)
    written = [
        replace(s.interrupted, seq=(seq := seq + 1), status=StepStatus.COMPLETED, output_data="ok")
        for s in plan.settle
    ]
    after = history([*case.steps, *written], case.turn)
    assert plan.resume_alert is not None
    assert list(plan.resume_alert.may_have_run) == after.interrupted_unsafe
    assert list(plan.resume_alert.retrying) == after.interrupted_retry


def test_how_each_turn_marks_what_the_last_run_left_running() -> None:
    """A resume asks a pending approval again; new input (a message, /compact) answers it."""
    assert Turn.RESUME.marking == Marking(keep_approvals=True)
    assert Turn.MESSAGE.marking == Marking(keep_approvals=False, approval_output=SUPERSEDED)
    assert Turn.COMPACTION.marking == Turn.MESSAGE.marking
    assert SUPERSEDED["approved"] is False and SUPERSEDED["by"]["kind"] == "new_input"


def test_settle_checks_decide_before_anyone_is_asked() -> None:
    """Evidence from the tools' settle checks: done is settled, not done runs again at once,
    unknown is the only one reported as "may or may not have run" (and every answer is in
    the plan, to be recorded as a step)."""
    from xclaw.tools.effects import Evidence, Outcome

    a, b, c = (
        ("p1", "pay", {"ref": "A"}),
        ("p2", "pay", {"ref": "B"}),
        ("p3", "pay", {"ref": "C"}),
    )
    steps = [user(1), llm(2, a, b, c), tool(3, a), tool(4, b), tool(5, c)]
    hist = history(steps, Turn.RESUME)
    assert hist.interrupted_unsafe == ["s0003", "s0004", "s0005"]
    evidence = {
        "s0003": Evidence(Outcome.DONE, "check says done", '{"id": 1}'),
        "s0004": Evidence(Outcome.NOT_DONE, "check says not done"),
        "s0005": Evidence(Outcome.UNKNOWN, "check raised"),
    }
    record = Record(Status.RUNNING, steps, steps[2:], hist, {}, evidence)
    plan = plan_turn(Turn.RESUME, record)
    assert [(s.interrupted.display_id, s.output, s.by_check) for s in plan.settle] == [
        ("s0003", '{"id": 1}', True)
    ]
    assert [s.display_id for s in plan.rerun] == ["s0004"]
    assert [(s.display_id, e.outcome) for s, e in plan.checks] == [
        ("s0003", Outcome.DONE),
        ("s0004", Outcome.NOT_DONE),
        ("s0005", Outcome.UNKNOWN),
    ]
    assert list(plan.notices) == [
        RESUME_NOTICE,
        "[resume] pay s0004 was interrupted before it took effect (its settle check says not "
        "done): it runs now",
        unsafe_retry_notice("pay", "s0005"),
    ]
    assert plan.resume_alert is not None
    written = replace(steps[2], seq=6, step_id=f"{SID}:s0006")
    details = plan.resume_alert.details([written])
    assert details["mayHaveRun"] == ["s0005"] and details["retrying"] == ["s0004"]
    assert details["settledByCheck"] == ["s0006"] and details["notDone"] == ["s0004"]
    assert details["settledByWorkspace"] == []
    # Rebuilt with the not-done call to run again: it is pending, not a suspect.
    again = build_history(steps, read_only=lambda n: False, rerun={"p2"})
    assert again.interrupted_retry == ["s0004"] and "s0004" not in again.interrupted_unsafe
