"""The default tool set: built-in tools by the name the model uses."""

from __future__ import annotations

from pathlib import Path

from xclaw.config.settings import Settings
from xclaw.tools.base import Tool, spec_of
from xclaw.tools.registry import default_tools
from xclaw.tools.shell import ShellTool

NAMES = ["shell", "read_file", "view_file", "write_file", "edit_file", "list_dir", "spawn_agent"]


def test_default_tools_has_every_tool_once_and_follows_settings(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        database=":memory:",
        workspace_root=tmp_path,
        sandbox={"shell_timeout_s": 7.0, "output_cap": 1234},
        secret_env=("MY_CRED",),
    )
    tools = default_tools(settings.tool_setup())
    assert list(tools) == NAMES
    for name, tool in tools.items():
        assert isinstance(tool, Tool) and tool.name == name
    shell = tools["shell"]
    assert isinstance(shell, ShellTool)
    assert (shell.default_timeout_s, shell.output_cap, shell.secret_env) == (
        7.0,
        1234,
        ("MY_CRED",),
    )
    read_only = {n for n, t in tools.items() if t.read_only}
    assert read_only == {"read_file", "view_file", "list_dir"}
    assert {n for n, t in tools.items() if getattr(t, "parallel_safe", False)} == {"spawn_agent"}


def test_specs_describe_each_tool_for_the_model() -> None:
    specs = [spec_of(t) for t in default_tools().values()]
    assert [s.name for s in specs] == NAMES
    for spec in specs:
        assert spec.description
        assert spec.input_schema["type"] == "object"
        for key in spec.input_schema.get("required", []):
            assert key in spec.input_schema["properties"]
