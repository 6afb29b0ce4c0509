"""[tools/mcp] Every configured MCP server of this process, and the tools they offer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from xclaw.tools.mcp.client import McpConnection, McpServerError
from xclaw.tools.mcp.config import McpServerConfig
from xclaw.tools.mcp.names import tool_name
from xclaw.tools.mcp.tool import McpTool
from xclaw.tools.traits import ToolPolicy


class McpHub:
    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        policies: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        self.connections = {name: McpConnection(name, s) for name, s in servers.items()}
        self.policies = dict(policies or {})
        # server name -> why it could not be started, at the last attempt
        self.errors: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self.connections)

    async def start(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """Start the servers that do not run (all, or `names`), concurrently; returns the
        errors of those that failed, each naming its server. The others keep working."""
        chosen = [self.connections[n] for n in (names or self.connections)]

        async def one(conn: McpConnection) -> tuple[str, str | None]:
            try:
                await conn.ensure_started()
                return conn.name, None
            except McpServerError as e:
                return conn.name, str(e)

        for name, error in await asyncio.gather(*(one(c) for c in chosen)):
            if error is None:
                self.errors.pop(name, None)
            else:
                self.errors[name] = error
        return {n: e for n, e in self.errors.items() if n in {c.name for c in chosen}}

    def tools(self) -> list[McpTool]:
        """The tools of every server started at least once (as it listed them)."""
        out = []
        for conn in self.connections.values():
            for t in conn.tools:
                name = tool_name(conn.name, t.name)
                out.append(McpTool(conn, t, policy=self.policies.get(name, ToolPolicy())))
        return out

    def unmatched_policies(self) -> list[str]:
        """Policies naming a tool that a server which has started does not list."""
        import difflib

        out = []
        for conn in self.connections.values():
            if conn.starts == 0:
                continue  # not known yet
            prefix = tool_name(conn.name, "")
            names = [tool_name(conn.name, t.name) for t in conn.tools]
            own = [t.name for t in conn.tools]
            for policy, rule in self.policies.items():
                if not policy.startswith(prefix):
                    continue
                if policy not in names:
                    close = difflib.get_close_matches(policy, names, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    out.append(
                        f"tool_policies.{policy}: MCP server {conn.name!r} has no such tool"
                        f"{hint}; this policy applies to nothing"
                    )
                    continue
                # The compensation and the lookup are tools of the same server.
                for key, call in (("compensate", rule.compensate), ("settle", rule.settle)):
                    if call is not None and call.tool not in own:
                        out.append(
                            f"tool_policies.{policy}.{key}.tool: MCP server {conn.name!r} has "
                            f"no tool {call.tool!r} (its tools: {', '.join(own) or 'none'})"
                        )
        return out

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()))
