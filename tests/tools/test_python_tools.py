"""Python functions as tools (`tools: ["module:function"]`): schema from type hints or a
pydantic model, sync and async, and the same recording, approval and resume rules."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from xclaw.config.settings import load_settings
from xclaw.errors import ConfigError
from xclaw.runtime.wiring import default_toolbox
from xclaw.store.steps.model import StepStatus, StepType
from xclaw.tools.approval import ApprovalPolicy
from xclaw.tools.base import ToolContext
from xclaw.tools.python_tools import load_python_tools

MODULE = '''
import asyncio
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

import xclaw

LOG = Path(__file__).with_name("calls.log")


@xclaw.tool(read_only=True, idempotent=True)
def forecast(city: str, days: int = 1, unit: Literal["C", "F"] = "C") -> dict:
    """Weather forecast for a city."""
    return {"city": city, "days": days, "unit": unit}


@xclaw.tool
async def notify(channel: str, text: str) -> str:
    """Post a message to a channel."""
    await asyncio.sleep(0)
    with LOG.open("a") as f:
        f.write(f"{channel}:{text}\\n")
    return f"posted to {channel}"


class Ticket(BaseModel):
    title: str = Field(description="One line")
    priority: int = 3


@xclaw.tool(name="open_ticket", destructive=True)
def make_ticket(ticket: Ticket) -> Ticket:
    """Open a ticket."""
    return ticket


def broken(x: int) -> int:
    """Always fails."""
    raise RuntimeError("the backend is down")
'''


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    name = f"xclaw_test_tools_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("XCLAW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XCLAW_CONFIG", raising=False)
    return tmp_path


def module_name(d: Path) -> str:
    return next(p.stem for p in d.glob("xclaw_test_tools_*.py"))


def load(d: Path, *fns: str) -> dict[str, Any]:
    mod = module_name(d)
    return {t.name: t for t in load_python_tools([f"{mod}:{f}" for f in fns], cwd=d)}


def test_schema_comes_from_type_hints_and_pydantic_models(module_dir: Path) -> None:
    tools = load(module_dir, "forecast", "notify", "make_ticket")
    fc = tools["forecast"].input_schema
    assert fc["type"] == "object" and fc["required"] == ["city"]
    assert fc["properties"]["city"]["type"] == "string"
    assert fc["properties"]["days"] == {"default": 1, "type": "integer"}
    assert fc["properties"]["unit"]["enum"] == ["C", "F"]
    assert tools["forecast"].description == "Weather forecast for a city."
    ticket = tools["open_ticket"].input_schema
    assert (
        ticket["required"] == ["title"]
        and ticket["properties"]["title"]["description"] == "One line"
    )


async def test_sync_and_async_functions_run_and_bad_arguments_are_explained(
    module_dir: Path,
) -> None:
    tools = load(module_dir, "forecast", "notify", "make_ticket", "broken")
    ctx = ToolContext(workspace=module_dir, session_id="s")
    ok = await tools["forecast"].run({"city": "Oslo", "days": 2}, ctx)
    assert not ok.is_error and '"days": 2' in ok.content
    posted = await tools["notify"].run({"channel": "ops", "text": "hi"}, ctx)
    assert posted.content == "posted to ops"
    assert (module_dir / "calls.log").read_text() == "ops:hi\n"
    ticket = await tools["open_ticket"].run({"title": "disk full"}, ctx)
    assert '"priority":3' in ticket.content
    bad = await tools["forecast"].run({"city": "Oslo", "days": "many"}, ctx)
    assert bad.is_error and "'days'" in bad.content
    unknown = await tools["forecast"].run({"town": "Oslo"}, ctx)
    assert unknown.is_error and "'city'" in unknown.content and "'town'" in unknown.content
    failed = await tools["broken"].run({"x": 1}, ctx)
    assert failed.is_error and "RuntimeError: the backend is down" in failed.content


def test_declared_traits_give_approval_and_resume(module_dir: Path) -> None:
    tools = load(module_dir, "forecast", "notify", "make_ticket")
    for mode, expected in (
        ("ask", {"forecast": "allow", "notify": "ask", "open_ticket": "ask"}),
        ("auto-edits", {"forecast": "allow", "notify": "ask", "open_ticket": "ask"}),
        ("yolo", {"forecast": "allow", "notify": "allow", "open_ticket": "ask"}),
    ):
        policy = ApprovalPolicy(mode)
        assert {n: policy.decide(t, {}).kind for n, t in tools.items()} == expected, mode
    assert tools["forecast"].retry_on_resume and not tools["forecast"].outside_effects
    assert not tools["notify"].retry_on_resume and tools["notify"].outside_effects


def test_bad_entries_are_refused_with_the_entry_named(module_dir: Path) -> None:
    mod = module_name(module_dir)
    with pytest.raises(
        ConfigError, match=r"'no_such_module_xyz:f': cannot import 'no_such_module_xyz'"
    ):
        load_python_tools(["no_such_module_xyz:f"], cwd=module_dir)
    with pytest.raises(ConfigError, match=rf"'{mod}:nope': {mod} has no function 'nope'"):
        load_python_tools([f"{mod}:nope"], cwd=module_dir)
    with pytest.raises(ConfigError, match="entries are 'module:function'"):
        load_python_tools(["just_a_name"], cwd=module_dir)


async def test_python_tools_from_xclaw_yaml_are_recorded_like_any_tool(
    module_dir: Path, make
) -> None:
    mod = module_name(module_dir)
    (module_dir / "xclaw.yaml").write_text(
        f"tools: ['{mod}:forecast', '{mod}:notify']\n"
        "tool_policies:\n  notify: {approval: allow}\n"
    )
    settings = load_settings(cwd=module_dir)
    box = default_toolbox(settings)
    assert "forecast" in box.tools and "notify" in box.tools
    h = make(
        [
            {
                "text": "Both.",
                "tool_calls": [
                    {"name": "forecast", "input": {"city": "Oslo"}},
                    {"name": "notify", "input": {"channel": "ops", "text": "rain"}},
                ],
            },
            {"text": "Done."},
        ],
        approval="ask",
        tool_policies=settings.tool_policies,
        tools=settings.tools,
    )
    sid = await h.ask("weather, then tell ops")
    assert h.of("approval_request") == []  # forecast is read-only; notify allowed by policy
    steps = h.store.record.steps(sid)
    calls = [s for s in steps if s.step_type is StepType.TOOL_CALL]
    assert [(c.name, c.status) for c in calls] == [
        ("forecast", StepStatus.COMPLETED),
        ("notify", StepStatus.COMPLETED),
    ]
    marks = [s for s in steps if s.name == "outside_effects"]
    assert [m.input_data["tool"] for m in marks] == ["notify"]


def test_tool_policies_for_a_built_in_tool_are_refused(module_dir: Path) -> None:
    (module_dir / "xclaw.yaml").write_text("tool_policies:\n  shell: {approval: allow}\n")
    with pytest.raises(
        ConfigError,
        match=r"tool_policies\.shell: shell is built in; its approval is set under `approval:`",
    ):
        default_toolbox(load_settings(cwd=module_dir))
    (module_dir / "xclaw.yaml").write_text(
        f"tools: ['{module_name(module_dir)}:forecast', '{module_name(module_dir)}:forecast']\n"
    )
    with pytest.raises(ConfigError, match=r"a tool named 'forecast' exists already"):
        default_toolbox(load_settings(cwd=module_dir))


def test_tool_policies_naming_no_tool_are_refused_not_ignored(module_dir: Path) -> None:
    """A misspelt name under tool_policies would silently leave the tool on its default
    policy (`{approval: ask}` on a tool that then runs unasked in yolo): refused, named."""
    mod = module_name(module_dir)
    (module_dir / "xclaw.yaml").write_text(
        f"tools: ['{mod}:forecast']\ntool_policies:\n  forcast: {{approval: ask}}\n"
    )
    with pytest.raises(
        ConfigError, match=r"tool_policies\.forcast: no tool of that name.*did you mean 'forecast'"
    ):
        default_toolbox(load_settings(cwd=module_dir))
    (module_dir / "xclaw.yaml").write_text(
        "mcp_servers:\n  git: {command: mcp-server-git}\n"
        "tool_policies:\n  mcp__gti__git_commit: {approval: ask}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"tool_policies\.mcp__gti__git_commit: no MCP server 'gti'.*\(configured: git\)",
    ):
        default_toolbox(load_settings(cwd=module_dir))
    # A configured server's prefix passes here: its tool list is only known once it starts.
    (module_dir / "xclaw.yaml").write_text(
        "mcp_servers:\n  git: {command: mcp-server-git}\n"
        f"tools: ['{mod}:forecast']\n"
        "tool_policies:\n  mcp__git__git_commit: {approval: ask}\n  forecast: {resume: ask}\n"
    )
    default_toolbox(load_settings(cwd=module_dir))


async def test_a_policy_for_a_tool_its_mcp_server_does_not_have_is_reported(tmp_path: Path) -> None:
    from tests.tools.mcp_servers.servers import python_server

    (tmp_path / "xclaw.yaml").write_text(
        f"mcp_servers:\n  time: {{command: {python_server('mcp-server-time')}}}\n"
        "tool_policies:\n  mcp__time__get_curent_time: {approval: allow}\n"
        "  mcp__time__convert_time: {approval: allow}\n"
    )
    box = default_toolbox(load_settings(cwd=tmp_path))
    try:
        assert await box.prepare() == {}
        warnings = box.policy_warnings()
    finally:
        await box.close()
    assert warnings == [
        (
            "tool_policies.mcp__time__get_curent_time: MCP server 'time' has no such tool "
            "(did you mean 'mcp__time__get_current_time'?); this policy applies to nothing"
        )
    ]


def test_a_module_that_exits_at_import_is_a_config_error_not_a_silent_exit(tmp_path: Path) -> None:
    """A script-style module (argparse at top level) calls sys.exit when imported: xclaw
    must name it, not exit with the module's code and no word."""
    (tmp_path / "scriptish_tools_q.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(
        ConfigError,
        match=r"'scriptish_tools_q:f': cannot import 'scriptish_tools_q': it called sys.exit\(3\)",
    ):
        load_python_tools(["scriptish_tools_q:f"], cwd=tmp_path)


async def test_a_huge_result_is_cut_head_and_tail_before_it_is_recorded(tmp_path: Path) -> None:
    """Tool output is hostile: 3 MB from a Python tool or an MCP server would be recorded and
    sent to the model whole (the shell keeps head and tail); they are cut the same way."""
    from mcp.types import CallToolResult, TextContent

    from xclaw.tools.base import RESULT_CAP_CHARS
    from xclaw.tools.mcp.tool import result_to_tool_result

    (tmp_path / "huge_tools_q.py").write_text(
        "def huge() -> str:\n    return 'A' * 1000 + 'x' * 3_000_000 + 'Z' * 1000\n"
    )
    [tool] = load_python_tools(["huge_tools_q:huge"], cwd=tmp_path)
    for result in (
        await tool.run({}, ToolContext(workspace=tmp_path, session_id="s")),
        result_to_tool_result(
            CallToolResult(
                content=[TextContent(type="text", text="A" * 1000 + "x" * 3_000_000 + "Z" * 1000)]
            )
        ),
    ):
        assert len(result.content) < RESULT_CAP_CHARS + 200
        assert result.content.startswith("A" * 1000) and result.content.endswith("Z" * 1000)
        assert "characters cut" in result.content
