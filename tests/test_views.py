"""The plain-text views: snapshot-style, built from pure values (no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import (
    INTERRUPTED,
    Session,
    Status,
    Step,
    StepStatus,
    StepTreeNode,
    StepType,
)
from xclaw.views.record import format_sessions, format_steps, format_tree

PRICES = PriceTable.with_overrides(None)

SID = "cli"


def text(rows: list[str]) -> str:
    """An expected rendering, written one output line per list item."""
    return "\n".join(rows)


def step(
    seq: int,
    kind: StepType,
    name: str,
    data=None,
    *,
    status=StepStatus.COMPLETED,
    parent: int | None = None,
    start: int = 1000,
    end: int | None = 1000,
    tokens=(0, 0),
    error: str | None = None,
    agent: str = "main",
) -> Step:
    return Step(
        step_id=f"{SID}:s{seq:04d}",
        session_id=SID,
        seq=seq,
        parent_step_id=None if parent is None else f"{SID}:s{parent:04d}",
        step_type=kind,
        name=name,
        status=status,
        agent=agent,
        input_data=data,
        error_message=error,
        start_time=start,
        end_time=end,
        token_usage_prompt=tokens[0],
        token_usage_completion=tokens[1],
    )


SEED_STEPS = [
    step(1, StepType.USER_INPUT, "user", "帮我分析日志"),
    step(2, StepType.LLM_CALL, "claude-opus-4-7", {"model": "claude-opus-4-7"}),
    step(3, StepType.TOOL_CALL, "shell", {"command": "cat app.log"}),
    step(4, StepType.LLM_CALL, "claude-opus-4-7", {"model": "claude-opus-4-7"}),
    step(5, StepType.USER_INPUT, "user", {"content": "统计 ERROR 行数"}),
    step(6, StepType.LLM_CALL, "claude-opus-4-7", None),
    step(
        7, StepType.TOOL_CALL, "shell", {"command": "grep -c ERROR app.log | sort | uniq -c | head"}
    ),
    step(8, StepType.LLM_CALL, "claude-opus-4-7", None),
]


def test_steps_listing_has_the_tutorials_layout() -> None:
    assert format_steps(SEED_STEPS, SID, PRICES) == text(
        [
            "Steps (session: cli):",
            '  s0001  user_input    user        "帮我分析日志"',
            "  s0002  llm_call      llm",
            '  s0003  tool_call     shell       {"command":"cat app.log"}',
            "  s0004  llm_call      llm",
            '  s0005  user_input    user        "统计 ERROR 行数"',
            "  s0006  llm_call      llm",
            '  s0007  tool_call     shell       {"command":"grep -c ERROR app.log | sort | un...',
            "  s0008  llm_call      llm",
            "",
            "Usage:",
            "  /rollback s0005   go back to just before this step and redo from there",
            "  /fork s0005       branch a new session from this step (this one is kept)",
        ]
    )


def test_steps_listing_marks_unfinished_and_sub_agent_steps() -> None:
    steps = [
        step(
            1,
            StepType.TOOL_CALL,
            "shell",
            {"command": "sleep 10"},
            status=StepStatus.RUNNING,
            end=None,
        ),
        step(
            2,
            StepType.TOOL_CALL,
            "shell",
            {"command": "x"},
            status=StepStatus.FAILED,
            error=INTERRUPTED,
        ),
        step(
            3,
            StepType.TOOL_CALL,
            "write_file",
            {"path": "a"},
            status=StepStatus.FAILED,
            error="permission denied\nmore",
        ),
        step(4, StepType.USER_INPUT, "user", "a  long\nmessage " + "x" * 80),
        step(5, StepType.LLM_CALL, "m", None, agent="s0003"),
        step(6, StepType.SYSTEM_ALERT, "approval", None, status=StepStatus.RUNNING, end=None),
    ]
    session = Session(session_id=SID, title="t", status=Status.RUNNING, created_at=0, updated_at=0)
    lines = format_steps(steps, session, PRICES).splitlines()
    assert lines[1:7] == [
        '  s0001  tool_call     shell       {"command":"sleep 10"} [running]',
        '  s0002  tool_call     shell       {"command":"x"} [interrupted]',
        '  s0003  tool_call     write_file  {"path":"a"} [failed: permission denied more]',
        '  s0004  user_input    user        "a long message xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."',
        "  s0005  llm_call      llm (s0003)",
        "  s0006  system_alert  approval    [running]",
    ]
    assert lines[-2].startswith("  /rollback s0004")


def test_steps_listing_when_empty() -> None:
    assert format_steps([], SID, PRICES) == "Steps (session: cli):\n  (no steps yet)"


def test_tree_with_durations_and_tokens() -> None:
    u = step(1, StepType.USER_INPUT, "user", "hi")
    lm = step(
        2, StepType.LLM_CALL, "model-x", None, parent=1, start=1000, end=2250, tokens=(1200, 80)
    )
    t1 = step(3, StepType.TOOL_CALL, "shell", {"command": "ls"}, parent=2, start=2300, end=2315)
    t2 = step(
        4,
        StepType.TOOL_CALL,
        "spawn_agent",
        {"task": "x"},
        parent=2,
        end=None,
        status=StepStatus.RUNNING,
    )
    sub = step(5, StepType.LLM_CALL, "model-x", None, parent=4, start=0, end=5, agent="s0004")
    u2 = step(6, StepType.USER_INPUT, "user", "next")
    tree = [
        StepTreeNode(
            u, (StepTreeNode(lm, (StepTreeNode(t1), StepTreeNode(t2, (StepTreeNode(sub),)))),)
        ),
        StepTreeNode(u2),
    ]
    assert format_tree(tree, PRICES) == text(
        [
            's0001  user_input  user  "hi"  (0 ms)',
            "└─ s0002  llm_call  model-x  (1250 ms, 1200+80 tok)",
            '   ├─ s0003  tool_call  shell  {"command":"ls"}  (15 ms)',
            '   └─ s0004  tool_call  spawn_agent  {"task":"x"}  (running)',
            "      └─ s0005  llm_call  model-x  (5 ms, agent s0004)",
            's0006  user_input  user  "next"  (0 ms)',
        ]
    )
    assert format_tree([], PRICES) == "(no steps yet)"


def test_sessions_table() -> None:
    # The state in words (Running only while a run is in flight), relative times.
    t = int(datetime(2026, 5, 9, 7, 35).timestamp() * 1000)
    rows = [
        Session(
            session_id="web-abc123",
            title="refactor readFile",
            status=Status.SUCCESS,
            created_at=t,
            updated_at=t,
        ),
        Session(
            session_id="fork_a1b2c3",
            title="plan A",
            status=Status.INIT,
            created_at=t,
            updated_at=t - 3 * 3600_000,
            is_forked=True,
            parent_session_id="web-abc123",
            forked_from_seq=2,
        ),
        Session(
            session_id="x",
            title="",
            status=Status.RUNNING,
            created_at=t,
            updated_at=t - 90_000,
            awaiting_input=True,
        ),
        Session(session_id="busy1", title="b", status=Status.RUNNING, created_at=t, updated_at=t),
        Session(
            session_id="crashed",
            title="c",
            status=Status.RUNNING,
            created_at=t,
            updated_at=t - 30 * 86_400_000,
        ),
        Session(
            session_id="orphan",
            title="o",
            status=Status.FAILED,
            created_at=t,
            updated_at=t - 86_400_000 - 1,
            is_forked=True,
        ),
    ]
    assert format_sessions(rows, busy=lambda sid: sid == "busy1", now_ms=t + 5_000) == text(
        [
            "SESSION      STATE                              UPDATED     TITLE",
            "web-abc123   Success                            just now    refactor readFile",
            "fork_a1b2c3  Waiting for your instruction       3 h ago     plan A  [fork of web-abc123 at s0002]",
            "x            Waiting for your instruction       1 min ago   (untitled)",
            "busy1        Running                            just now    b",
            "crashed      Interrupted · resumes when opened  2026-04-09  c",
            "orphan       Failed                             yesterday   o  [fork of a deleted session]",
        ]
    )
    assert format_sessions([]) == "No sessions yet."


def test_steps_listing_shows_what_llm_calls_said_and_hints_at_a_main_instruction() -> None:
    # LLM rows show their text (or the tools they called) and their time; the usage
    # hint names the latest main-agent instruction, never a sub-agent's task.
    said = step(2, StepType.LLM_CALL, "m", None, start=1000, end=2300)
    said = replace(said, output_data={"text": "Let me look.", "tool_calls": [{"name": "shell"}]})
    steps = [
        step(1, StepType.USER_INPUT, "user", "go"),
        said,
        step(3, StepType.USER_INPUT, "user", "sub task", agent="s0002"),
    ]
    lines = format_steps(steps, SID, PRICES).splitlines()
    assert lines[2] == '  s0002  llm_call      llm         "Let me look." → shell (1.3 s)'
    assert lines[-2].startswith("  /rollback s0001")


def test_steps_listing_says_approvals_and_resumes_in_words() -> None:
    """An approval row says what was asked and the answer, a resume row what was interrupted,
    as the trace and the comparison do, not the alert's raw JSON."""
    approved = step(
        2,
        StepType.SYSTEM_ALERT,
        "approval",
        {"tool": "shell", "args": {"command": "rm -f notes.txt"}},
    )
    approved = replace(approved, output_data={"approved": True})
    denied = step(
        3,
        StepType.SYSTEM_ALERT,
        "approval",
        {"tool": "write_file", "args": {"path": "a.txt", "content": "x"}},
    )
    denied = replace(denied, output_data={"approved": False})
    waiting = step(
        4,
        StepType.SYSTEM_ALERT,
        "approval",
        {"tool": "shell", "args": {"command": "make"}},
        status=StepStatus.RUNNING,
        end=None,
    )
    resume = step(
        5,
        StepType.SYSTEM_ALERT,
        "resume",
        {
            "interrupted": ["s0009"],
            "retrying": [],
            "mayHaveRun": ["s0009"],
            "settledByWorkspace": [],
        },
    )
    lines = format_steps(
        [step(1, StepType.USER_INPUT, "user", "go"), approved, denied, waiting, resume], SID, PRICES
    ).splitlines()
    assert lines[2:6] == [
        "  s0002  system_alert  approval    asked to run shell: rm -f notes.txt — approved",
        "  s0003  system_alert  approval    asked to run write_file: a.txt — denied",
        "  s0004  system_alert  approval    asked to run shell: make — waiting for an answer [running]",
        "  s0005  system_alert  resume      interrupted s0009 · may have run s0009",
    ]
