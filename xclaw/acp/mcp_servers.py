"""[acp] The MCP servers an editor passes with `session/new` (`mcpServers`), as xclaw.yaml's
`mcp_servers:` entries: started by xclaw under its own MCP rules (docs/tools.md) — untrusted
(their tools' annotations never loosen approval) unless xclaw.yaml configures a server of the
same name, whose entry then wins as it is."""

from __future__ import annotations

from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio

from xclaw.tools.mcp.config import NAME


def client_servers(
    servers: list[Any], *, remote: bool
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """({name: entry}, notes for the user about the servers that were left out)."""
    out: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for server in servers:
        name = str(getattr(server, "name", "") or "")
        if remote:
            notes.append(f"MCP server {name!r}: not started (a gateway runs its own servers)")
            continue
        if not NAME.match(name) or "__" in name:
            notes.append(f"MCP server {name!r}: not started (a name of letters, digits, - and _)")
            continue
        entry: dict[str, Any]
        if isinstance(server, McpServerStdio):
            entry = {
                "command": server.command,
                "args": list(server.args),
                "env": {e.name: e.value for e in server.env},
            }
        elif isinstance(server, HttpMcpServer):
            entry = {"url": server.url, "headers": {h.name: h.value for h in server.headers}}
        else:
            notes.append(f"MCP server {name!r}: not started (only stdio and HTTP servers)")
            continue
        if "${" in repr(entry):
            notes.append(
                f"MCP server {name!r}: not started (its settings hold '${{', which "
                "xclaw.yaml reads as a variable)"
            )
            continue
        out[name] = entry
    return out, notes
