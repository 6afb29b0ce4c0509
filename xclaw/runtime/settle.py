"""Settling interrupted calls by looking at the workspace, on resume (part of "no
blind repeat", docs/architecture.md; docs/reliability.md).

A side-effecting call cut short by a crash is normally reported to the model as "may or may
not have run". For a tool whose effect can be seen afterwards (`check_effect`: write_file's
file already holds that content, edit_file's old text is gone and the new one is there) the
runtime looks instead: if the effect is there, the call is recorded as completed by a new
tool_call step with the same call id (the interrupted attempt stays, failed: interrupted,
nothing lost) and the model gets that result. If it is not there, nothing changes: the call is
reported as interrupted, as before. Which calls are settled is the turn plan's decision
(xclaw/runtime/turn_plan.py); this module looks, and says what the settling step is.

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
from xclaw.store.model import MAIN_AGENT, NewStep, Step, StepType
from xclaw.tools.base import Tool, ToolContext, ToolResult


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
