"""Small step builders shared by the store tests."""

from __future__ import annotations

from xclaw.store.steps.model import NewStep, StepType


def user(text: str = "hello", parent: str | None = None) -> NewStep:
    return NewStep(StepType.USER_INPUT, "user", text, parent)


def llm(parent: str | None = None, agent: str = "main") -> NewStep:
    return NewStep(StepType.LLM_CALL, "test-model", {"model": "test-model"}, parent, agent)


def tool(command: str = "ls", parent: str | None = None, call_id: str | None = None) -> NewStep:
    return NewStep(StepType.TOOL_CALL, "shell", {"command": command}, parent, call_id=call_id)


def approval(parent: str | None = None) -> NewStep:
    return NewStep(StepType.SYSTEM_ALERT, "approval", {"tool": "shell"}, parent)
