"""[gateway] `/mcp`: xclaw's MCP server (xclaw/mcp_server/tools.py, the tools `xclaw mcp` serves on
stdio) on the gateway, over streamable HTTP — the official `mcp` SDK's session manager —
under the gateway's tokens and users (docs/mcp-server.md).

Every HTTP request passes the `/api/` guard first (xclaw/gateway/api.py ApiGuard: Origin,
the brake on guessing, `Authorization: Bearer TOKEN`; 401 without a valid token). Who it
signed in is handed to the SDK as the request's user, so an MCP session (its
`mcp-session-id`) answers only the credential that opened it, and to the tools per message
(`signed_in`), so each answers as the HTTP API would (xclaw/gateway/mcp_sessions.py).

The SDK (xclaw/gateway/mcp_sdk.py) is loaded, and its session manager started, by the first
request that passes the guard: importing it is most of a gateway's start-up (about half of
`xclaw serve`'s CPU before it listens), and most gateways never serve an MCP host. Its
manager runs in a task of its own until the gateway stops, as it ran for the whole lifespan
before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from xclaw.gateway.api import ApiGuard
from xclaw.gateway.context import Gateway
from xclaw.wire.protocol import MAX_FRAME_BYTES

if TYPE_CHECKING:
    from xclaw.gateway.mcp_sdk import McpSdk

PATH = "/mcp"
# A request body: a message as large as the WebSocket takes, in JSON-RPC, with room to spare.
MAX_BODY_BYTES = 4 * MAX_FRAME_BYTES
# An MCP session nobody used for this long is closed (the host opens another one).
IDLE_S = 30 * 60.0
MAX_MCP_SESSIONS = 1000


class McpEndpoint:
    """The `/mcp` route and what must run while the gateway serves (the session manager,
    started on the first request signed in)."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.app: ASGIApp = ApiGuard(self._serve)
        self._sdk: McpSdk | None = None
        self._starting: asyncio.Lock | None = None
        self._serving = False
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        sdk = self._sdk or await self._start()
        await sdk.app(scope, receive, send)

    async def _start(self) -> McpSdk:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._sdk is not None:
                return self._sdk
            if not self._serving:
                raise RuntimeError("/mcp is served only while the gateway runs (its lifespan)")
            # The import takes a CPU for a moment: off the event loop, other clients go on.
            sdk = (await asyncio.to_thread(_sdk_class))(self.gw)
            up = asyncio.Event()
            self._stop = stop = asyncio.Event()

            async def run() -> None:
                async with sdk.running():
                    up.set()
                    await stop.wait()

            self._task = task = asyncio.create_task(run(), name="xclaw-mcp-sessions")
            waiting = asyncio.create_task(up.wait())
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if task.done():
                task.result()  # the manager failed to start: its error, to this request
            self._sdk = sdk
            return sdk

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._serving = True
        try:
            yield
        finally:
            self._serving = False
            if self._task is not None and self._stop is not None:
                self._stop.set()
                await self._task


def _sdk_class() -> type[McpSdk]:
    from xclaw.gateway.mcp_sdk import McpSdk

    return McpSdk
