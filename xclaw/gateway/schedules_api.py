"""[gateway] `/api/schedules` and `/api/hooks`: schedules and webhooks over HTTP
(docs/schedules.md), as `xclaw schedule` and `xclaw hook` make them, with the signed-in person as
their creator.

A member sees and changes the schedules and webhooks they made (another's answers 404 as an
unknown one, `unknown_schedule`); an admin every one. Making one needs, on the session, what
each of its fires will need: collaborator rights to send to it, reading a template to fork it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from xclaw.errors import BadRequest, UnknownSchedule
from xclaw.gateway.context import Gateway
from xclaw.people.teams import Identity, Need
from xclaw.schedules.making import may_change, new_hook, new_schedule
from xclaw.schedules.spec import Kind, no_step_to_fork
from xclaw.store.base import ScheduleStore
from xclaw.store.schedules.sql import Hook, Schedule
from xclaw.store.steps.writes import AddHook, AddSchedule, ChangeSchedule, RemoveHook


def _store(gw: Gateway) -> ScheduleStore:
    return gw.store.schedules


def _who(request: Request) -> Identity:
    from xclaw.gateway.api import identity

    return identity(request)


def _answer(gw: Gateway, data: Any, status_code: int = 200) -> Response:
    from xclaw.gateway.api import _json

    return _json(gw, data, status_code)


async def _read(request: Request, model: type[Any]) -> Any:
    from xclaw.gateway.api import _body

    try:
        return model.model_validate(await _body(request))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadRequest(f"field {where!r}: {first['msg']}") from None


def _mine(who: Identity, created_by: str | None) -> bool:
    return may_change(who, created_by)


async def list_schedules(request: Request, gw: Gateway) -> Response:
    who = _who(request)
    rows = await asyncio.to_thread(
        _store(gw).schedules, created_by=None if who.admin else (who.user or "")
    )
    return _answer(gw, {"schedules": [s.to_json() for s in rows]})


async def add_schedule(request: Request, gw: Gateway) -> Response:
    from xclaw.wire.http_bodies import NewScheduleBody

    body: NewScheduleBody = await _read(request, NewScheduleBody)
    kinds = ((Kind.CRON, body.cron), (Kind.EVERY, body.every), (Kind.AT, body.at))
    given = [(k, v) for k, v in kinds if v]
    if len(given) != 1:
        raise BadRequest("give one of cron, every, at")
    if (body.session_id is None) == (body.fork_of is None):
        raise BadRequest("give one of sessionId, forkOf")
    who = _who(request)
    target = await gw.access.resolve(who, body.session_id or body.fork_of or "")
    sid = target.session_id
    await gw.access.require(who, sid, Need.ACT if body.session_id else Need.READ)
    if body.fork_of is not None and not await asyncio.to_thread(
        gw.store.record.latest_steps, sid, 1
    ):
        raise BadRequest(no_step_to_fork(sid))
    kind, text = given[0]
    s = new_schedule(
        kind=kind,
        when=text,
        tz=body.tz,
        session_id=sid if body.session_id else None,
        fork_of=sid if body.fork_of else None,
        message=body.message,
        catch_up=body.catch_up,
        created_by=who.user,
        now_ms=int(time.time() * 1000),
    )
    made: Schedule = await asyncio.to_thread(_store(gw).write, AddSchedule(schedule=s))
    if gw.scheduler is not None:
        gw.scheduler.wake()  # a moment already past fires at once
    return _answer(gw, made.to_json(), 201)


async def _schedule_of(request: Request, gw: Gateway) -> Schedule:
    sid = request.path_params["schedule"]
    try:
        found: Schedule = await asyncio.to_thread(_store(gw).get_schedule, sid)
    except UnknownSchedule:
        found = None  # type: ignore[assignment]
    if found is None or not _mine(_who(request), found.created_by):
        raise UnknownSchedule(f"no schedule {sid!r}")
    return found


async def get_schedule(request: Request, gw: Gateway) -> Response:
    return _answer(gw, (await _schedule_of(request, gw)).to_json())


async def _change(request: Request, gw: Gateway, **change: bool) -> Response:
    s = await _schedule_of(request, gw)
    write = ChangeSchedule(schedule_id=s.schedule_id, **change)
    await asyncio.to_thread(_store(gw).write, write)
    if change.get("remove"):
        return Response(status_code=204)
    return _answer(gw, (await asyncio.to_thread(_store(gw).get_schedule, s.schedule_id)).to_json())


async def pause_schedule(request: Request, gw: Gateway) -> Response:
    return await _change(request, gw, paused=True)


async def resume_schedule(request: Request, gw: Gateway) -> Response:
    return await _change(request, gw, paused=False)


async def remove_schedule(request: Request, gw: Gateway) -> Response:
    return await _change(request, gw, remove=True)


async def schedule_fires(request: Request, gw: Gateway) -> Response:
    s = await _schedule_of(request, gw)
    fires = await asyncio.to_thread(_store(gw).fires_of, s.schedule_id)
    return _answer(gw, {"fires": [f.to_json() for f in fires if f.source == "schedule"]})


async def list_hooks(request: Request, gw: Gateway) -> Response:
    who = _who(request)
    hooks = await asyncio.to_thread(_store(gw).hooks)
    return _answer(gw, {"hooks": [h.to_json() for h in hooks if _mine(who, h.created_by)]})


async def add_hook(request: Request, gw: Gateway) -> Response:
    from xclaw.wire.http_bodies import NewHookBody

    body: NewHookBody = await _read(request, NewHookBody)
    who = _who(request)
    target = await gw.access.resolve(who, body.session_id)
    await gw.access.require(who, target.session_id, Need.ACT)
    hook = new_hook(
        name=body.name,
        session_id=target.session_id,
        template=body.template,
        created_by=who.user,
        now_ms=int(time.time() * 1000),
    )
    made: Hook = await asyncio.to_thread(_store(gw).write, AddHook(hook=hook))
    # Not redacted: the secret is what this answer is for (shown this once).
    from starlette.responses import JSONResponse

    return JSONResponse({**made.to_json(), "secret": made.secret}, status_code=201)


async def _hook_of(request: Request, gw: Gateway) -> Hook:
    name = request.path_params["name"]
    found: Hook | None = await asyncio.to_thread(_store(gw).get_hook, name)
    if found is None or not _mine(_who(request), found.created_by):
        raise UnknownSchedule(f"no webhook {name!r}")
    return found


async def remove_hook(request: Request, gw: Gateway) -> Response:
    hook = await _hook_of(request, gw)
    await asyncio.to_thread(_store(gw).write, RemoveHook(name=hook.name))
    return Response(status_code=204)


async def hook_fires(request: Request, gw: Gateway) -> Response:
    hook = await _hook_of(request, gw)
    fires = await asyncio.to_thread(_store(gw).fires_of, hook.name)
    return _answer(gw, {"fires": [f.to_json() for f in fires if f.source == "hook"]})
