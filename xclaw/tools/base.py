"""[tools] The tool seam: what a tool declares and what it gets when it runs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from xclaw.llm.messages import ImageBlock, ToolSpec
from xclaw.sandbox.settings import SANDBOX_DEFAULTS

if TYPE_CHECKING:
    from xclaw.tools.effects import Compensation, EffectClass, Evidence
    from xclaw.tools.traits import ToolTraits


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
RESULT_CAP_CHARS = SANDBOX_DEFAULTS.output_cap


def cap_result_text(text: str, limit: int = RESULT_CAP_CHARS) -> str:
    """The first and last `limit/2` characters, with how many were cut between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


# Runs a sub-agent on a task and returns its final answer; provided by the runtime. `agent`:
# the declared sub-agent to hand it to (None: one like the agent itself).
SpawnAgent = Callable[..., Awaitable[str]]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool call runs in (`xclaw.ToolContext`, docs/agents.md): a Python tool that
    takes a parameter of this type gets it (it is no argument the model gives); an agent's
    instructions function and its hooks get it too (`step_id` and `call_id` None there)."""

    workspace: Path
    session_id: str
    spawn_agent: SpawnAgent | None = None
    env: dict[str, str] = field(default_factory=dict)
    # Runs without a human's approval because the policy read it as safe: a tool that can
    # confine itself (the shell: read-only workspace, no network) must, or refuse.
    confined: bool = False
    # The tool_call step of this call (s0007) and the model's id of the call.
    step_id: str | None = None
    call_id: str | None = None
    # The user of a shared server who sent the turn's message (None: the server's token, or
    # a program of its own through the Python API).
    user: str | None = None
    # The name of the declared agent that makes the call ("default": xclaw's own).
    agent: str = "default"
    # The program's own object, given to `xclaw.open(deps=...)`: a database handle, a
    # client, settings. Never recorded.
    deps: Any = None


@runtime_checkable
class Tool(Protocol):
    """What a tool declares. The traits below have defaults: a tool class that subclasses
    Tool inherits them and sets only what differs (every tool of xclaw's does)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    # Safe to run again after an interruption without asking anyone (no blind repeat).
    read_only: bool
    # Consecutive calls run concurrently and, if the tool has side effects, hold the
    # session's side-effect turn only while their step starts. A tool that calls
    # `ctx.spawn_agent` must be parallel-safe: its sub-agents' tools need the turn.
    parallel_safe: bool = False
    # An interrupted call is run again and *continues* from its own record instead of
    # starting over (spawn_agent: the sub-agent's branch).
    resumable: bool = False
    # Its effects reach beyond the workspace: marked in the record before it runs, since
    # rollback and fork cannot undo them.
    outside_effects: bool = False
    # Run again automatically after a crash interrupted it; None: when it is read-only.
    retry_on_resume: bool | None = None
    # An MCP or Python tool's declared traits (approval, resume, listing); None: built-in.
    traits: ToolTraits | None = None
    # Its effect class (xclaw/tools/effects.py): read_only, workspace, compensable,
    # irreversible; None: derived from `read_only` and `outside_effects` (`effect_of`).
    effect: EffectClass | None = None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...

    def check_input(self, args: dict[str, Any]) -> str | None:
        """What is wrong with a call's arguments, said for the model (None: nothing, or not
        known before it runs: the default). Asked before any person is asked to approve the
        call: a call that cannot run is refused, not put to anyone."""
        return None

    def check_effect(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Blocking (run in a thread), for a side-effecting tool whose effect can be seen
        afterwards (write_file, edit_file): on resume, an interrupted call whose effect is
        there is settled with the returned result instead of being reported to the model as
        "may or may not have run". None: not known (the default)."""
        return None

    async def find_outcome(self, args: dict[str, Any], ctx: ToolContext) -> Evidence | None:
        """A settle check: after a crash cut a call short, whether its effect happened (done,
        not done, unknown), asked before anyone is (xclaw/runtime/settle.py). None: the tool
        declares no check (the default)."""
        return None

    def compensation(self, args: dict[str, Any], output: Any) -> Compensation | None:
        """What undoes the recorded call (`args`, `output` as xclaw.tools.effects.
        recorded_output gives it), known before it runs; None: nothing (the default).
        Raises CompensationUnavailable when one is declared but cannot be built."""
        return None

    async def compensate(
        self, comp: Compensation, args: dict[str, Any], output: Any, ctx: ToolContext
    ) -> ToolResult:
        """Run `comp` (what `compensation` gave for this call); an error result: it failed."""
        return ToolResult(f"{self.name} declares no compensation", is_error=True)


# The id of the tool call being run, set by the agent loop around `Tool.run`: what an
# idempotency key is made of, the same for every attempt of one call (a re-run after a crash
# rebuilds the call with its recorded id).
CURRENT_CALL: ContextVar[str | None] = ContextVar("xclaw_current_call", default=None)


def idempotency_key(session_id: str, args: Any) -> str:
    """The key a tool declaring one sends with a call (the remote side deduplicates by it):
    the session and the call's id; outside a loop, the call's arguments stand for the id."""
    call = CURRENT_CALL.get()
    if call is None:
        text = json.dumps(args, sort_keys=True, default=str)
        call = "args-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"xclaw-{session_id}-{call}"


def retries_on_resume(tool: Tool) -> bool:
    """Run again automatically when a crash interrupted it (see Tool.retry_on_resume)."""
    return tool.read_only if tool.retry_on_resume is None else tool.retry_on_resume


def spec_of(tool: Tool) -> ToolSpec:
    return ToolSpec(name=tool.name, description=tool.description, input_schema=tool.input_schema)
