"""A declared agent's decisions read back from the record (docs/agents.md): the history rebuilt
from the steps gives the turn's recorded instructions and the hook decisions taken before a
crash, the loop acts on them instead of asking the function or the hook again, and a hook
after a tool changes what the rebuilt history tells the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import xclaw
from tests.agent.test_loop import FunctionModel, Observer, Policy
from tests.recorder.test_history import Rows
from xclaw.agent.hooks import ResumeState
from xclaw.agent.loop import Agent, AgentConfig
from xclaw.agent.steering import Steering
from xclaw.agents.hooks import Hooks
from xclaw.llm.base import LLMResponse
from xclaw.llm.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from xclaw.recorder.history import build_history
from xclaw.store.steps.model import StepType
from xclaw.tools.base import Tool, ToolContext, ToolResult


def test_the_rebuilt_history_holds_the_turns_instructions_and_decisions() -> None:
    rows = Rows()
    rows.user("first")
    rows.add(StepType.SYSTEM_ALERT, name="instructions", input_data={"text": "old turn"})
    rows.llm("done")
    rows.user("second")
    rows.add(StepType.SYSTEM_ALERT, name="instructions", input_data={"text": "this turn"})
    rows.add(
        StepType.SYSTEM_ALERT,
        name="hook",
        input_data={"hook": "before_model", "key": "0", "decision": "allow"},
    )
    rows.llm("", (("c1", "mail", {"to": "a"}), ("c2", "read", {})))
    rows.add(
        StepType.SYSTEM_ALERT,
        name="hook",
        input_data={"hook": "before_tool", "key": "c1", "decision": "deny", "reason": "no"},
    )
    rows.tool("c2", "read", out="secret stuff")
    rows.add(
        StepType.SYSTEM_ALERT,
        name="hook",
        input_data={"hook": "after_tool", "key": "c2", "decision": "rewrite", "value": "clean"},
    )
    hist = build_history(rows.rows, read_only=lambda name: False)
    assert hist.instructions == "this turn"
    assert set(hist.decided) == {"before_model:0", "before_tool:c1"}
    state = hist.resume_state(with_note=True)
    assert state.instructions == "this turn" and state.decided["before_tool:c1"]["reason"] == "no"
    # The result the model was told is the hook's, not the tool's (the record keeps both).
    result = next(m for m in hist.messages if isinstance(m, ToolResultMessage))
    assert result.content == "clean"


class Mail(Tool):
    name = "mail"
    description = "send mail"
    input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    read_only = False

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.sent.append(args)
        return ToolResult("sent")


async def test_a_recorded_decision_is_acted_on_and_the_hook_not_asked_again(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    def hook(event: xclaw.BeforeTool) -> xclaw.HookDecision:
        asked.append(event.call_id)
        return xclaw.allow()  # would let it run: the recorded decision says otherwise

    def instructions(ctx: ToolContext) -> str:
        asked.append("instructions")
        return "made again"

    mail = Mail()
    model = FunctionModel(lambda req: LLMResponse(text="understood"))
    events: list[str] = []
    agent = Agent(
        model=model,
        tools={"mail": mail},
        policy=Policy(),
        approver=None,  # type: ignore[arg-type]
        observer=Observer(events),
        context=ToolContext(workspace=tmp_path, session_id="t"),
        config=AgentConfig(),
        steering=Steering(name="mailer", instructions=instructions, hooks=Hooks(before_tool=hook)),
    )
    messages = [
        UserMessage("mail a"),
        AssistantMessage("", (ToolCall("c1", "mail", {"to": "a"}),)),
    ]
    resume = ResumeState(
        instructions="as recorded",
        decided={"before_tool:c1": {"hook": "before_tool", "decision": "deny", "reason": "no"}},
    )
    assert await agent.run(messages, resume=resume) == "understood"
    assert asked == [] and mail.sent == []  # neither the hook nor the function was asked
    assert model.requests[0].system == "as recorded"
    refused = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert refused.content == "Not run: denied by a hook: no" and refused.is_error
