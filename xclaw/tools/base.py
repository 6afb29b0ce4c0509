"""The tool seam: what a tool declares and what it gets when it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from xclaw.messages import ImageBlock, ToolSpec


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    # Structured extras kept in the trace (exit code, bytes written...), not sent to the model.
    data: dict[str, Any] = field(default_factory=dict)
    # Images for the model (view_file on a picture); their bytes go to the blob store.
    images: tuple[ImageBlock, ...] = ()


# What an MCP or Python tool's text result may hold, as the shell's default output cap: tool
# output is hostile, and megabytes would be recorded and sent to the model whole.
RESULT_CAP_CHARS = 30_000


def cap_result_text(text: str, limit: int = RESULT_CAP_CHARS) -> str:
    """The first and last `limit/2` characters, with how many were cut between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


# Runs a sub-agent on a task and returns its final answer; provided by the runtime.
SpawnAgent = Callable[[str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class ToolContext:
    workspace: Path
    session_id: str
    spawn_agent: SpawnAgent | None = None
    env: dict[str, str] = field(default_factory=dict)
    # Runs without a human's approval because the policy read it as safe: a tool that can
    # confine itself (the shell: read-only workspace, no network) must, or refuse.
    confined: bool = False


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    # Safe to run again after an interruption without asking anyone (no blind repeat).
    read_only: bool
    # Optional `resumable = True`: an interrupted call is run again and *continues* from its
    # own record instead of starting over (spawn_agent: the sub-agent's branch).
    # Optional `parallel_safe = True`: consecutive calls run concurrently and, if the tool has
    # side effects, hold the session's side-effect turn only while their step starts. A tool
    # that calls `ctx.spawn_agent` must be parallel-safe: its sub-agents' tools need the turn.
    # Optional `check_effect(args, ctx) -> ToolResult | None` (blocking; run in a thread): for
    # a side-effecting tool whose effect can be seen afterwards (write_file, edit_file). On
    # resume, an interrupted call whose effect is there is settled with the returned result
    # instead of being reported to the model as "may or may not have run".

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def spec_of(tool: Tool) -> ToolSpec:
    return ToolSpec(name=tool.name, description=tool.description, input_schema=tool.input_schema)
