"""The set of tools an agent may call, looked up by the name the model uses."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from xclaw.config import Settings
from xclaw.messages import ToolSpec
from xclaw.tools.base import Tool, spec_of
from xclaw.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool
from xclaw.tools.shell import ShellTool
from xclaw.tools.spawn import SpawnAgentTool
from xclaw.workspace.sandbox import isolation_from_settings


class ToolRegistry:
    """Tools by name, in registration order (the order the model is shown them)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """What the model is told about each tool."""
        return [spec_of(t) for t in self._tools.values()]

    def without(self, *names: str) -> ToolRegistry:
        """A copy lacking some tools (e.g. a sub-agent without spawn_agent)."""
        return ToolRegistry(t for n, t in self._tools.items() if n not in names)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def default_tools(settings: Settings | None = None) -> ToolRegistry:
    """Every built-in tool, configured from the settings (or the defaults)."""
    timeout = settings.shell_timeout_s if settings else 120.0
    cap = settings.tool_output_cap if settings else 30_000
    secret_env = settings.secret_env if settings else ()
    return ToolRegistry(
        [
            ShellTool(
                default_timeout_s=timeout,
                max_timeout_s=max(600.0, timeout),
                output_cap=cap,
                secret_env=secret_env,
                secret_values=settings.secret_values() if settings else (),
                isolation=isolation_from_settings(settings) if settings else None,
            ),
            ReadFileTool("read_file", output_cap=cap),
            ReadFileTool("view_file", output_cap=cap, images=True),
            WriteFileTool(),
            EditFileTool(),
            ListDirTool(),
            SpawnAgentTool(),
        ]
    )
