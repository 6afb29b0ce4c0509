"""[gateway] `POST /hooks/NAME`: a webhook's signed request sends its message (docs/schedules.md).

Not behind the API's token: the signature is the proof (xclaw/schedules/signing.py). An
unknown name and a bad signature answer the same 401 after the same work (a dummy secret),
so names are not found by trying. A good request is recorded as a fire under the delivery id
(durable before the answer), then delivered as a schedule's fire is: a retried delivery,
however often and to whichever worker, runs once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from xclaw.gateway.context import Gateway
from xclaw.schedules.firing import CLAIM_MS, pending_fire
from xclaw.schedules.signing import (
    DELIVERY_HEADER,
    MAX_DELIVERY_ID,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
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
    store = gw.store.schedules
    hook = await asyncio.to_thread(store.get_hook, name)
    why = verify(
        hook.secret if hook is not None else _DUMMY_SECRET,
        request.headers.get(TIMESTAMP_HEADER),
        request.headers.get(SIGNATURE_HEADER),
        body,
        now_s=time.time(),
        window_s=gw.settings.schedules.hook_window_s,
    )
    if hook is None or why is not None:
        peer = request.client.host if request.client else "-"
        log.warning("event=hook_refused hook=%r from=%s why=%s", name[:64], peer, why or "unknown")
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
