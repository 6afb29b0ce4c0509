"""The HTTP JSON API under `/api/`: the same sessions and steps as the WebSocket, for scripts,
dashboards and the web page's trace view. Described by `/api/openapi.json` (openapi.py).

Errors are `{"code": CODE, "error": TEXT}` with the WebSocket's error codes, mapped onto HTTP
statuses: unknown_session 404, bad_step/bad_request 400, busy 409, unauthorized 401,
forbidden_origin and forbidden 403, too_many_attempts 429.

Who asks, and what they may do to a session, is decided before any handler runs: ApiGuard
signs the request in (xclaw/gateway/identity.py), and every route naming a session declares
what it needs of the person (`Need`, docs/teams.md), checked by `_endpoint` — a route under
`/sessions/{sid}` without one is refused when the routes are built, so none can be added
unguarded. Another's session answers 404, as an id nobody has.

Every answer is redacted as it leaves (`_json`, the export's lines): the record holds no
credential it knew of when it was written, and this also keeps out one learned since (an MCP
server's env value) or one in a database written by an older version (docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from xclaw import __version__
from xclaw.answered_by import CLIENT_RE
from xclaw.errors import BadRequest, BadStep, XclawError
from xclaw.frames import STATES
from xclaw.gateway.auth import origin_allowed, token_from_request
from xclaw.gateway.commands import session_title
from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import SignedIn
from xclaw.gateway.openapi import openapi_spec
from xclaw.protocol import session_json, step_json, tree_json, valid_unicode
from xclaw.teams import Actor, Identity, Need
from xclaw.views import session_cost

STATUS_OF_CODE = {
    "unknown_session": 404,
    "bad_step": 400,
    "bad_request": 400,
    "bad_command": 400,
    "busy": 409,
    "config_mismatch": 409,
    "unauthorized": 401,
    "forbidden_origin": 403,
    "forbidden": 403,
    "too_many_attempts": 429,
    "illegal_transition": 409,
}
MAX_BODY_BYTES = 64_000


def error_response(code: str, text: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == "unauthorized" else None
    return JSONResponse(
        {"code": code, "error": text}, status_code=STATUS_OF_CODE.get(code, 500), headers=headers
    )


class ApiGuard:
    """Token and Origin checks in front of every `/api/` route (docs/protocol.md, Access)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        gw: Gateway = request.app.state.gateway
        origin = request.headers.get("origin")
        if not origin_allowed(
            origin,
            request.headers.get("host"),
            gw.settings.allowed_origins,
            secure=request.url.scheme == "https",
        ):
            await error_response("forbidden_origin", f"Origin {origin!r} may not use this API")(
                scope, receive, send
            )
            return
        auth = gw.auth
        peer = request.client.host if request.client else None
        address = auth.client_address(peer, request.headers)
        if auth.throttle.blocked(address):
            await error_response(
                "too_many_attempts", "too many failed sign-ins from this address; wait a minute"
            )(scope, receive, send)
            return
        given = token_from_request(request.headers, request.query_params)
        signed = await auth.identify(given, peer, request.headers)
        if signed is None:
            auth.throttle.failed(address)
            await error_response(
                "unauthorized",
                "missing or wrong access token (Authorization: Bearer TOKEN or ?token=)",
            )(scope, receive, send)
            return
        scope.setdefault("state", {})["signed"] = signed
        await self.app(scope, receive, send)


Handler = Callable[[Request, Gateway], Awaitable[Response]]


def identity(request: Request) -> Identity:
    """Who signed the request in (ApiGuard)."""
    signed: SignedIn = request.state.signed
    return signed.identity


def actor(request: Request) -> Actor:
    """Who does it, as the record says: a person through the HTTP API."""
    return Actor(identity(request), "http", "api")


def _endpoint(
    handler: Handler, need: Need | None = None
) -> Callable[[Request], Awaitable[Response]]:
    """Give the handler the gateway, check what the person may do to the session the path
    names (`need`), and turn XclawErrors into JSON error responses."""

    async def endpoint(request: Request) -> Response:
        gw: Gateway = request.app.state.gateway
        try:
            sid = request.path_params.get("sid")
            if sid is not None:
                assert need is not None  # api_routes refuses such a route
                await gw.access.require(identity(request), sid, need)
            return await handler(request, gw)
        except XclawError as e:
            return error_response(e.code, gw.runtime.redact.text(e.message))

    return endpoint


def _json(gw: Gateway, data: Any, status_code: int = 200) -> JSONResponse:
    """An answer, redacted (see the module docstring)."""
    return JSONResponse(gw.runtime.redact(data), status_code=status_code)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    if not raw:
        return {}
    try:
        data = valid_unicode(json.loads(raw))
    except ValueError:
        raise BadRequest("request body is not valid JSON") from None
    except RecursionError:
        raise BadRequest("request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def _str_field(data: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise BadRequest(f"field {name!r} is required")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"field {name!r} must be a string")
    return value


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


async def health(request: Request, gw: Gateway) -> Response:
    rt = gw.runtime
    return _json(
        gw,
        {
            "status": "ok",
            "version": __version__,
            "database": gw.store.url,
            "model": rt.model_name(),
            "sockets": gw.hub.sockets(),
            # Which worker this is, among several on one database (docs/postgres.md).
            "worker": rt.worker_id,
            "backend": "postgresql" if gw.store.url.startswith("postgres") else "sqlite",
            # Only those the person may see: ids reveal nothing (docs/teams.md).
            "sessionsDriven": await gw.access.visible(identity(request), rt.driven_sessions()),
            # Write transactions this process has committed: with the steps it recorded,
            # how well writes share commits (bench/gateway_bench.py prints steps per commit).
            "commits": gw.store.commits,
            # SQLite's one writer: time spent in transactions (null on PostgreSQL's pool).
            "writerBusyMs": _ms(gw.store.writer_busy_s),
            # Who this request is signed in as (docs/teams.md): a user's name, or null for
            # the server's token (the admin); and their role.
            "user": identity(request).user,
            "role": identity(request).role.value,
        },
    )


async def list_sessions(request: Request, gw: Gateway) -> Response:
    """`?limit=N`; `?q=WORD` (title or id contains it, as `xclaw sessions WORD`), `?state=S`
    (docs/protocol.md, Session state) and `?prefix=P` (the id starts with it) narrow it."""
    limit = _int_param(request, "limit", 100, lo=1, hi=10_000)
    word = (request.query_params.get("q") or "").lower()
    state = request.query_params.get("state")
    prefix = request.query_params.get("prefix")
    if state is not None and state not in STATES:
        raise BadRequest(f"query parameter 'state' must be one of {', '.join(STATES)}")
    narrowed = bool(word or state or prefix)
    # Only what the person may see (docs/teams.md): another's session is never found.
    sessions = await gw.access.sessions(identity(request), limit=None if narrowed else limit)
    redact = gw.runtime.redact
    busy = gw.runtime.is_busy
    found = []
    for s in sessions:
        if prefix and not s.session_id.startswith(prefix):
            continue
        shown = session_json(s, busy=busy(s.session_id))
        if word:
            # Redacted before the search: a word must not find what the answer would not show.
            title = str(redact(shown)["title"]).lower()
            if word not in title and word not in s.session_id.lower():
                continue
        if state is not None and shown["state"] != state:
            continue
        found.append(shown)
        if len(found) >= limit:
            break
    return _json(gw, {"sessions": found})


async def create_session(request: Request, gw: Gateway) -> Response:
    """A session written now, titled as `/new TITLE` titles it (redacted, at most 200
    characters), so a client can name it before its first message; it belongs to whoever
    asked (docs/teams.md)."""
    title = _str_field(await _body(request), "title", required=False) or ""
    title = gw.runtime.title_of(session_title(title))
    fresh, _ = await gw.runtime.peek(None)
    created = await asyncio.to_thread(
        gw.store.create_session, session_id=fresh.session_id, title=title
    )
    user = identity(request).user
    if user is not None and gw.teams is not None:
        await asyncio.to_thread(gw.teams.claim_session, created.session_id, user)
    return _json(gw, session_json(created, busy=False), status_code=201)


async def list_tools(request: Request, gw: Gateway) -> Response:
    """The tools and their policies, as `xclaw tools --json` lists them (the MCP servers
    started first, as /tools starts them)."""
    from xclaw.tools.approval import ApprovalPolicy
    from xclaw.tools.listing import tool_rows

    rt = gw.runtime
    await rt.toolbox.prepare()  # MCP servers start here if no run has started them yet
    policy = ApprovalPolicy.from_settings(rt.settings)
    return _json(
        gw, {"approval": rt.settings.approval.mode, "tools": tool_rows(rt.toolbox.tools, policy)}
    )


async def get_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    s = await asyncio.to_thread(gw.store.get_session, sid)
    return _json(gw, session_json(s, busy=gw.runtime.is_busy(sid)))


async def patch_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    title = _str_field(await _body(request), "title", required=True)
    assert title is not None
    s = await gw.runtime.rename(sid, title)  # redacted, and told to attached clients
    return _json(gw, session_json(s, busy=gw.runtime.is_busy(sid)))


async def delete_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.get_session, sid)
    if gw.runtime.is_busy(sid):
        return error_response(
            "busy", "cannot delete a session while a run is in flight; cancel it first"
        )
    await gw.runtime.delete(sid)  # the workspace files go too
    return Response(status_code=204)


def _int_param(request: Request, name: str, default: int, *, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"query parameter {name!r} must be a number") from None
    if not lo <= value <= hi:
        raise BadRequest(f"query parameter {name!r} must be between {lo} and {hi}")
    return value


async def list_steps(request: Request, gw: Gateway) -> Response:
    """`?n=N` latest steps (default 10); `?n=0` every step."""
    sid = request.path_params["sid"]
    n = _int_param(request, "n", 10, lo=0, hi=1_000_000)
    await asyncio.to_thread(gw.store.get_session, sid)
    if n == 0:
        steps = await asyncio.to_thread(gw.store.steps, sid)
    else:
        steps = await asyncio.to_thread(gw.store.latest_steps, sid, n)
    return _json(gw, {"sessionId": sid, "steps": [step_json(s) for s in steps]})


async def step_tree(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.get_session, sid)
    roots = await asyncio.to_thread(gw.store.step_tree, sid)
    return _json(gw, {"sessionId": sid, "tree": [tree_json(r) for r in roots]})


async def history(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.get_session, sid)
    frame = await asyncio.to_thread(gw.runtime.history_frame, sid)
    return _json(
        gw, {"sessionId": sid, "content": frame["content"], "messages": frame.get("messages", [])}
    )


async def rollback(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    ref = _str_field(await _body(request), "stepId", required=True)
    assert ref is not None
    result = await gw.commands.rollback(sid, ref, actor(request))
    for frame in result.frames.broadcast:
        gw.hub.broadcast(sid, frame)
    return _json(
        gw,
        {
            "session": session_json(result.session),
            "stepId": result.step_id,
            "deleted": result.deleted,
        },
    )


async def approve(request: Request, gw: Gateway) -> Response:
    """The answer to an approval_request, as a WebSocket client gives it: `{"approve": BOOL}`.
    The record says a person answered through the HTTP API."""
    sid = request.path_params["sid"]
    ref = request.path_params["step"]
    body = await _body(request)
    approve_ = body.get("approve")
    if not isinstance(approve_, bool):
        raise BadRequest("field 'approve' must be true or false")
    # A client may name itself, as in a WebSocket approval frame (the `by` of the record).
    client = body.get("client", "api")
    if not isinstance(client, str) or not CLIENT_RE.match(client):
        raise BadRequest("field 'client' must be a lowercase word (letters, digits, '-', '_')")
    await asyncio.to_thread(gw.store.get_session, sid)
    by = Actor(identity(request), "http", client).by()
    try:
        gw.runtime.answer_approval(sid, ref, approve_, by)
    except BadStep:
        raise BadStep.not_waiting(ref, sid) from None
    return JSONResponse({"sessionId": sid, "stepId": ref, "approved": approve_})


async def fork(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    data = await _body(request)
    ref = _str_field(data, "stepId", required=True)
    title = _str_field(data, "title", required=False)
    assert ref is not None
    new = await gw.commands.fork(sid, ref, title, actor(request))  # the maker's
    return _json(gw, {"session": session_json(new), "fromSessionId": sid}, status_code=201)


async def export(request: Request, gw: Gateway) -> Response:
    """JSON Lines: the session, then every step in sequence order (the same lines as
    `xclaw export`)."""
    sid = request.path_params["sid"]
    session = await asyncio.to_thread(gw.store.get_session, sid)
    steps = await asyncio.to_thread(gw.store.steps, sid)
    who_did = await _who_did(gw, sid)

    redact = gw.runtime.redact

    def line(data: dict[str, Any]) -> str:
        return json.dumps(redact(data), ensure_ascii=False, default=str) + "\n"

    async def lines() -> AsyncIterator[str]:
        yield line(
            {
                "kind": "session",
                **session_json(session),
                **session_cost(steps).to_json(),
                **who_did,
            }
        )
        for st in steps:
            yield line({"kind": "step", **step_json(st)})

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="xclaw-{sid}.jsonl"'},
    )


async def _who_did(gw: Gateway, sid: str) -> dict[str, Any]:
    """The session's owner and what people did to it that no step records (docs/teams.md):
    `owner` (absent: the admin's) and `actions` (absent: none) on the export's session line."""
    teams = gw.teams
    if teams is None or not await asyncio.to_thread(teams.users):
        return {}  # alone, everything is the admin's doing: the export stays as it was
    owner = await asyncio.to_thread(teams.session_owner, sid)
    actions = await asyncio.to_thread(teams.session_actions, sid)
    out: dict[str, Any] = {}
    if owner is not None:
        out["owner"] = owner
    if actions:
        out["actions"] = [a.to_json() for a in actions]
    return out


async def openapi(request: Request, gw: Gateway) -> Response:
    return JSONResponse(openapi_spec(__version__))  # no data of anyone's


# Every route: (path, method, handler, what it needs of the person on the session it names).
ROUTES: tuple[tuple[str, str, Handler, Need | None], ...] = (
    ("/health", "GET", health, None),
    ("/openapi.json", "GET", openapi, None),
    ("/tools", "GET", list_tools, None),
    ("/sessions", "GET", list_sessions, None),  # only what the person may see
    ("/sessions", "POST", create_session, None),  # the new session is the caller's
    ("/sessions/{sid}", "GET", get_session, Need.READ),
    ("/sessions/{sid}", "PATCH", patch_session, Need.ACT),
    ("/sessions/{sid}", "DELETE", delete_session, Need.OWN),
    ("/sessions/{sid}/steps", "GET", list_steps, Need.READ),
    ("/sessions/{sid}/tree", "GET", step_tree, Need.READ),
    ("/sessions/{sid}/history", "GET", history, Need.READ),
    ("/sessions/{sid}/rollback", "POST", rollback, Need.ACT),
    ("/sessions/{sid}/fork", "POST", fork, Need.ACT),
    ("/sessions/{sid}/approvals/{step}", "POST", approve, Need.APPROVE),
    ("/sessions/{sid}/export", "GET", export, Need.READ),
)


def api_routes() -> list[Route]:
    routes = []
    for path, method, handler, need in ROUTES:
        if "{sid}" in path and need is None:
            raise ValueError(f"{method} {path} names a session but says nothing of access")
        routes.append(Route(path, _endpoint(handler, need), methods=[method]))
    return routes
