"""Sample tools, a delta collector and a tool-heavy history shared by the llm tests."""

from __future__ import annotations

from xclaw.llm.events import ModelEvent, TextDelta
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

SHELL = ToolSpec(
    name="shell",
    description="Run a shell command in the workspace.",
    input_schema={
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
)
READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


class Deltas(list[str]):
    """A model call's event sink keeping the streamed text pieces (every event in
    `events`)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[ModelEvent] = []

    async def __call__(self, event: ModelEvent) -> None:
        self.events.append(event)
        if isinstance(event, TextDelta):
            self.append(event.text)


def tool_history() -> tuple[Message, ...]:
    """A history as the runtime rebuilds it: parallel calls, an error result, an interrupted
    call answered synthetically, a resume notice, an id only OpenAI would produce."""
    return (
        UserMessage("List the files, then read the README."),
        AssistantMessage(
            text="Let me look.",
            tool_calls=(
                ToolCall("call_0_0", "shell", {"command": "ls"}),
                ToolCall("call_0_1", "read_file", {"path": "README.md"}),
            ),
        ),
        ToolResultMessage("call_0_0", "shell", "README.md\nsrc\n"),
        ToolResultMessage("call_0_1", "read_file", "no such file", is_error=True),
        AssistantMessage(
            text="", tool_calls=(ToolCall("functions.shell:7", "shell", {"command": "sleep 10"}),)
        ),
        ToolResultMessage(
            "functions.shell:7", "shell", "interrupted: may or may not have run", is_error=True
        ),
        UserMessage("[resume] The run was interrupted. Continue from the history."),
        AssistantMessage(text="Done: there is no README."),
        UserMessage("Thanks. Now count the files."),
        AssistantMessage(
            tool_calls=(
                ToolCall(
                    "call_2_0",
                    "shell",
                    {"_raw_arguments": "{bad", "_error": "arguments were not valid JSON"},
                ),
            )
        ),
        ToolResultMessage("call_2_0", "shell", ""),
    )
