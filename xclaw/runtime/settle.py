"""[runtime] Settling interrupted calls by evidence, on resume (part of "no blind repeat",
docs/architecture.md; docs/reliability.md): by looking at the workspace, and by asking the
tool's own settle check.

A side-effecting call cut short by a crash is normally reported to the model as "may or may
not have run". For a tool whose effect can be seen afterwards (`check_effect`: write_file's
file already holds that content, edit_file's old text is gone and the new one is there) the
runtime looks instead: if the effect is there, the call is recorded as completed by a new
tool_call step with the same call id (the interrupted attempt stays, failed: interrupted,
nothing lost) and the model gets that result. If it is not there, nothing changes: the call is
reported as interrupted, as before.

A tool that declares a settle check (`Tool.find_outcome`: a Python tool's `settle=`, an MCP
tool's `settle:` policy, any tool that asks the remote side) is asked next: done settles the
call as above, not done has it run again at once (nothing happened, so nothing repeats), and
unknown leaves it to the old rule — the only case that reaches a person. Every answer is
recorded as a `settle_check` step (`evidence_step`) before anything acts on it. Which calls
are settled is the turn plan's decision (xclaw/runtime/turn_plan.py); this module looks and
asks, and says what the steps that record it are.

The same seam takes evidence from another side: `a2a_call`'s `check_effect` asks the remote
agent about the task its message made (its ids derived from the step: the context handed to
`check_effect` carries the step's call id), and what it answers is recorded the same way
(docs/a2a.md, "The pattern").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from xclaw.recorder.history import tool_args
from xclaw.store.steps.model import MAIN_AGENT, NewStep, Step, StepType
from xclaw.tools.base import Tool, ToolContext, ToolResult
from xclaw.tools.effects import Evidence, Outcome

# The alert that records a settle check's answer (`evidence_step`).
SETTLE_CHECK = "settle_check"


async def look_at_workspace(
    steps: Iterable[Step],
    refs: Iterable[str],
    tools: Mapping[str, Tool],
    ctx: ToolContext,
) -> dict[str, ToolResult]:
    """What the workspace shows of the interrupted calls `refs` (display ids): display id ->
    the result of each whose effect is there. Each check is blocking, on a thread; no refs,
    no thread."""
    wanted = set(refs)
    seen: dict[str, ToolResult] = {}
    if not wanted:
        return seen
    for step in steps:
        if (
            step.display_id not in wanted
            or step.step_type is not StepType.TOOL_CALL
            or not step.call_id
        ):
            continue
        tool = tools.get(step.name)
        if tool is None:
            continue
        args: dict[str, Any] = tool_args(step)
        looking = replace(ctx, call_id=step.call_id)  # (what a tool finds its effect by)
        result: ToolResult | None = await asyncio.to_thread(tool.check_effect, args, looking)
        if result is not None and not result.is_error:
            seen[step.display_id] = result
    return seen


def settling_step(step: Step) -> NewStep:
    """The step that records `step`, an interrupted call the workspace shows ran, as
    completed: a new tool_call with its call id, name, input and parent (written completed,
    with the tool's result as output)."""
    return NewStep(
        step_type=StepType.TOOL_CALL,
        name=step.name,
        input_data=step.input_data,
        parent_step_id=step.parent_step_id,
        agent=MAIN_AGENT,
        call_id=step.call_id,
    )


async def ask_the_tools(
    steps: Iterable[Step],
    refs: Iterable[str],
    tools: Mapping[str, Tool],
    ctx: ToolContext,
) -> dict[str, Evidence]:
    """What the settle checks of the interrupted calls `refs` (display ids) answer: display
    id -> evidence, for each call whose tool declares a check. A check that fails knows
    nothing (unknown); each is the tool's to bound in time (`effect_timeout_s`)."""
    wanted = set(refs)
    found: dict[str, Evidence] = {}
    for step in steps:
        if (
            step.display_id not in wanted
            or step.step_type is not StepType.TOOL_CALL
            or not step.call_id
        ):
            continue
        tool = tools.get(step.name)
        ask = getattr(tool, "find_outcome", None)
        if ask is None:
            continue
        try:
            evidence: Evidence | None = await ask(tool_args(step), ctx)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a check that breaks knows nothing
            evidence = Evidence(Outcome.UNKNOWN, f"its settle check failed: {type(e).__name__}")
        if evidence is not None:
            found[step.display_id] = evidence
    return found


def evidence_step(step: Step, evidence: Evidence) -> NewStep:
    """The `settle_check` alert recording what a check answered about `step` (beside it in
    the trace: the same parent and call id)."""
    return NewStep(
        step_type=StepType.SYSTEM_ALERT,
        name=SETTLE_CHECK,
        input_data={
            "tool": step.name,
            "callId": step.call_id,
            "stepId": step.display_id,
            "outcome": evidence.outcome.value,
            "detail": evidence.detail,
        },
        parent_step_id=step.parent_step_id,
        agent=MAIN_AGENT,
        call_id=step.call_id,
    )
