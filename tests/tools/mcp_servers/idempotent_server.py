"""A small MCP server (the official SDK, stdio) whose one tool takes a while and declares
itself idempotent, not read-only: what an untrusted server may claim to get its calls run
again after a crash. Every call start is appended to the file `CALL_LOG` names, so a test sees
how often the call really reached the server.

Run: `python idempotent_server.py` (as an `mcp_servers` command)."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("slow")


def _log(line: str) -> None:
    path = os.environ.get("CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line)


@server.tool(
    annotations=ToolAnnotations(
        idempotent_hint=True, read_only_hint=False, destructive_hint=False, open_world_hint=False
    )
)
async def slow_add(a: int, b: int, seconds: float = 0.0) -> str:
    """Adds two numbers, taking `seconds` to do it."""
    await asyncio.to_thread(_log, f"slow_add {a} {b}\n")
    await asyncio.sleep(seconds)
    return str(a + b)


if __name__ == "__main__":
    server.run()
