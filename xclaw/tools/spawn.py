"""[tools] spawn_agent: hands a task to a sub-agent and returns its final answer.

The runtime supplies `ctx.spawn_agent`; the sub-agent has its own message list, and its steps
hang under this call in the trace tree. Several spawn_agent calls in a row run concurrently
(`parallel_safe`); each sub-agent's own tool calls go through approval as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xclaw.errors import BudgetReached, ToolError, XclawError
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

    def __init__(self, agents: Mapping[str, str] | None = None, *, anonymous: bool = True) -> None:
        """`agents`: the declared sub-agents the task may go to, by name, with what each is
        for (docs/agents.md); `anonymous`: a sub-agent like the agent itself too."""
        self.agents = dict(agents or {})
        self.anonymous = anonymous
        properties: dict[str, Any] = {
            "task": {
                "type": "string",
                "description": "What the sub-agent should do and report.",
            }
        }
        required = ["task"]
        if self.agents:
            listed = "; ".join(f"{n}: {d}" if d else n for n, d in self.agents.items())
            properties["agent"] = {
                "type": "string",
                "enum": list(self.agents),
                "description": f"The sub-agent to hand the task to ({listed}).",
            }
            if not anonymous:
                required.append("agent")
            self.description = (
                "Hand a self-contained task to a sub-agent and get back its final answer. "
                f"Sub-agents: {listed}. "
                + ("Without 'agent', one like you. " if anonymous else "")
                + "It does not see this conversation, so describe the task completely. Several "
                "spawn_agent calls in one turn run in parallel."
            )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": required,
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            task = check_args(self.name, self.input_schema, args)["task"].strip()
            if not task:
                raise ToolError("spawn_agent needs a non-empty 'task'")
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        agent = args.get("agent")
        if agent is not None and (not isinstance(agent, str) or agent not in self.agents):
            known = ", ".join(self.agents) or "none"
            return ToolResult(f"spawn_agent: no sub-agent {agent!r} (declared: {known})", True)
        if agent is None and not self.anonymous:
            return ToolResult(f"spawn_agent needs 'agent', one of {', '.join(self.agents)}", True)
        if ctx.spawn_agent is None:
            return ToolResult("sub-agents are not available here", is_error=True)
        try:
            answer = await (ctx.spawn_agent(task, agent) if agent else ctx.spawn_agent(task))
        except BudgetReached:
            raise  # the run waits for a budget; the sub-agent continues after it
        except Exception as e:  # noqa: BLE001 - any failure becomes a result; CancelledError propagates
            said = e.message if isinstance(e, XclawError) else str(e)
            message = said or type(e).__name__
            return ToolResult(f"the sub-agent failed: {message}", is_error=True)
        return ToolResult(answer if answer.strip() else "(the sub-agent gave no answer)")
