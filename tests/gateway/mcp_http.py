"""An MCP host for the tests of `/mcp`: the official `mcp` Python SDK's client over streamable
HTTP against a real `xclaw serve`, and raw JSON-RPC over HTTP for what no client would send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from tests.gateway.harness import Server


@asynccontextmanager
async def mcp_host(
    server: Server, token: str | None = None, *, elicit: Any = None
) -> AsyncIterator[ClientSession]:
    """A session of the official client, signed in with `token` (default: the server's)."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token or server.token}"})
    kwargs = {"elicitation_callback": elicit} if elicit is not None else {}
    async with (
        http,
        streamable_http_client(f"{server.http}/mcp", http_client=http) as (r, w),
        ClientSession(r, w, **kwargs) as s,
    ):
        await s.initialize()
        yield s


async def call(s: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    """A tool's structured answer (and the same object as its text)."""
    result = await s.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def refused(s: ClientSession, name: str, **args: Any) -> str:
    """A tool's error, `code: words` (after the SDK's `Error executing tool NAME: `)."""
    result = await s.call_tool(name, args)
    assert result.is_error, result.structured_content
    text: str = result.content[0].text
    prefix = f"Error executing tool {name}: "
    assert text.startswith(prefix), text
    return text[len(prefix) :]


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class RawMcp:
    """JSON-RPC over HTTP by hand, as a hostile or broken host may send it."""

    def __init__(self, server: Server, token: str | None = None) -> None:
        self.http = httpx.AsyncClient(
            base_url=server.http,
            headers={**HEADERS, "Authorization": f"Bearer {token or server.token}"},
            timeout=30,
        )
        self.session: str | None = None

    async def __aenter__(self) -> RawMcp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def post(self, body: bytes | str | dict[str, Any]) -> httpx.Response:
        raw = json.dumps(body) if isinstance(body, dict) else body
        headers = {}
        if self.session is not None:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = LATEST_HANDSHAKE_VERSION
        return await self.http.post("/mcp", content=raw, headers=headers)

    async def stateless(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request of the stateless protocol revision (no MCP session): its answer."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers = {"mcp-protocol-version": LATEST_MODERN_VERSION, "mcp-method": method}
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        r = await self.http.post("/mcp", json=body, headers=headers)
        return messages(r)[0]

    async def open(self) -> dict[str, Any]:
        """initialize + initialized: the session id kept for the next posts."""
        r = await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LATEST_HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        assert r.status_code == 200, r.text
        self.session = r.headers["mcp-session-id"]
        sent = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert sent.status_code in (200, 202), sent.text
        return messages(r)[0]


def messages(r: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, plain JSON or an SSE stream."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return [
            json.loads(line[5:])
            for line in r.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    return [r.json()]
