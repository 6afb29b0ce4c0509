"""The default tool set and the registry the agent looks tools up in."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.config import Settings
from xclaw.tools.base import Tool
from xclaw.tools.registry import ToolRegistry, default_tools
from xclaw.tools.shell import ShellTool

NAMES = ["shell", "read_file", "view_file", "write_file", "edit_file", "list_dir", "spawn_agent"]


def test_default_tools_has_every_tool_once_and_follows_settings(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        db=":memory:",
        workspace_root=tmp_path,
        shell_timeout_s=7.0,
        tool_output_cap=1234,
        secret_env=("MY_CRED",),
    )
    registry = default_tools(settings)
    assert registry.names() == NAMES
    assert len(registry) == len(NAMES)
    for tool in registry:
        assert isinstance(tool, Tool)
    shell = registry.get("shell")
    assert isinstance(shell, ShellTool)
    assert (shell.default_timeout_s, shell.output_cap, shell.secret_env) == (
        7.0,
        1234,
        ("MY_CRED",),
    )
    read_only = {t.name for t in registry if t.read_only}
    assert read_only == {"read_file", "view_file", "list_dir"}
    assert {t.name for t in registry if getattr(t, "parallel_safe", False)} == {"spawn_agent"}


def test_specs_describe_each_tool_for_the_model() -> None:
    specs = default_tools().specs()
    assert [s.name for s in specs] == NAMES
    for spec in specs:
        assert spec.description
        assert spec.input_schema["type"] == "object"
        for key in spec.input_schema.get("required", []):
            assert key in spec.input_schema["properties"]


def test_lookup_duplicates_and_without() -> None:
    registry = default_tools()
    assert registry.get("nope") is None
    assert "shell" in registry and "nope" not in registry
    with pytest.raises(ValueError, match="'shell' is already registered"):
        registry.register(ShellTool())
    sub = registry.without("spawn_agent")
    assert "spawn_agent" not in sub and "spawn_agent" in registry
    assert ToolRegistry().names() == []
