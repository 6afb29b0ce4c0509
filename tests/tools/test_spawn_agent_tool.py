"""spawn_agent hands the task to whatever the runtime provides and returns its answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from xclaw.errors import LLMError
from xclaw.tools.base import ToolContext
from xclaw.tools.spawn import SpawnAgentTool


def ctx_with(tmp_path: Path, spawn: object) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_id="s1", spawn_agent=spawn)  # type: ignore[arg-type]


async def test_returns_the_sub_agents_answer(tmp_path: Path) -> None:
    seen: list[str] = []

    async def spawn(task: str) -> str:
        seen.append(task)
        return f"done: {task}"

    result = await SpawnAgentTool().run({"task": "  count files  "}, ctx_with(tmp_path, spawn))
    assert (result.is_error, result.content) == (False, "done: count files")
    assert seen == ["count files"]


async def test_without_a_runtime_it_says_so(tmp_path: Path) -> None:
    result = await SpawnAgentTool().run({"task": "x"}, ctx_with(tmp_path, None))
    assert (result.is_error, result.content) == (True, "sub-agents are not available here")


async def test_a_failing_sub_agent_is_an_error_result(tmp_path: Path) -> None:
    async def spawn(task: str) -> str:
        raise LLMError("provider down")

    result = await SpawnAgentTool().run({"task": "x"}, ctx_with(tmp_path, spawn))
    assert (result.is_error, result.content) == (True, "the sub-agent failed: provider down")


async def test_cancellation_propagates(tmp_path: Path) -> None:
    async def spawn(task: str) -> str:
        await asyncio.sleep(100)
        return "never"

    run = asyncio.create_task(SpawnAgentTool().run({"task": "x"}, ctx_with(tmp_path, spawn)))
    await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


@pytest.mark.parametrize("args", [{}, {"task": 3}, {"task": "  "}])
async def test_bad_input(tmp_path: Path, args: dict[str, object]) -> None:
    async def spawn(task: str) -> str:
        raise AssertionError("must not be called")

    result = await SpawnAgentTool().run(args, ctx_with(tmp_path, spawn))
    assert result.is_error and "spawn_agent needs" in result.content


def test_flags() -> None:
    tool = SpawnAgentTool()
    assert (tool.read_only, tool.parallel_safe) == (False, True)
