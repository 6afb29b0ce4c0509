"""[gateway] The gateway as one Starlette app: `/ws` (the protocol), `/api/` (JSON), `/mcp` (MCP),
`/` and `/static/` (the web page). The app owns no resources; whoever builds it (server.py, tests)
owns the store and the runtime and gets `runtime.shutdown()` called when the app's lifespan ends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from xclaw.a2a.route import a2a_routes
from xclaw.agui.route import agui_route
from xclaw.config.settings import Settings
from xclaw.gateway.api import ApiGuard, api_routes
from xclaw.gateway.auth import load_or_create_token
from xclaw.gateway.context import Gateway
from xclaw.gateway.forwarded import Addresses, ForwardedScheme
from xclaw.gateway.hooks import hook_routes
from xclaw.gateway.mcp_endpoint import PATH as MCP_PATH
from xclaw.gateway.mcp_endpoint import McpEndpoint
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.gateway.ws import websocket_endpoint
from xclaw.store.base import Store

STATIC_DIR = Path(__file__).resolve().parent.parent / "web" / "static"


class RevalidatedStatic(StaticFiles):
    """Static files the browser must revalidate: after an upgrade, a cached app.js must not
    meet a new index.html (which is served no-store)."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


# Another web site must not frame the page: inside a frame the page has the owner's token (in
# its localStorage) and the owner's clicks ("Approve"). The address may hold ?token= on the
# first load: never sent as a Referer. Only the page's own files run as script, and it
# loads nothing from elsewhere: markup that got past the sanitiser (an answer is hostile
# text) could not run script or send the conversation anywhere. (docs/security.md)
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",  # the page's modules only: no inline script, handler or eval
        "style-src 'self'",
        "img-src 'self' data:",  # the icons are data: URLs in the stylesheet
        "connect-src 'self'",  # /api/ and the /ws socket of this origin
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",  # the token form is handled by script, never submitted
        "frame-ancestors 'none'",
    )
)
PAGE_HEADERS = {
    "Cache-Control": "no-store",  # a new page version must not hide behind a cached one
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)


def create_app(
    settings: Settings,
    store: Store,
    runtime: GatewayRuntime,
    *,
    token: str | None = None,
    fire_schedules: bool = False,
) -> Starlette:
    """The ASGI app. `token` defaults to XCLAW_TOKEN / $XCLAW_HOME/token (created on first use).
    `fire_schedules`: check the schedules and deliver pending fires while it runs (what
    `xclaw serve` does, as `schedules.enabled` says); webhooks are taken either way."""
    gateway = Gateway(
        settings=settings,
        store=store,
        runtime=runtime,
        token=token or load_or_create_token(settings.home, settings.token),
        # Users and who sees which session (docs/teams.md): both backends keep them.
        teams=store.teams,
    )

    mcp = McpEndpoint(gateway)  # /mcp: the MCP server (docs/mcp-server.md)
    # Schedules and webhooks (docs/schedules.md): fired and delivered by every worker.
    scheduler = gateway.scheduler

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if scheduler is not None and fire_schedules and settings.schedules.enabled:
            scheduler.start()
        try:
            async with gateway.watching(), mcp.running():
                yield
        finally:
            if scheduler is not None:
                await scheduler.stop()
        # Runs stop; steps in flight end as interrupted, never half-written (nothing lost).
        await runtime.shutdown()

    api_middleware = [Middleware(ApiGuard)]
    if settings.allowed_origins:
        api_middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.allowed_origins),
                allow_methods=["GET", "POST", "PATCH", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Accept"],
            ),
        )
    routes: list[Any] = [
        Route("/", index, methods=["GET"]),
        WebSocketRoute("/ws", websocket_endpoint),
        Mount("/api", routes=api_routes(), middleware=api_middleware),
        agui_route(api_middleware),  # AG-UI (docs/ag-ui.md), guarded as the API is
        *a2a_routes(api_middleware),  # A2A (docs/a2a.md): the card, JSON-RPC guarded
        Route(MCP_PATH, mcp.app, methods=["GET", "POST", "DELETE"]),
        *hook_routes(),  # POST /hooks/NAME: signed, not behind the API's token
    ]
    routes.append(Mount("/static", app=RevalidatedStatic(directory=STATIC_DIR), name="static"))
    # Whether the page was served over https, as a listed proxy says (never who the client is).
    teams = settings.teams
    proxies = Addresses((*teams.trusted_proxies, *teams.client_address_from))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(ForwardedScheme, proxies=proxies)],
    )
    app.state.gateway = gateway
    return app
