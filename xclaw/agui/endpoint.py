"""`POST /agui`: one AG-UI run over an xclaw session (docs/ag-ui.md).

Signed in and checked as the HTTP API is (ApiGuard: token, Origin, the throttle; then what
the person may do to the session, xclaw/gateway/access.py): another's `threadId` answers
as an id nobody has. Built on the gateway's seams only (GatewayRuntime, the Store, the
access checks), never on the runtime's internals.

Order matters and is always the same: subscribe to the session's frames, then act (send the
new message, answer approvals, hand front-end tool results to their calls, or resume
interrupted work), then stream. What the run does between subscribing and streaming waits
in the queue, so nothing is lost; a stream that did not send a message starts from the
record (MESSAGES_SNAPSHOT), so a client whose stream dropped — or whose gateway was
killed — gets the conversation and the rest of the run, nothing twice (translate.py).
Every answer is redacted as it leaves, as the HTTP API's are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from xclaw.agui.request import (
    MAX_BODY_BYTES,
    RECORD_ID_PREFIX,
    Answer,
    RunRequest,
    ToolAnswer,
    read_request,
)
from xclaw.agui.snapshot import answered_calls, asked_calls, messages_snapshot, state_of
from xclaw.agui.translate import RESYNC, Ended, Translator, interrupt_of
from xclaw.errors import BadRequest, BadStep, SessionBusy, SessionNotFound, XclawError
from xclaw.gateway.api import error_response, identity
from xclaw.gateway.context import Gateway
from xclaw.gateway.following import Following
from xclaw.gateway.message_ids import message_step, with_intent, without
from xclaw.store.model import APPROVAL_STEP_NAME, MAIN_AGENT, Session, Step, StepStatus, StepType
from xclaw.teams import Actor, Identity, Need
from xclaw.tools.base import ToolResult
from xclaw.tools.client import metadata_with, specs_from_metadata

log = logging.getLogger("xclaw.agui")

# Silence on the stream longer than this gets an SSE comment (proxies close idle streams),
# and a look at whether the run is still going.
KEEPALIVE_S = 15.0
_ENCODER = EventEncoder()


async def agui_endpoint(request: Request) -> Response:
    """The route (behind ApiGuard, which signed the request in)."""
    gw: Gateway = request.app.state.gateway
    served: Served | None = None
    try:
        raw = await _body(request)
        run = read_request(raw, server_tools=list(gw.runtime.toolbox.tools))
        served = Served(gw, run, identity(request))
        await served.open()
    except XclawError as e:
        if served is not None:
            served.close()
        log.info("event=agui_refused code=%s", e.code)
        return error_response(e.code, gw.runtime.redact.text(e.message))
    return StreamingResponse(
        served.events(),
        media_type=_ENCODER.get_content_type(),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _body(request: Request) -> bytes:
    """The body, refused as soon as it passes the limit (never read whole first)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadRequest(f"request body too large (limit {MAX_BODY_BYTES} bytes)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadRequest(f"request body too large (limit {MAX_BODY_BYTES} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


class Served:
    """One AG-UI run being served: the session's frames queued from `open` on, translated
    by `events`."""

    def __init__(self, gw: Gateway, run: RunRequest, who: Identity) -> None:
        self.gw = gw
        self.rt = gw.runtime
        self.run = run
        self.sid = run.thread_id
        self.who = who
        self.actor = Actor(who, "http", "ag-ui")
        self.sent = False  # this request sent the user's message
        self.follow = Following(self.rt, self.sid)
        self._delivered: set[str] = set()  # front-end tool calls this request answered
        self._exists = False  # the session existed before this request

    def close(self) -> None:
        self.follow.close()

    # --- acting -----------------------------------------------------------------------------
    async def _need(self, need: Need) -> None:
        if self._exists:  # (a session this request creates is the person's own)
            await self.gw.access.require(self.who, self.sid, need)

    async def open(self) -> None:
        store = self.gw.store
        session = await asyncio.to_thread(store.find_session, self.sid)
        if session is not None:  # another's session answers as an id nobody has
            await self.gw.access.require(self.who, self.sid, Need.READ)
            self._exists = True
        self.follow.start()
        try:
            await self._act(session)
        except BaseException:
            self.close()
            raise

    async def _act(self, session: Session | None) -> None:
        rt, store, run, sid = self.rt, self.gw.store, self.run, self.sid
        steps: list[Step] = []
        if session is not None:
            steps = await asyncio.to_thread(store.steps, sid, agent=MAIN_AGENT)
        new = run.message_id is not None and not self._recorded(session, steps)
        if new:
            await self._need(Need.ACT)
            if rt.is_busy(sid):
                raise SessionBusy(
                    "a run is in flight for this thread: answer what it waits for, or "
                    "reconnect (a run with no new message) to follow it"
                )
            await self._send(session, steps)
            return
        if session is None:
            raise SessionNotFound(sid)
        if run.tools is not None:
            await self._need(Need.ACT)
            await self._declare(session)
        if run.answers:
            await self._need(Need.APPROVE)
        for answer in run.answers:
            await self._answer(answer)
        if run.tool_answers:
            await self._need(Need.ACT)
            for result in run.tool_answers:
                self._deliver(result, steps)
        if not rt.is_busy(sid):
            await rt.resume_if_needed(sid)  # interrupted work goes on (after a restart)

    def _recorded(self, session: Session | None, steps: list[Step]) -> bool:
        """The client's last message is one the record holds already (xclaw/gateway/
        message_ids.py): the record's own (`xclaw:` ids), or one this thread sent before."""
        mid = self.run.message_id
        assert mid is not None
        if mid.startswith(RECORD_ID_PREFIX):
            return True
        return session is not None and message_step(session.metadata, _key(mid), steps) is not None

    async def _send(self, session: Session | None, steps: list[Step]) -> None:
        """The new message: its id recorded first (write-ahead), then handed to the runtime."""
        rt, store, run, sid = self.rt, self.gw.store, self.run, self.sid
        assert run.message_id is not None and run.text is not None
        key = _key(run.message_id)
        meta = with_intent({} if session is None else session.metadata, key, steps)
        if run.tools is not None:
            meta = metadata_with(meta, run.tools)
        if session is None:
            await asyncio.to_thread(store.create_session, session_id=sid, metadata=meta)
            user = self.who.user
            if user is not None and self.gw.teams is not None:
                await asyncio.to_thread(self.gw.teams.claim_session, sid, user)
        else:
            await asyncio.to_thread(store.update_session, sid, metadata=meta)
        if run.tools is not None:
            rt.toolbox.client.declare(sid, run.tools)
        try:
            await rt.send(sid, run.text, actor=self.actor)
        except XclawError:
            # Not sent (busy, say): its entry goes, so sending it again is not "sent".
            now = await asyncio.to_thread(store.get_session, sid)
            await asyncio.to_thread(store.update_session, sid, metadata=without(now.metadata, key))
            raise
        self.sent = True

    async def _declare(self, session: Session) -> None:
        """The client's tools, recorded when they changed (a run resumed after a restart
        offers them too)."""
        assert self.run.tools is not None
        if [s.to_json() for s in specs_from_metadata(session.metadata)] != [
            s.to_json() for s in self.run.tools
        ]:
            meta = metadata_with(session.metadata, self.run.tools)
            await asyncio.to_thread(self.gw.store.update_session, self.sid, metadata=meta)
        self.rt.toolbox.client.declare(self.sid, self.run.tools)

    async def _answer(self, answer: Answer) -> None:
        """An approval answered; one the record holds answered already is left (nothing
        twice); one not asked since a restart is asked again first (the run resumes)."""
        sid = self.sid
        try:
            step = await asyncio.to_thread(self.gw.store.get_step, sid, answer.step_id)
        except XclawError:
            raise BadStep(answer.step_id, sid) from None
        if step.step_type is not StepType.SYSTEM_ALERT or step.name != APPROVAL_STEP_NAME:
            raise BadRequest(f"{answer.step_id} is not an approval (an interruptId names one)")
        if step.status is not StepStatus.RUNNING:
            return
        if not await self.follow.answer(step.display_id, answer.approve, self.actor):
            raise BadStep.not_waiting(step.display_id, sid)

    def _deliver(self, result: ToolAnswer, steps: list[Step]) -> None:
        """A front-end tool's result to its call; a call the record answers already keeps
        its answer (nothing twice)."""
        for s in steps:
            if (
                s.step_type is StepType.TOOL_CALL
                and s.call_id == result.call_id
                and (
                    s.status is StepStatus.COMPLETED
                    or (s.status is StepStatus.FAILED and not s.interrupted)
                )
            ):
                return
        self.rt.toolbox.client.calls.deliver(
            self.sid, result.call_id, ToolResult(result.content, is_error=result.is_error)
        )
        self._delivered.add(result.call_id)

    # --- events out -------------------------------------------------------------------------
    def _sse(self, event: BaseEvent) -> str:
        return _ENCODER.encode(event)

    async def events(self) -> AsyncIterator[str]:
        """The AG-UI run, as SSE."""
        rt, sid, run = self.rt, self.sid, self.run
        client = rt.toolbox.client
        t = Translator(run.run_id, lambda name: client.is_client_tool(sid, name))
        t.approved = self.follow.answered
        t.answered |= self._delivered  # the client holds these results: it sent them
        try:
            yield self._sse(
                RunStartedEvent(thread_id=sid, run_id=run.run_id, protocol_version=PROTOCOL_VERSION)
            )
            if not self.sent:
                for event in await self._snapshot(t):
                    yield self._sse(event)
            t.ended = self._waiting_already(t)
            said = t.ended is not None and not self.sent  # the state just sent holds
            while t.ended is None:
                frame = await self._next(t)
                if frame is None:
                    yield ": keepalive\n\n"
                    continue
                for event in t.frame(frame):
                    if isinstance(event, CustomEvent) and event.name == RESYNC:
                        for again in await self._snapshot(t, state=False):
                            yield self._sse(again)
                        continue
                    yield self._sse(event)
            for event in await self._finish(t, t.ended, state=not said):
                yield self._sse(event)
        finally:
            self.close()

    async def _snapshot(self, t: Translator, *, state: bool = True) -> list[BaseEvent]:
        """The record's conversation (and state): what the client holds from here on."""
        rt, sid = self.rt, self.sid
        history = await asyncio.to_thread(rt.history_frame, sid)
        items = rt.redact(history.get("messages", []))
        t.asked |= asked_calls(items)
        t.answered |= answered_calls(items)
        t.skip_deltas = rt.is_busy(sid)
        out: list[BaseEvent] = [messages_snapshot(items)]
        if state:
            out.append(await self._state())
        return out

    async def _state(self) -> StateSnapshotEvent:
        store, sid = self.gw.store, self.sid
        session = await asyncio.to_thread(store.get_session, sid)
        steps = await asyncio.to_thread(store.steps, sid)
        value = state_of(session, steps, busy=self.rt.is_busy(sid))
        return StateSnapshotEvent(snapshot=self.rt.redact(value))

    def _waiting_already(self, t: Translator) -> Ended | None:
        """What the session already waits for (an approval, a front-end tool's result)
        that this request did not answer: the run ends at once, saying so."""
        rt, sid = self.rt, self.sid
        asked = [
            f
            for f in rt.pending_approval_frames(sid)
            if f.get("stepId") not in self.follow.answered
        ]
        if asked:
            return Ended("interrupt", interrupts=tuple(interrupt_of(f) for f in asked))
        waiting = [c for c in rt.toolbox.client.calls.waiting(sid) if c not in t.answered]
        if waiting:
            return Ended("pending_tools", pending=tuple(waiting))
        if not rt.is_busy(sid) and self.follow.queue.empty():
            return Ended("success")  # nothing running: the run is what the record says
        return None

    async def _next(self, t: Translator) -> dict[str, Any] | None:
        """The next frame; None after KEEPALIVE_S of silence, or when the run is gone
        without saying how it ended (then `t.ended` says it)."""
        if self.follow.overflow:
            t.ended = Ended(
                "error", error="the client read too slowly; reconnect", code="slow_client"
            )
            return None
        frame = await self.follow.next(wait_s=KEEPALIVE_S)
        if frame is not None:
            return frame
        if not self.rt.is_busy(self.sid) and self.follow.queue.empty():
            session = await asyncio.to_thread(self.gw.store.get_session, self.sid)
            if session.status.value in ("Running", "Paused") and not session.awaiting_input:
                t.ended = Ended(
                    "error",
                    error="the run stopped on this gateway; reconnect to go on with it",
                    code="interrupted",
                )
            else:
                t.ended = Ended("success")
        return None

    async def _finish(self, t: Translator, ended: Ended, *, state: bool) -> list[BaseEvent]:
        sid, run_id = self.sid, self.run.run_id
        if ended.kind == "error":
            return [RunErrorEvent(message=self.rt.redact.text(ended.error), code=ended.code)]
        out = t.closing()
        if state:
            out.append(await self._state())
        if ended.kind == "interrupt":
            known = {i.id for i in ended.interrupts}
            more = [
                interrupt_of(f)
                for f in self.rt.pending_approval_frames(sid)
                if f.get("stepId") not in known and f.get("stepId") not in self.follow.answered
            ]
            outcome: Any = RunFinishedInterruptOutcome(interrupts=[*ended.interrupts, *more])
            out.append(RunFinishedEvent(thread_id=sid, run_id=run_id, outcome=outcome))
        elif ended.kind == "cancelled":
            out.append(
                RunFinishedEvent(
                    thread_id=sid, run_id=run_id, outcome=RunFinishedCancelledOutcome()
                )
            )
        else:
            pending = list(ended.pending) or None
            out.append(
                RunFinishedEvent(
                    thread_id=sid,
                    run_id=run_id,
                    result=ended.result,
                    outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=pending),
                )
            )
        return out


def _key(message_id: str) -> str:
    return f"agui:{message_id}"
