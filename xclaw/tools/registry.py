"""The built-in tools, by the name the model uses.

A tool set is one thing everywhere: a `dict[str, Tool]` in the order the model is shown the
tools (the agent loop, the approval policy, the runtime's Toolbox and `xclaw tools` all take
that mapping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xclaw.sandbox.isolation import isolation_from_settings
from xclaw.sandbox.settings import SANDBOX_DEFAULTS
from xclaw.tools.base import Tool
from xclaw.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool
from xclaw.tools.shell import ShellTool
from xclaw.tools.spawn import SpawnAgentTool

if TYPE_CHECKING:
    from xclaw.config import Settings


def default_tools(settings: Settings | None = None) -> dict[str, Tool]:
    """Every built-in tool, configured from the settings (or the defaults)."""
    sandbox = settings.sandbox if settings else SANDBOX_DEFAULTS
    timeout, cap = sandbox.shell_timeout_s, sandbox.output_cap
    secret_env = settings.secret_env if settings else ()
    tools: list[Tool] = [
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
    if settings is not None and settings.a2a.agents:
        tools.append(_a2a_call(settings))
    return {t.name: t for t in tools}


def _a2a_call(settings: Settings) -> Tool:
    """a2a_call, for the remote agents xclaw.yaml names (docs/a2a.md): needs a2a-sdk."""
    from xclaw.errors import ConfigError
    from xclaw.tools.a2a_call import A2aCallTool

    try:
        import a2a.client  # noqa: F401
    except ImportError:
        raise ConfigError(
            "xclaw.yaml: a2a.agents names remote agents, and calling them needs the a2a "
            "extra: pip install 'xclaw[a2a]'"
        ) from None
    return A2aCallTool(settings.a2a.agents)
