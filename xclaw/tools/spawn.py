"""spawn_agent: hands a task to a sub-agent and returns its final answer.

The runtime supplies `ctx.spawn_agent`; the sub-agent has its own message list, and its steps
hang under this call in the trace tree. Several spawn_agent calls in a row run concurrently
(`parallel_safe`); each sub-agent's own tool calls go through approval as usual.
"""

from __future__ import annotations

from typing import Any

from xclaw.errors import ToolError, XclawError
from xclaw.tools.base import Tool, ToolContext, ToolResult
from xclaw.tools.effects import EffectClass
from xclaw.tools.schema import check_args


class SpawnAgentTool(Tool):
    name = "spawn_agent"
    description = (
        "Start a sub-agent on a self-contained task and get back its final answer. The sub-agent "
        "works in the same workspace with the same tools but does not see this conversation, "
        "so describe the task completely. Several spawn_agent calls in one turn run in parallel."
    )
    # Not read-only: the sub-agent may change things; its own steps are recorded and checked
    # one by one, like the main agent's.
    read_only = False
    # Itself only the sub-agent's work; each of the sub-agent's calls has its own tool's class.
    effect = EffectClass.WORKSPACE
    parallel_safe = True
    # Interrupted mid-run, the call is run again on resume and the sub-agent continues from
    # its own recorded steps (its completed tool calls are not repeated).
    resumable = True

    def __init__(self) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "What the sub-agent should do and report.",
                }
            },
            "required": ["task"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            task = check_args(self.name, self.input_schema, args)["task"].strip()
            if not task:
                raise ToolError("spawn_agent needs a non-empty 'task'")
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        if ctx.spawn_agent is None:
            return ToolResult("sub-agents are not available here", is_error=True)
        try:
            answer = await ctx.spawn_agent(task)
        except Exception as e:  # noqa: BLE001 - any failure becomes a result; CancelledError propagates
            said = e.message if isinstance(e, XclawError) else str(e)
            message = said or type(e).__name__
            return ToolResult(f"the sub-agent failed: {message}", is_error=True)
        return ToolResult(answer if answer.strip() else "(the sub-agent gave no answer)")
