"""The A2A routes: the agent card (public, as A2A clients fetch it before they have
credentials) and the JSON-RPC endpoint (behind ApiGuard, as the HTTP API). `a2a-sdk` is an
optional extra, imported by the first request: without it both routes say how to install
it, and the gateway serves everything else."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
# A JSON-RPC request larger than this is refused before it is parsed (the SDK would read it
# whole): messages carry text here, and parts of files at most.
MAX_BODY_BYTES = 8 * 1024 * 1024
NOT_INSTALLED = (
    "A2A is not installed on this gateway: pip install 'xclaw[a2a]' (the a2a-sdk package), "
    "then restart it"
)

_served: dict[int, Any] = {}  # gateway id -> its JSON-RPC dispatcher


def _installed() -> bool:
    try:
        import a2a.server.routes  # noqa: F401
    except ImportError:
        return False
    return True


async def _card(request: Request) -> Response:
    if not _installed():
        return JSONResponse({"code": "not_installed", "error": NOT_INSTALLED}, status_code=501)
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    from xclaw.a2a.card import agent_card

    gw = request.app.state.gateway
    card = agent_card(gw.settings.a2a, gw.runtime.toolbox.tools.values(), str(request.base_url))
    return JSONResponse(gw.runtime.redact(agent_card_to_dict(card)))


def _rpc_error(code: int, message: str, request_id: Any = None) -> JSONResponse:
    return JSONResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    )


async def _rpc(request: Request) -> Response:
    if not _installed():
        return JSONResponse({"code": "not_installed", "error": NOT_INSTALLED}, status_code=501)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return _rpc_error(-32600, f"Payload too large (limit {MAX_BODY_BYTES} bytes)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return _rpc_error(-32600, f"Payload too large (limit {MAX_BODY_BYTES} bytes)")
    try:
        json.loads(body)
    except RecursionError:
        return _rpc_error(-32700, "request body is nested too deeply")
    except ValueError:
        pass  # the SDK answers a parse error itself
    gw = request.app.state.gateway
    dispatcher = _served.get(id(gw))
    if dispatcher is None:
        dispatcher = _served[id(gw)] = _dispatcher(gw)

    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": bytes(body), "more_body": False}

    again = Request(request.scope, replay)
    response: Response = await dispatcher.handle_requests(again)
    return response


def _dispatcher(gw: Any) -> Any:
    from a2a.server.context import ServerCallContext
    from a2a.server.routes.common import DefaultServerCallContextBuilder
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

    from xclaw.a2a.handler import XclawRequestHandler

    class SignedInContext(DefaultServerCallContextBuilder):
        """Who ApiGuard signed the request in as, for the handler's access checks."""

        def build(self, request: Request) -> ServerCallContext:
            context = super().build(request)
            context.state["signed"] = request.state.signed
            return context

    return JsonRpcDispatcher(XclawRequestHandler(gw), context_builder=SignedInContext())


def a2a_routes(middleware: Sequence[Middleware]) -> list[Route]:
    """The card (GET, public) and the JSON-RPC endpoint (POST behind `middleware`: the
    API's, CORS when configured, then ApiGuard)."""
    return [
        Route(CARD_PATH, _card, methods=["GET"]),
        Route(RPC_PATH, _rpc, methods=["POST", "OPTIONS"], middleware=middleware),
    ]
