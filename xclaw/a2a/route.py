"""[a2a] The A2A routes: the agent card (public, as A2A clients fetch it before they have
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
# Above this many brackets a body is parsed once here first: nested deeper than the parser
# goes, it is refused with words instead of failing inside the SDK.
NESTING_LOOKED_AT = 500
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
    if body.count(b"[") + body.count(b"{") > NESTING_LOOKED_AT:
        try:  # a body the SDK's parser would hit the recursion limit on
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
    from collections.abc import AsyncGenerator

    from a2a.server.context import ServerCallContext
    from a2a.server.jsonrpc_models import InternalError
    from a2a.server.request_handlers.response_helpers import build_error_response
    from a2a.server.routes.common import DefaultServerCallContextBuilder
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
    from a2a.utils import json_utils
    from a2a.utils.errors import A2AError

    from xclaw.a2a.handler import XclawRequestHandler
    from xclaw.gateway.event_stream import EventStream

    class SignedInContext(DefaultServerCallContextBuilder):
        """Who ApiGuard signed the request in as, for the handler's access checks."""

        def build(self, request: Request) -> ServerCallContext:
            context = super().build(request)
            context.state["signed"] = request.state.signed
            return context

    class Dispatcher(JsonRpcDispatcher):
        """The SDK's JSON-RPC dispatcher, its streams written as the SDK writes them
        (`data: JSON`, `event: error` for an error) through the gateway's lean SSE response
        instead of sse-starlette's (xclaw/gateway/event_stream.py)."""

        def _create_response(self, context: ServerCallContext, handler_result: Any) -> Response:
            if not isinstance(handler_result, AsyncGenerator):
                response: Response = super()._create_response(context, handler_result)
                return response

            async def chunks() -> AsyncGenerator[bytes]:
                try:
                    async for item in handler_result:
                        kind = "event: error\r\n" if "error" in item else ""
                        yield f"{kind}data: {json_utils.dumps(item)}\r\n\r\n".encode()
                except Exception as e:  # noqa: BLE001 - the SDK's own answer to it
                    error = e if isinstance(e, A2AError) else InternalError(message=str(e))
                    answer = build_error_response(context.state.get("request_id"), error)
                    yield f"event: error\r\ndata: {json_utils.dumps(answer)}\r\n\r\n".encode()

            return EventStream(
                chunks(),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            )

    return Dispatcher(XclawRequestHandler(gw), context_builder=SignedInContext())


def a2a_routes(middleware: Sequence[Middleware]) -> list[Route]:
    """The card (GET, public) and the JSON-RPC endpoint (POST behind `middleware`: the
    API's, CORS when configured, then ApiGuard)."""
    return [
        Route(CARD_PATH, _card, methods=["GET"]),
        Route(RPC_PATH, _rpc, methods=["POST", "OPTIONS"], middleware=middleware),
    ]
