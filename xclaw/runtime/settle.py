"""Settling interrupted calls by looking at the workspace, on resume (part of "no
blind repeat", docs/architecture.md; docs/reliability.md).

A side-effecting call cut short by a crash is normally reported to the model as "may or may
not have run". For a tool whose effect can be seen afterwards (`check_effect`: write_file's
file already holds that content, edit_file's old text is gone and the new one is there) the
runtime looks instead: if the effect is there, the call is recorded as completed by a new
tool_call step with the same call id (the interrupted attempt stays, failed: interrupted,
nothing lost) and the model gets that result. If it is not there, nothing changes: the call is
reported as interrupted, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.history import tool_args
from xclaw.store.model import MAIN_AGENT, NewStep, Step, StepStatus, StepType
from xclaw.tools.base import Tool, ToolContext, ToolResult


async def settle_by_workspace(
    db: StoreCaller,
    session_id: str,
    steps: Iterable[Step],
    unsafe_refs: Iterable[str],
    tools: Mapping[str, Tool],
    ctx: ToolContext,
    redact: Callable[[str], str],
) -> list[Step]:
    """Record a completed result for each interrupted call in `unsafe_refs` (display ids)
    whose effect the workspace shows; returns the new steps. `redact`: the tool's result
    text is redacted as every tool output is (the rest comes from the record)."""
    wanted = set(unsafe_refs)
    settled: list[Step] = []
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
        result: ToolResult | None = await asyncio.to_thread(tool.check_effect, args, ctx)
        if result is None or result.is_error:
            continue
        new = NewStep(
            step_type=StepType.TOOL_CALL,
            name=step.name,
            input_data=step.input_data,
            parent_step_id=step.parent_step_id,
            agent=MAIN_AGENT,
            call_id=step.call_id,
        )
        settled.append(
            await db(
                db.store.add_step,
                session_id,
                new,
                status=StepStatus.COMPLETED,
                output_data=redact(result.content),
            )
        )
    return settled
