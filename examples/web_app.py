"""An ASGI web app that serves xclaw sessions to its own users (Starlette; any ASGI
framework works the same way): one in-process agent for the whole app, one session per
conversation, a run's events streamed to the browser as JSON lines.

    NOTES_DB=webapp.db uvicorn examples.web_app:app --port 8000

    POST /conversations                     {"title": ...}  -> {"id": ...}
    POST /conversations/{id}/messages       {"text": ...}   -> the run's events, one JSON per line
    POST /conversations/{id}/approvals/{step}  {"approve": true|false}
    GET  /conversations/{id}                the conversation so far, and its steps
    POST /conversations/{id}/rollback       {"step": "s0003"}

A user who goes away in the middle of a run stops it (the task streaming it is cancelled,
which cancels the run); the conversation waits for their next message. Everything is in the
database: restart the app and every conversation is there, an interrupted one resumed by
`POST /conversations/{id}/resume`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import xclaw

HERE = Path(__file__).resolve().parent
DATABASE = os.environ.get("NOTES_DB", "webapp.db")
MODEL = os.environ.get("NOTES_MODEL", f"script:{HERE / 'scripts' / 'notes.json'}")
# The errors a user can cause, as HTTP statuses (the codes are the gateway's).
STATUS = {"unknown_session": 404, "ambiguous_session": 404, "busy": 409, "bad_step": 400}


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with xclaw.open(db=DATABASE, model=MODEL, approval="ask") as agent:
        app.state.agent = agent
        yield


def agent_of(request: Request) -> xclaw.Agent:
    agent: xclaw.Agent = request.app.state.agent
    return agent


async def body(request: Request) -> dict[str, Any]:
    data = await request.json()
    return data if isinstance(data, dict) else {}


async def new_conversation(request: Request) -> Response:
    title = str((await body(request)).get("title") or "a conversation")
    session = await agent_of(request).new_session(title=title)
    return JSONResponse({"id": session.id}, status_code=201)


def stream(events: xclaw.Events) -> StreamingResponse:
    async def lines() -> AsyncIterator[str]:
        async for event in events:
            yield json.dumps(event.wire()) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def message(request: Request) -> Response:
    session = await agent_of(request).session(request.path_params["id"])
    text = str((await body(request)).get("text") or "")
    events = session.send(text)
    # Started now, so a refusal (busy, no model) is an HTTP error rather than a broken stream.
    first = await events.__anext__()

    async def lines() -> AsyncIterator[str]:
        yield json.dumps(first.wire()) + "\n"
        async for event in events:
            yield json.dumps(event.wire()) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def resume(request: Request) -> Response:
    session = await agent_of(request).session(request.path_params["id"])
    return stream(session.resume())


async def approve(request: Request) -> Response:
    session = await agent_of(request).session(request.path_params["id"])
    yes = (await body(request)).get("approve") is True
    await session.approve(request.path_params["step"], yes)
    return JSONResponse({"approved": yes})


async def conversation(request: Request) -> Response:
    session = await agent_of(request).session(request.path_params["id"])
    info = await session.info()
    return JSONResponse(
        {
            "id": session.id,
            "title": info.title,
            "state": info.state_text,
            "messages": [m.wire() for m in await session.history()],
            "steps": [s.wire() for s in await session.steps()],
        }
    )


async def rollback(request: Request) -> Response:
    session = await agent_of(request).session(request.path_params["id"])
    result = await session.rollback(str((await body(request)).get("step")))
    return JSONResponse({"deleted": result.deleted})


async def xclaw_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, xclaw.XclawError)
    return JSONResponse(
        {"code": exc.code, "error": exc.message}, status_code=STATUS.get(exc.code, 500)
    )


app = Starlette(
    routes=[
        Route("/conversations", new_conversation, methods=["POST"]),
        Route("/conversations/{id}", conversation, methods=["GET"]),
        Route("/conversations/{id}/messages", message, methods=["POST"]),
        Route("/conversations/{id}/resume", resume, methods=["POST"]),
        Route("/conversations/{id}/approvals/{step}", approve, methods=["POST"]),
        Route("/conversations/{id}/rollback", rollback, methods=["POST"]),
    ],
    exception_handlers={xclaw.XclawError: xclaw_error},
    lifespan=lifespan,
)
