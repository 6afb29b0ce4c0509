"""[gateway] The SDK side of `/mcp` (xclaw/gateway/mcp_endpoint.py): xclaw's MCP server
(xclaw/mcp_server/tools.py) in the official `mcp` SDK's streamable-HTTP session manager,
each message handled as the person the guard signed its HTTP request in
(xclaw/gateway/mcp_sessions.py). Imported only when `/mcp` is first asked for: the SDK is
the largest import of the gateway, and most gateways never serve an MCP host.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from starlette.types import ASGIApp, Receive, Scope, Send

from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import SignedIn
from xclaw.gateway.mcp_endpoint import IDLE_S, MAX_BODY_BYTES, MAX_MCP_SESSIONS, PATH
from xclaw.gateway.mcp_sessions import ASKING, GatewaySessions
from xclaw.mcp_server.tools import build_server


def _signed(scope: Scope) -> SignedIn | None:
    state = scope.get("state") or {}
    signed = state.get("signed")
    return signed if isinstance(signed, SignedIn) else None


class _AsSdkUser:
    """Between the guard and the SDK: the person signed in, as the SDK's user (the owner of
    the MCP sessions they open: another credential is answered as for an unknown session)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        signed = _signed(scope)
        if signed is not None:
            who = signed.identity
            # One credential: the person, and (for a user's token) which token of theirs.
            client = f"{who.user or 'server-token'}:{signed.proof or ''}"
            scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=client, scopes=[]))
        await self.app(scope, receive, send)


async def signed_in(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Each MCP message is handled as the person the guard signed its HTTP request in."""
    request = ctx.request
    signed = _signed(request.scope) if request is not None and hasattr(request, "scope") else None
    if signed is None:
        raise MCPError(code=INVALID_REQUEST, message="unauthorized: no one is signed in")
    token = ASKING.set(signed)
    try:
        return await call_next(ctx)
    finally:
        ASKING.reset(token)


class McpSdk:
    """The SDK's session manager for the gateway, and the ASGI app behind the guard."""

    def __init__(self, gw: Gateway) -> None:
        server = build_server(GatewaySessions(gw))
        server.middleware.append(signed_in)
        # Built by the SDK's own app builder for its settings; the app itself is not used:
        # the gateway routes and guards /mcp. (The SDK's DNS-rebinding check compares Host
        # with localhost only; the gateway's Origin check and token stand in for it.)
        server.streamable_http_app(
            streamable_http_path=PATH,
            max_request_body_size=MAX_BODY_BYTES,
            session_idle_timeout=IDLE_S,
            max_sessions=MAX_MCP_SESSIONS,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager: StreamableHTTPSessionManager = server.session_manager
        self.app: ASGIApp = _AsSdkUser(StreamableHTTPASGIApp(self.manager))

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.manager.run()
