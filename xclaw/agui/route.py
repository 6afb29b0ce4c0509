"""[agui] The `/agui` route, guarded as the HTTP API is. The AG-UI package is imported by the first
request, not by every gateway start."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def _agui(request: Request) -> Response:
    from xclaw.agui.endpoint import agui_endpoint

    return await agui_endpoint(request)


def agui_route(middleware: Sequence[Middleware]) -> Route:
    """`POST /agui` behind `middleware` (the API's: CORS when configured, then ApiGuard).
    OPTIONS reaches the CORS middleware for a browser's preflight."""
    return Route("/agui", _agui, methods=["POST", "OPTIONS"], middleware=middleware)
