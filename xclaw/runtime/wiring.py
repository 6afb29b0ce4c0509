"""[runtime] What a session's agent works with: its tools, the approval policy and its workspace."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xclaw.agent.loop import Policy
from xclaw.config.settings import Settings
from xclaw.tools.base import Tool, retries_on_resume
from xclaw.tools.client import ClientTools

if TYPE_CHECKING:
    from xclaw.tools.mcp.hub import McpHub


@dataclass(frozen=True)
class Toolbox:
    # Built-in and Python tools from the start; an MCP server's tools join when it starts.
    tools: MutableMapping[str, Tool]
    policy: Policy
    workspace_root: Path
    # When xclaw.yaml configures MCP servers.
    mcp: McpHub | None = None
    # The front-end tools each session's client declared (docs/ag-ui.md): offered to that
    # session's runs only.
    client: ClientTools = field(default_factory=ClientTools)
    # Tools of declared agents, not offered to xclaw's own agent: known here for the resume
    # rules (whether an interrupted call runs again), by name (xclaw/runtime/agent_setup.py).
    kinds: dict[str, Tool] = field(default_factory=dict)

    def tools_for(self, session_id: str) -> Mapping[str, Tool]:
        """What a run of the session is offered: the server's tools, and its client's."""
        extra = self.client.tools(session_id)
        if not extra:
            return self.tools
        return {**extra, **self.tools}  # a server tool's name is never a client's

    def _tool(self, name: str, session_id: str | None) -> Tool | None:
        """The tool a recorded call names: the server's, a declared agent's, or the
        session's client's."""
        tool = self.tools.get(name) or self.kinds.get(name)
        if tool is None and session_id is not None:
            tool = self.client.tools(session_id).get(name)
        return tool

    def is_retry_safe(self, name: str, session_id: str | None = None) -> bool:
        """Run again automatically when a crash interrupted it: read-only tools, and tools
        whose declared traits say so (idempotent, or `resume: retry`)."""
        tool = self._tool(name, session_id)
        return tool is not None and retries_on_resume(tool)

    def is_resumable(self, name: str, session_id: str | None = None) -> bool:
        tool = self._tool(name, session_id)
        return tool is not None and tool.resumable

    def workspace(self, session_id: str) -> Path:
        from xclaw.sandbox.paths import workspace_dir

        return workspace_dir(self.workspace_root, session_id)

    async def prepare(self) -> dict[str, str]:
        """Start the MCP servers that do not run yet (lazily: the first run that needs tools)
        and add their tools; returns {server: error} for those that could not start."""
        if not self.mcp:
            return {}
        errors = await self.mcp.start()
        for tool in self.mcp.tools():
            if tool.name not in self.tools:
                self.tools[tool.name] = tool
        return errors

    def policy_warnings(self) -> list[str]:
        """`tool_policies` entries for a tool its (started) MCP server does not have: such a
        policy would apply to nothing, so the user is told (the list is known only now)."""
        return self.mcp.unmatched_policies() if self.mcp else []

    async def close(self) -> None:
        if self.mcp:
            await self.mcp.close()


def default_toolbox(settings: Settings) -> Toolbox:
    from xclaw.errors import ConfigError
    from xclaw.tools.approval import ApprovalPolicy
    from xclaw.tools.python_tools import load_python_tools
    from xclaw.tools.registry import default_tools

    tools = default_tools(settings.tool_setup())
    policies = settings.tool_policies
    for name in policies:
        if name in tools:
            raise ConfigError(
                f"xclaw.yaml: tool_policies.{name}: {name} is built in; its approval is set "
                "under `approval:` (docs/approval.md). tool_policies is for MCP and Python tools."
            )
    for tool in load_python_tools(list(settings.tools), policies):
        if tool.name in tools:
            raise ConfigError(
                f"xclaw.yaml: tools: {tool.ref!r}: a tool named {tool.name!r} exists already"
            )
        tools[tool.name] = tool
    _check_policy_names(policies, tools, list(settings.mcp_servers))
    hub = None
    if settings.mcp_servers:
        # Only then: the MCP SDK takes longer to import than the rest of a server's start.
        from xclaw.tools.mcp.hub import McpHub

        hub = McpHub(settings.mcp_servers, policies)
    return Toolbox(
        tools=tools,
        policy=ApprovalPolicy.from_settings(settings.tool_setup()),
        workspace_root=settings.workspace_root,
        mcp=hub,
    )


def _check_policy_names(
    policies: Any, tools: MutableMapping[str, Tool], servers: list[str]
) -> None:
    """Every `tool_policies` name must be a Python tool or a tool of a configured MCP server
    (its tool list is checked when it starts): a misspelt name is refused, never ignored."""
    import difflib

    from xclaw.errors import ConfigError
    from xclaw.tools.mcp.names import PREFIX, tool_name

    prefixes = {tool_name(server, ""): server for server in servers}
    for name, policy in policies.items():
        if name in tools:
            continue
        if name.startswith(PREFIX):
            if policy.effect == "compensable" and policy.compensate is None:
                raise ConfigError(
                    f"xclaw.yaml: tool_policies.{name}: effect compensable needs a "
                    "`compensate: {tool, args}` (the server's tool that undoes a call)"
                )
            if any(name.startswith(p) for p in prefixes):
                continue
            server = name[len(PREFIX) :].split("__", 1)[0]
            raise ConfigError(
                f"xclaw.yaml: tool_policies.{name}: no MCP server {server!r} in mcp_servers "
                f"(configured: {', '.join(servers) or 'none'})"
            )
        close = difflib.get_close_matches(name, list(tools), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"xclaw.yaml: tool_policies.{name}: no tool of that name{hint} (tool_policies "
            "names Python tools, or MCP tools as mcp__<server>__<tool>)"
        )
