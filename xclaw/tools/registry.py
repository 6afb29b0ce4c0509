"""[tools] The built-in tools, by the name the model uses.

A tool set is one thing everywhere: a `dict[str, Tool]` in the order the model is shown the
tools (the agent loop, the approval policy, the runtime's Toolbox and `xclaw tools` all take
that mapping).
"""

from __future__ import annotations

from xclaw.sandbox.isolation import isolation_from_settings
from xclaw.tools.base import Tool
from xclaw.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool
from xclaw.tools.setup import ToolSetup
from xclaw.tools.shell import ShellTool
from xclaw.tools.spawn import SpawnAgentTool


def default_tools(setup: ToolSetup | None = None) -> dict[str, Tool]:
    """Every built-in tool, configured from the tools' setup (`Settings.tool_setup()`; None:
    the defaults, and the shell's isolation decided when it first runs)."""
    sandbox = (setup or ToolSetup()).sandbox.sandbox
    timeout, cap = sandbox.shell_timeout_s, sandbox.output_cap
    tools: list[Tool] = [
        ShellTool(
            default_timeout_s=timeout,
            max_timeout_s=max(600.0, timeout),
            output_cap=cap,
            secret_env=setup.secret_env if setup else (),
            secret_values=setup.secret_values if setup else (),
            isolation=isolation_from_settings(setup.sandbox) if setup else None,
        ),
        ReadFileTool("read_file", output_cap=cap),
        ReadFileTool("view_file", output_cap=cap, images=True),
        WriteFileTool(),
        EditFileTool(),
        ListDirTool(),
        SpawnAgentTool(),
    ]
    if setup is not None and setup.a2a_agents:
        tools.append(_a2a_call(setup))
    return {t.name: t for t in tools}


def _a2a_call(setup: ToolSetup) -> Tool:
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
    return A2aCallTool(setup.a2a_agents)
