"""[gateway] `POST /hooks/NAME`: a webhook's signed request sends its message (docs/schedules.md).

Not behind the API's token: the signature is the proof (xclaw/schedules/signing.py). An
unknown name and a bad signature answer the same 401 after the same work (a dummy secret),
so names are not found by trying. A good request is recorded as a fire under the delivery id
(durable before the answer), then delivered as a schedule's fire is: a retried delivery,
however often and to whichever worker, runs once.

Refusals are braked per client as failed sign-ins are (xclaw/gateway/identity.py `Throttle`,
the same client address, a count of their own): past MAX_FAILURES refused requests in
WINDOW_S, a client's request that cannot be good — no signature of the form, a timestamp
outside the window — is answered 429 `too_many_attempts` unchecked. One that may be good is
still checked: a sender's good deliveries are never lost to an attacker sharing its address
(no number of tries finds a 192-bit secret), and what a braked attacker still costs is one
lookup and one HMAC per request, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import MAX_FAILURES, WINDOW_S
from xclaw.schedules.firing import CLAIM_MS, pending_fire
from xclaw.schedules.signing import (
    DELIVERY_HEADER,
    MAX_DELIVERY_ID,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    may_be_good,
    render,
    verify,
)
from xclaw.schedules.spec import hook_fire_id
from xclaw.store.schedules.sql import NewFire
from xclaw.store.steps.writes import RecordDelivery

log = logging.getLogger("xclaw.gateway")
MAX_HOOK_BODY = 256_000
_DUMMY_SECRET = "whsec_" + "0" * 48


def _refuse(code: str, text: str, status: int) -> JSONResponse:
    return JSONResponse({"code": code, "error": text}, status_code=status)


async def receive_hook(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    name = request.path_params["name"]
    body = await request.body()
    if len(body) > MAX_HOOK_BODY:
        return _refuse("bad_request", f"body too large (limit {MAX_HOOK_BODY} bytes)", 413)
    if gw.scheduler is None:
        return _refuse("unauthorized", "no such webhook, or a bad signature", 401)
    client = gw.auth.client_address(
        request.client.host if request.client else None, request.headers
    )
    stamp = request.headers.get(TIMESTAMP_HEADER)
    signature = request.headers.get(SIGNATURE_HEADER)
    window = gw.settings.schedules.hook_window_s
    now_s = time.time()
    braked = gw.hook_throttle.blocked(client)
    if braked and not may_be_good(stamp, signature, now_s=now_s, window_s=window):
        refused = _refuse("too_many_attempts", "too many refused webhook requests from here", 429)
        refused.headers["Retry-After"] = str(int(WINDOW_S))
        return refused  # logged once, when the client was braked
    store = gw.store.schedules
    hook = await asyncio.to_thread(store.get_hook, name)
    why = verify(
        hook.secret if hook is not None else _DUMMY_SECRET,
        stamp,
        signature,
        body,
        now_s=now_s,
        window_s=window,
    )
    if hook is None or why is not None:
        if not braked:
            log.warning(
                "event=hook_refused hook=%r client=%s why=%s", name[:64], client, why or "unknown"
            )
            if gw.hook_throttle.failed(client):
                log.warning(
                    "event=hook_throttled client=%s failures=%d window_s=%g",
                    client,
                    MAX_FAILURES,
                    WINDOW_S,
                )
        return _refuse("unauthorized", "no such webhook, or a bad signature", 401)
    delivery = request.headers.get(DELIVERY_HEADER, "").strip()
    if not delivery or len(delivery) > MAX_DELIVERY_ID:
        return _refuse(
            "bad_request", f"{DELIVERY_HEADER} is required (1-{MAX_DELIVERY_ID} characters)", 400
        )
    fid = hook_fire_id(name, delivery)
    fire = NewFire(
        fire_id=fid,
        source="hook",
        source_id=name,
        session_id=hook.session_id,
        message=gw.runtime.redact.text(render(hook.template, body)),
        created_by=hook.created_by,
    )
    now = int(time.time() * 1000)
    scheduler = gw.scheduler
    new = await asyncio.to_thread(
        store.write,
        RecordDelivery(fire=fire, worker_id=scheduler.worker_id, claimed_until=now + CLAIM_MS),
    )
    if not new:  # a retry of a delivery recorded before: nothing runs again
        earlier = await asyncio.to_thread(store.get_fire, fid)
        state = earlier.to_json() if earlier is not None else {"id": fid}
        return JSONResponse({"duplicate": True, "fire": state}, status_code=200)
    await scheduler.deliver(pending_fire(fire, scheduler.worker_id, now + CLAIM_MS, now))
    done = await asyncio.to_thread(store.get_fire, fid)
    return JSONResponse(
        {"duplicate": False, "fire": done.to_json() if done else {"id": fid}}, status_code=202
    )


def hook_routes() -> list[Route]:
    return [Route("/hooks/{name}", receive_hook, methods=["POST"])]
