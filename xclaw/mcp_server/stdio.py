"""[mcp_server] `xclaw mcp`'s stdio transport: the SDK's (`mcp.server.stdio`), plus JSON-RPC's
answer to a line that is no message. The SDK drops such a line without a word, so a host waiting on
it would wait for ever; here it gets the error JSON-RPC prescribes — a parse error (not JSON) or an
invalid request (JSON, but no JSON-RPC message: a wrong shape, nested too deeply), with `id` null,
as the id could not be read — and the server goes on."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError


def refusal(error: Exception) -> SessionMessage:
    """The error answering a line the transport could not read as a message."""
    not_json = isinstance(error, ValidationError) and any(
        e.get("type") == "json_invalid" for e in error.errors()
    )
    said = (
        ErrorData(code=PARSE_ERROR, message="parse error: the line is not JSON")
        if not_json
        else ErrorData(code=INVALID_REQUEST, message="invalid request: not a JSON-RPC message")
    )
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=said))


async def serve_stdio(server: MCPServer[Any]) -> None:
    """As `MCPServer.run_stdio_async`, every unreadable line answered (module docstring)."""
    lowlevel = server._lowlevel_server  # the SDK runs it so too; it offers no other handle
    async with stdio_server() as (read, write):
        relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with relay_in:
                async for item in read:
                    if isinstance(item, Exception):
                        await write.send(refusal(item))
                    else:
                        await relay_in.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            await lowlevel.run(relay_out, write, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()
