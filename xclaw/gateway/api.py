"""[gateway] The HTTP JSON API under `/api/`: the same sessions and steps as the WebSocket, for
scripts, dashboards and the web page's trace view. Described by `/api/openapi.json` (openapi.py).

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
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from xclaw import __version__
from xclaw.errors import (
    BadCommand,
    BadRequest,
    BadStep,
    Forbidden,
    IrreversibleEffects,
    StoreError,
    XclawError,
)
from xclaw.gateway import schedules_api as sa
from xclaw.gateway.auth import origin_allowed, token_from_request
from xclaw.gateway.commands import session_title
from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import Refusal, SignedIn
from xclaw.people.answered_by import CLIENT_RE
from xclaw.people.teams import Actor, Identity, Need
from xclaw.store.steps.model import Step
from xclaw.store.steps.rows import check_session_id, valid_unicode
from xclaw.store.transfer.format import export_lines
from xclaw.views.record import session_cost
from xclaw.wire.protocol import llm_usage, session_json, step_json, tree_json

STATUS_OF_CODE = {
    "unknown_session": 404,
    "bad_step": 400,
    "bad_request": 400,
    "bad_command": 400,
    "busy": 409,
    "config_mismatch": 409,
    "agent_mismatch": 409,
    "unknown_agent": 404,
    "unauthorized": 401,
    "forbidden_origin": 403,
    "forbidden": 403,
    "too_many_attempts": 429,
    "illegal_transition": 409,
    # The object store behind the files: down or slow (try again), or it lost contents the
    # record names (an answer no client can fix by retrying alone; docs/deploy.md).
    "blob_store_unavailable": 503,
    "blob_store_lost": 502,
    # A rollback past outside effects: not accepted, stopped half-way, or one pending.
    "irreversible_effects": 409,
    "compensation_failed": 409,
    "rollback_pending": 409,
    "unknown_schedule": 404,
}
MAX_BODY_BYTES = 64_000
SIGN_IN_REFUSED = {
    Refusal.UNAUTHORIZED: "missing or wrong access token (Authorization: Bearer TOKEN or ?token=)",
    Refusal.TOO_MANY_ATTEMPTS: "too many failed sign-ins from this address; wait a minute",
}


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
        peer = request.client.host if request.client else None  # the socket's (forwarded.py)
        given = token_from_request(request.headers, request.query_params)
        signed = await gw.auth.sign_in(given, peer, request.headers, via="http")
        if isinstance(signed, Refusal):
            await error_response(signed.value, SIGN_IN_REFUSED[signed])(scope, receive, send)
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
        except IrreversibleEffects as e:  # with the preview that names them
            answer = error_response(e.code, gw.runtime.redact.text(e.message))
            body = {"code": e.code, "error": e.message, "effects": e.effects}
            return JSONResponse(gw.runtime.redact(body), status_code=answer.status_code)
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


def _bool_field(data: dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"field {name!r} must be true or false")
    return value


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


async def health(request: Request, gw: Gateway) -> Response:
    rt = gw.runtime
    who = identity(request)
    # What the deployment is — its database, which worker answered (named after its host),
    # its sockets and counters — is the admin's to see; a member gets null (docs/teams.md).
    deployment: dict[str, Any] = {
        "database": gw.store.url,
        "sockets": gw.hub.sockets(),
        # Which worker this is, among several on one database (docs/postgres.md).
        "worker": rt.worker_id,
        "backend": "postgresql" if gw.store.url.startswith("postgres") else "sqlite",
        # Write transactions this process has committed: with the steps it recorded,
        # how well writes share commits (bench/gateway_bench.py prints steps per commit).
        "commits": gw.store.record.commits,
        # SQLite's one writer: time spent in transactions (null on PostgreSQL's pool).
        "writerBusyMs": _ms(gw.store.record.writer_busy_s),
    }
    if not who.admin:
        deployment = dict.fromkeys(deployment)
    return _json(
        gw,
        {
            "status": "ok",
            "version": __version__,
            "model": rt.model_name(),
            **deployment,
            # Only those the person may see: ids reveal nothing (docs/teams.md).
            "sessionsDriven": await gw.access.visible(who, rt.driven_sessions()),
            # Who this request is signed in as (docs/teams.md): a user's name, or null for
            # the server's token (the admin); and their role.
            "user": who.user,
            "role": who.role.value,
        },
    )


def _states() -> tuple[str, ...]:
    # The frames' declarations (pydantic models, xclaw/wire/frames.py) are imported by the first
    # request that needs them, not by every server's start (docs/testing.md, "Keeping a start
    # cheap"); likewise the OpenAPI document's and the request bodies' (schedules_api.py).
    from xclaw.wire.frames import STATES

    return STATES


async def list_sessions(request: Request, gw: Gateway) -> Response:
    """`?limit=N`; `?q=WORD` (title or id contains it, as `xclaw sessions WORD`), `?state=S`
    (docs/protocol.md, Session state) and `?prefix=P` (the id starts with it) narrow it."""
    limit = _int_param(request, "limit", 100, lo=1, hi=10_000)
    word = (request.query_params.get("q") or "").lower()
    state = request.query_params.get("state")
    prefix = request.query_params.get("prefix")
    if state is not None and state not in _states():
        raise BadRequest(f"query parameter 'state' must be one of {', '.join(_states())}")
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
    asked (docs/teams.md). `sessionId`: the id a client chose for a session it opened and
    said nothing to yet (as a `message` frame may bring one) — written under it (a schedule
    or webhook is to send to it); one already written that the caller may act on is
    answered as it is (200), another's as an id nobody has."""
    body = await _body(request)
    title = _str_field(body, "title", required=False) or ""
    title = gw.runtime.title_of(session_title(title))
    agent = _str_field(body, "agent", required=False)
    if agent is not None:
        gw.runtime.agent_named(agent)  # before anything is written: unknown_agent
    chosen = _str_field(body, "sessionId", required=False)
    if chosen is not None:
        try:
            check_session_id(chosen)
        except ValueError as e:
            raise BadCommand(str(e)) from None
    fresh, _ = await gw.runtime.peek(chosen)
    sid = fresh.session_id
    who = identity(request)
    if gw.teams is not None:  # written and made theirs in one transaction
        created = await asyncio.to_thread(
            gw.teams.create_session_as, sid, who.user, title=title, member=not who.admin
        )
    else:
        try:
            created = await asyncio.to_thread(
                gw.store.record.create_session, session_id=sid, title=title
            )
        except StoreError:
            created = None
    if created is None:
        if chosen is None:  # 128 random bits taken: never seen, but no other's is given
            raise StoreError(f"a session with id {sid!r} already exists")
        # Written already (its first message, another socket): theirs to act on, or refused.
        await gw.access.require(who, sid, Need.ACT)
        found = await asyncio.to_thread(gw.store.record.get_session, sid)
        return _json(gw, session_json(found, busy=gw.runtime.is_busy(sid)))
    if agent is not None:
        created = await gw.runtime.choose_agent(created.session_id, agent)
    return _json(gw, session_json(created, busy=False), status_code=201)


async def list_agents(request: Request, gw: Gateway) -> Response:
    """The agents a session may run here (docs/agents.md): xclaw's own first."""
    return _json(gw, {"agents": gw.runtime.agents.listing()})


async def list_tools(request: Request, gw: Gateway) -> Response:
    """The tools and their policies, as `xclaw tools --json` lists them (the MCP servers
    started first, as /tools starts them)."""
    from xclaw.tools.approval import ApprovalPolicy
    from xclaw.tools.listing import tool_rows

    rt = gw.runtime
    await rt.toolbox.prepare()  # MCP servers start here if no run has started them yet
    policy = ApprovalPolicy.from_settings(rt.settings.tool_setup())
    return _json(
        gw, {"approval": rt.settings.approval.mode, "tools": tool_rows(rt.toolbox.tools, policy)}
    )


async def get_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    s = await asyncio.to_thread(gw.store.record.get_session, sid)
    return _json(gw, session_json(s, busy=gw.runtime.is_busy(sid)))


async def patch_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    title = _str_field(await _body(request), "title", required=True)
    assert title is not None
    s = await gw.runtime.rename(sid, title)  # redacted, and told to attached clients
    return _json(gw, session_json(s, busy=gw.runtime.is_busy(sid)))


async def delete_session(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.record.get_session, sid)
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
    await asyncio.to_thread(gw.store.record.get_session, sid)
    if n == 0:
        steps = await asyncio.to_thread(gw.store.record.steps, sid)
    else:
        steps = await asyncio.to_thread(gw.store.record.latest_steps, sid, n)
    return _json(gw, {"sessionId": sid, "steps": [step_json(s, gw.runtime.prices) for s in steps]})


async def step_tree(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.record.get_session, sid)
    roots = await asyncio.to_thread(gw.store.record.step_tree, sid)
    return _json(gw, {"sessionId": sid, "tree": [tree_json(r, gw.runtime.prices) for r in roots]})


async def history(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.record.get_session, sid)
    frame = await asyncio.to_thread(gw.runtime.history_frame, sid)
    return _json(
        gw, {"sessionId": sid, "content": frame["content"], "messages": frame.get("messages", [])}
    )


async def rollback(request: Request, gw: Gateway) -> Response:
    """The call is the confirmation: outside effects after the step are undone by their
    compensations; effects nothing undoes need `acceptIrreversible` (the preview, GET
    …/rollback/{step}, names them), else 409 irreversible_effects with the preview."""
    sid = request.path_params["sid"]
    body = await _body(request)
    ref = _str_field(body, "stepId", required=True)
    assert ref is not None
    result = await gw.commands.rollback(
        sid,
        ref,
        actor(request),
        accept=_bool_field(body, "acceptIrreversible"),
        retry=_bool_field(body, "retry"),
    )
    for frame in result.frames.broadcast:
        gw.hub.broadcast(sid, frame)
    answer: dict[str, Any] = {
        "session": session_json(result.session),
        "stepId": result.step_id,
        "deleted": result.deleted,
    }
    if result.compensated or result.not_undone:
        answer |= {"compensated": result.compensated, "notUndone": result.not_undone}
    return _json(gw, answer)


async def rollback_preview(request: Request, gw: Gateway) -> Response:
    """What rolling back to {step} would undo outside the workspace, and what it would not:
    nothing is done."""
    sid = request.path_params["sid"]
    preview = await gw.runtime.rollback_preview(sid, request.path_params["step"])
    return _json(gw, preview.as_json())


async def abandon_rollback(request: Request, gw: Gateway) -> Response:
    """A rollback that stopped half-way stops for good (nothing more is undone)."""
    sid = request.path_params["sid"]
    result = await gw.commands.abandon(sid, actor(request))
    for frame in result.broadcast:
        gw.hub.broadcast(sid, frame)
    session = await asyncio.to_thread(gw.store.record.get_session, sid)
    return _json(gw, session_json(session))


async def processes(request: Request, gw: Gateway) -> Response:
    """What the session's commands left running in its container (docs/containers.md): a
    session without one answers an empty list and the reason, not an error."""
    listing = await gw.runtime.processes(request.path_params["sid"])
    return _json(gw, listing.to_json())


async def approve(request: Request, gw: Gateway) -> Response:
    """The answer to an approval_request, as a WebSocket client gives it: `{"approve": BOOL}`.
    The record says a person answered through the HTTP API."""
    sid = request.path_params["sid"]
    ref = request.path_params["step"]
    body = await _body(request)
    approve_ = body.get("approve")
    if not isinstance(approve_, bool):
        raise BadRequest("field 'approve' must be true or false")
    message, edited = body.get("message"), body.get("input")
    if message is not None and not isinstance(message, str):
        raise BadRequest("field 'message' must be text")
    if edited is not None:
        if not isinstance(edited, dict):
            raise BadRequest("field 'input' must be an object")
        # An edited call is the editor's own act: what a collaborator may do (docs/teams.md).
        await gw.access.require(identity(request), sid, Need.ACT)
    # A client may name itself, as in a WebSocket approval frame (the `by` of the record).
    client = body.get("client", "api")
    if not isinstance(client, str) or not CLIENT_RE.match(client):
        raise BadRequest("field 'client' must be a lowercase word (letters, digits, '-', '_')")
    await asyncio.to_thread(gw.store.record.get_session, sid)
    by = Actor(identity(request), "http", client).by()
    try:
        gw.runtime.answer_approval(sid, ref, approve_, by, message=message, edited=edited)
    except BadStep:
        raise BadStep.not_waiting(ref, sid) from None
    return JSONResponse({"sessionId": sid, "stepId": ref, "approved": approve_})


async def list_queue(request: Request, gw: Gateway) -> Response:
    """The messages waiting for the session's run, in the order they run."""
    sid = request.path_params["sid"]
    await asyncio.to_thread(gw.store.record.get_session, sid)
    entries = await gw.runtime.queued(sid)
    return _json(gw, {"sessionId": sid, "queued": [e.to_json() for e in entries]})


async def unqueue(request: Request, gw: Gateway) -> Response:
    """A waiting message cancelled; every client of the session gets the new `queue`."""
    sid, mid = request.path_params["sid"], request.path_params["mid"]
    await asyncio.to_thread(gw.store.record.get_session, sid)
    gone = await gw.runtime.unqueue(sid, mid)
    return _json(gw, {"sessionId": sid, "id": mid, "cancelled": gone is not None})


async def fork(request: Request, gw: Gateway) -> Response:
    sid = request.path_params["sid"]
    data = await _body(request)
    ref = _str_field(data, "stepId", required=True)
    title = _str_field(data, "title", required=False)
    assert ref is not None
    new = await gw.commands.fork(sid, ref, title, actor(request))  # the maker's
    return _json(gw, {"session": session_json(new), "fromSessionId": sid}, status_code=201)


async def export(request: Request, gw: Gateway) -> Response:
    """JSON Lines: the session, then every step in sequence order, then the images its steps
    name: the lines `xclaw export` writes (`export_lines`), which `xclaw import` reads."""
    sid = request.path_params["sid"]
    session = await asyncio.to_thread(gw.store.record.get_session, sid)
    who_did = await _who_did(gw, sid)
    table = gw.runtime.prices

    def totals(steps: list[Step]) -> dict[str, Any]:
        return {**session_cost(steps, table).to_json(), **who_did}

    def read() -> list[str]:
        found = export_lines(
            gw.store,
            [session],
            totals=totals,
            redact=gw.runtime.redact,
            step_extra=lambda st: llm_usage(st, table),
        )
        return [line + "\n" for line in found]

    lines = await asyncio.to_thread(read)
    return StreamingResponse(
        iter(lines),
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


def _admin(request: Request) -> Identity:
    who = identity(request)
    if not who.admin:
        raise Forbidden("only an admin sets caps and grants (docs/budgets.md)")
    return who


async def get_budget(request: Request, gw: Gateway) -> Response:
    """A target's caps, spend and what is left: an admin's to see, or a member's own (a
    session they may read, `user:<their name>`)."""
    target = request.path_params["target"]
    who = identity(request)
    if not who.admin:
        if target.startswith("user:"):
            if target != f"user:{who.user}":
                raise Forbidden("a member sees their own budget only")
        elif target == "total":
            raise Forbidden("the deployment's budget is the admin's to see")
        else:
            await gw.access.require(who, target.removeprefix("session:"), Need.READ)
    return _json(gw, await gw.runtime.budget(target))


async def put_budget(request: Request, gw: Gateway) -> Response:
    _admin(request)
    caps = (await _body(request)).get("caps")
    if not isinstance(caps, dict) or not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in caps.values()
    ):
        raise BadRequest("field 'caps' must be an object of cap key -> number or null")
    return _json(gw, await gw.runtime.set_budget(request.path_params["target"], caps))


async def grant_budget(request: Request, gw: Gateway) -> Response:
    _admin(request)
    body = await _body(request)
    tokens, usd = body.get("tokens", 0) or 0, body.get("usd", 0) or 0
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        raise BadRequest("field 'tokens' must be a whole number")
    if not isinstance(usd, int | float) or isinstance(usd, bool):
        raise BadRequest("field 'usd' must be a number")
    if not tokens and not usd:
        raise BadRequest("give 'tokens' or 'usd'")
    target = request.path_params["target"]
    answer = await gw.runtime.set_budget(target, grant_tokens=tokens, grant_usd=float(usd))
    return _json(gw, answer)


async def openapi(request: Request, gw: Gateway) -> Response:
    from xclaw.gateway.openapi import openapi_spec

    return JSONResponse(openapi_spec(__version__))  # no data of anyone's


# Every route: (path, method, handler, what it needs of the person on the session it names).
ROUTES: tuple[tuple[str, str, Handler, Need | None], ...] = (
    ("/health", "GET", health, None),
    ("/openapi.json", "GET", openapi, None),
    ("/tools", "GET", list_tools, None),
    ("/agents", "GET", list_agents, None),
    ("/sessions", "GET", list_sessions, None),  # only what the person may see
    ("/sessions", "POST", create_session, None),  # the new session is the caller's
    ("/sessions/{sid}", "GET", get_session, Need.READ),
    ("/sessions/{sid}", "PATCH", patch_session, Need.ACT),
    ("/sessions/{sid}", "DELETE", delete_session, Need.OWN),
    ("/sessions/{sid}/steps", "GET", list_steps, Need.READ),
    ("/sessions/{sid}/tree", "GET", step_tree, Need.READ),
    ("/sessions/{sid}/history", "GET", history, Need.READ),
    ("/sessions/{sid}/rollback", "POST", rollback, Need.ACT),
    ("/sessions/{sid}/rollback/abandon", "POST", abandon_rollback, Need.ACT),
    ("/sessions/{sid}/rollback/{step}", "GET", rollback_preview, Need.READ),
    ("/sessions/{sid}/fork", "POST", fork, Need.ACT),
    ("/sessions/{sid}/processes", "GET", processes, Need.READ),
    ("/sessions/{sid}/approvals/{step}", "POST", approve, Need.APPROVE),
    ("/sessions/{sid}/export", "GET", export, Need.READ),
    ("/sessions/{sid}/queue", "GET", list_queue, Need.READ),
    ("/sessions/{sid}/queue/{mid}", "DELETE", unqueue, Need.ACT),
    # Schedules and webhooks (docs/schedules.md): their own checks (schedules_api.py).
    ("/schedules", "GET", sa.list_schedules, None),
    ("/schedules", "POST", sa.add_schedule, None),
    ("/schedules/{schedule}", "GET", sa.get_schedule, None),
    ("/schedules/{schedule}", "DELETE", sa.remove_schedule, None),
    ("/schedules/{schedule}/pause", "POST", sa.pause_schedule, None),
    ("/schedules/{schedule}/resume", "POST", sa.resume_schedule, None),
    ("/schedules/{schedule}/fires", "GET", sa.schedule_fires, None),
    ("/hooks", "GET", sa.list_hooks, None),
    ("/hooks", "POST", sa.add_hook, None),
    ("/hooks/{name}", "DELETE", sa.remove_hook, None),
    ("/hooks/{name}/fires", "GET", sa.hook_fires, None),
    # Budgets (docs/budgets.md): a member sees their own; an admin sets caps and grants.
    ("/budgets/{target}", "GET", get_budget, None),
    ("/budgets/{target}", "PUT", put_budget, None),
    ("/budgets/{target}/grant", "POST", grant_budget, None),
)


def api_routes() -> list[Route]:
    routes = []
    for path, method, handler, need in ROUTES:
        if "{sid}" in path and need is None:
            raise ValueError(f"{method} {path} names a session but says nothing of access")
        routes.append(Route(path, _endpoint(handler, need), methods=[method]))
    return routes
