"""[agui] `POST /agui`: one AG-UI run over an xclaw session (docs/ag-ui.md).

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

A user message that is a command (`/steps`, `/rollback …`, `/fork`) is answered as one, by
the gateway's commands, never sent to the model (xclaw/agui/commands.py).

A run that sends a message reads the record once, before (nothing for a new thread), and
writes nothing of its own: the message's id and the client's tools are written with the
message (Runtime.send's `metadata`), and the state it ends with is counted from the frames.
The frames queued at a moment go out as one write (bench/README.md: the adapter's cost).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from xclaw.agui.commands import command_events
from xclaw.agui.request import (
    MAX_BODY_BYTES,
    RECORD_ID_PREFIX,
    Answer,
    RunRequest,
    ToolAnswer,
    read_request,
)
from xclaw.agui.snapshot import (
    answered_calls,
    asked_calls,
    messages_snapshot,
    state_from_record,
    state_value,
)
from xclaw.agui.translate import RESYNC, Ended, Event, Translator, interrupt_of
from xclaw.errors import BadRequest, BadStep, SessionBusy, SessionNotFound, XclawError
from xclaw.gateway.adapter_commands import Answered, may_run, run_command
from xclaw.gateway.api import error_response, identity
from xclaw.gateway.context import Gateway
from xclaw.gateway.event_stream import EventStream
from xclaw.gateway.following import Following
from xclaw.gateway.message_ids import protocol_id
from xclaw.gateway.ws import encode_frame
from xclaw.people.teams import Actor, Identity, Need
from xclaw.store.steps.model import (
    APPROVAL_STEP_NAME,
    MAIN_AGENT,
    Session,
    Status,
    Step,
    StepStatus,
    StepType,
)
from xclaw.tools.base import ToolResult
from xclaw.tools.client import CLIENT_TOOLS_KEY, metadata_with, specs_from_metadata
from xclaw.views.record import session_cost
from xclaw.wire.protocol import Command
from xclaw.wire.session_commands import protocol_command

log = logging.getLogger("xclaw.agui")

# Silence on the stream longer than this gets an SSE comment (proxies close idle streams),
# and a look at whether the run is still going.
KEEPALIVE_S = 15.0
# AG-UI 1.0 (ag_ui.core.PROTOCOL_VERSION): what RUN_STARTED declares this producer speaks.
PROTOCOL_VERSION = "1.0"
# What each outcome leaves the session in, said by the last STATE_SNAPSHOT without reading
# the record: (status, busy, awaiting input).
AFTER: dict[str, tuple[Status, bool, bool]] = {
    "success": (Status.SUCCESS, False, False),
    "interrupt": (Status.PAUSED, True, False),
    "pending_tools": (Status.RUNNING, True, False),
    "cancelled": (Status.RUNNING, False, True),
}


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
    return EventStream(
        served.events(),
        media_type="text/event-stream",
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


def sse(events: list[Event]) -> bytes:
    """Events as Server-Sent Events, as the package's EventEncoder writes them (`data: JSON`
    and a blank line each), in one piece."""
    parts: list[bytes] = []
    for e in events:
        try:
            data = orjson.dumps(e)
        except TypeError:  # what orjson refuses (a lone surrogate): the standard encoder's
            data = encode_frame(e).encode()
        parts += (b"data: ", data, b"\n\n")
    return b"".join(parts)


def _key(message_id: str) -> str:
    return protocol_id("agui:", message_id)


class Served:
    """One AG-UI run being served: the session's frames followed from `open` on,
    translated by `events`."""

    def __init__(self, gw: Gateway, run: RunRequest, who: Identity) -> None:
        self.gw = gw
        self.rt = gw.runtime
        self.run = run
        self.sid = run.thread_id
        self.who = who
        self.actor = Actor(who, "http", "ag-ui")
        self.follow = Following(self.rt, self.sid)
        self.sent = False  # this request sent the user's message
        self.session: Session | None = None  # as it was before the request acted
        self._before: dict[str, Any] = {}  # the session's costs before the message sent
        self._delivered: set[str] = set()  # front-end tool calls this request answered
        # The message was a command (xclaw/agui/commands.py): its answer, or why it failed.
        self.answered: Answered | None = None
        self.refused: XclawError | None = None
        # The id of this run's message while it waits in the session's queue (a run of the
        # thread was in flight): the stream starts where it is delivered.
        self.awaiting: str | None = None

    def close(self) -> None:
        self.follow.close()

    # --- acting -----------------------------------------------------------------------------
    async def _need(self, need: Need) -> None:
        if self.session is not None:  # (a thread this request makes is the person's own)
            await self.gw.access.require(self.who, self.sid, need)

    async def open(self) -> None:
        found, new = await self.rt.peek(self.sid)  # (its id checked before: request.py)
        session = None if new else found
        if session is not None:  # another's session answers as an id nobody has
            await self.gw.access.require(self.who, self.sid, Need.READ)
        self.session = session
        command = self._command()
        if command is not None:
            await self._run_command(command)
            return
        self.follow.start()
        try:
            await self._act(session)
        except BaseException:
            self.close()
            raise

    def _command(self) -> Command | None:
        """The new user message is a command (`/steps`, `/rollback …`, `/fork`): it is
        answered here, never sent to the model."""
        mid, text = self.run.message_id, self.run.text
        if mid is None or text is None or mid.startswith(RECORD_ID_PREFIX):
            return None
        return protocol_command(text)

    async def _run_command(self, command: Command) -> None:
        """Checked as the HTTP API checks (errors before the stream: a thread nobody has,
        a part too small), then run; a command refused ends the stream with RUN_ERROR."""
        if self.session is None:
            raise SessionNotFound(self.sid)
        await may_run(self.gw, self.sid, command, self.actor)
        try:
            self.answered = await run_command(self.gw, self.sid, command, self.actor)
        except XclawError as e:
            self.refused = e

    async def _act(self, session: Session | None) -> None:
        rt, store, run, sid = self.rt, self.gw.store, self.run, self.sid
        steps: list[Step] = []
        if session is not None and (run.message_id is not None or run.tool_answers):
            steps = await asyncio.to_thread(store.record.steps, sid)
        main = [s for s in steps if s.agent == MAIN_AGENT]
        if run.message_id is not None and not await self._recorded(session):
            await self._need(Need.ACT)
            if run.agent is not None:
                rt.agent_named(run.agent)  # unknown_agent before anything is written
            self._before = session_cost(steps, rt.prices).to_json()
            if session is not None and rt.is_busy(sid):
                await self._keep(session)
                return
            await self._send(session)
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
                self._deliver(result, main)
        if not rt.is_busy(sid):
            await rt.resume_if_needed(sid)  # interrupted work goes on (after a restart)

    async def _recorded(self, session: Session | None) -> bool:
        """The client's last message is one the record holds already (xclaw/gateway/
        message_ids.py): the record's own (`xclaw:` ids), or one this thread sent before."""
        mid = self.run.message_id
        assert mid is not None
        if mid.startswith(RECORD_ID_PREFIX):
            return True
        if session is None:
            return False
        found = await asyncio.to_thread(self.gw.store.record.message_step, self.sid, _key(mid))
        return found is not None

    async def _send(self, session: Session | None) -> None:
        """The new message, its id (and the client's tools) written with it."""
        rt, run, sid = self.rt, self.run, self.sid
        assert run.message_id is not None and run.text is not None
        meta = None
        if run.tools is not None:
            meta = {CLIENT_TOOLS_KEY: [s.to_json() for s in run.tools]}
            rt.toolbox.client.declare(sid, run.tools)
        await rt.send(
            sid,
            run.text,
            create=session is None,
            actor=self.actor,
            metadata=meta,
            message_id=_key(run.message_id),
            agent=run.agent,
        )
        self.sent = True

    async def _keep(self, session: Session) -> None:
        """A message while a run of the thread is in flight follows the session's busy
        policy (docs/protocol.md, "Input while a run is busy"): `reject` refuses it (409
        busy, as before); `queue`, `steer` and `interrupt` keep it in the session's queue,
        and this run streams from where it is delivered — its own turn, or the step of the
        run it steered — to the end of that run."""
        rt, run, sid = self.rt, self.run, self.sid
        assert run.message_id is not None and run.text is not None
        if run.tools is not None:
            await self._declare(session)
        try:
            sent = await rt.submit(
                sid,
                run.text,
                actor=self.actor,
                message_id=_key(run.message_id),
                agent=run.agent,
            )
        except SessionBusy:
            raise SessionBusy(
                "a run is in flight for this thread: answer what it waits for, or "
                "reconnect (a run with no new message) to follow it"
            ) from None
        self.sent = True
        if sent.queued is not None:
            self.awaiting = sent.queued.id

    def _delivered_here(self, frame: dict[str, Any]) -> bool | None:
        """While the message waits (`awaiting`): True at the step that records it (this
        run's events start there), False for the frames of the run before it (not this
        run's), None once it left the queue unrun (cancelled)."""
        kind = frame.get("type")
        if kind == "step":
            step = frame.get("step") or {}
            given = step.get("output")
            out = given if isinstance(given, dict) else {}
            if step.get("type") == "user_input" and out.get("messageId") == self.awaiting:
                self.awaiting = None
                return True
        elif kind == "queue":
            ids = {q.get("id") for q in frame.get("queued") or [] if isinstance(q, dict)}
            if self.awaiting not in ids:
                return None  # gone from the queue: run (its step frame follows) or cancelled
        return False

    async def _cancelled(self) -> bool:
        """The waiting message left the queue without a step that records it."""
        assert self.awaiting is not None
        found = await asyncio.to_thread(self.gw.store.record.message_step, self.sid, self.awaiting)
        return found is None

    async def _declare(self, session: Session) -> None:
        """The client's tools, recorded when they changed (a run resumed after a restart
        offers them too)."""
        assert self.run.tools is not None
        if [s.to_json() for s in specs_from_metadata(session.metadata)] != [
            s.to_json() for s in self.run.tools
        ]:
            meta = metadata_with(session.metadata, self.run.tools)
            await asyncio.to_thread(self.gw.store.record.update_session, self.sid, metadata=meta)
        self.rt.toolbox.client.declare(self.sid, self.run.tools)

    async def _answer(self, answer: Answer) -> None:
        """An approval answered; one the record holds answered already is left (nothing
        twice); one not asked since a restart is asked again first (the run resumes)."""
        sid = self.sid
        try:
            step = await asyncio.to_thread(self.gw.store.record.get_step, sid, answer.step_id)
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
    async def events(self) -> AsyncIterator[bytes]:
        """The AG-UI run, as SSE."""
        rt, sid, run = self.rt, self.sid, self.run
        client = rt.toolbox.client
        t = Translator(run.run_id, lambda name: client.is_client_tool(sid, name))
        t.approved = self.follow.answered
        t.answered |= self._delivered  # the client holds these results: it sent them
        try:
            if self.answered is not None or self.refused is not None:
                yield sse(await self._command_answer())
                return
            started: list[Event] = [
                {
                    "type": "RUN_STARTED",
                    "threadId": sid,
                    "runId": run.run_id,
                    "protocolVersion": PROTOCOL_VERSION,
                }
            ]
            fresh = False
            if not self.sent:
                started += await self._snapshot(t)
                fresh = True
            yield sse(started)
            t.ended = None if self.awaiting is not None else self._waiting_already(t)
            said = t.ended is not None and fresh  # the state just sent holds
            while t.ended is None:
                frame = await self._next(t)
                if frame is None:
                    if t.ended is None:
                        yield b": keepalive\n\n"
                    continue
                out: list[Event] = []
                for f in (frame, *self.follow.ready()):
                    if self.awaiting is not None:
                        here = self._delivered_here(f)
                        if here is None and await self._cancelled():
                            t.ended = Ended(
                                "error",
                                error="the queued message was cancelled before it ran",
                                code="unqueued",
                            )
                            break
                        if not here:
                            continue  # the run before this message's
                    for event in t.frame(f):
                        if event.get("name") == RESYNC and event["type"] == "CUSTOM":
                            out += await self._snapshot(t, state=False)
                        else:
                            out.append(event)
                    if t.ended is not None:
                        break
                if out:
                    yield sse(out)
            yield sse(await self._finish(t, t.ended, state=not said))
        finally:
            self.close()

    async def _command_answer(self) -> list[Event]:
        """The whole run of a command: started, its answer, the state, finished."""
        sid, run_id = self.sid, self.run.run_id
        out: list[Event] = [
            {
                "type": "RUN_STARTED",
                "threadId": sid,
                "runId": run_id,
                "protocolVersion": PROTOCOL_VERSION,
            }
        ]
        if self.refused is not None:
            message = self.rt.redact.text(self.refused.message)
            return [*out, {"type": "RUN_ERROR", "message": message, "code": self.refused.code}]
        assert self.answered is not None
        events, text = command_events(run_id, self.answered, self.rt.redact)
        finished: Event = {
            "type": "RUN_FINISHED",
            "threadId": sid,
            "runId": run_id,
            "outcome": {"type": "success"},
            "result": text,
        }
        return [*out, *events, await self._state_from_record(), finished]

    async def _snapshot(self, t: Translator, *, state: bool = True) -> list[Event]:
        """The record's conversation (and state): what the client holds from here on."""
        rt, sid = self.rt, self.sid
        history = await asyncio.to_thread(rt.history_frame, sid)
        items = rt.redact(history.get("messages", []))
        t.asked |= asked_calls(items)
        t.answered |= answered_calls(items)
        t.skip_deltas = rt.is_busy(sid)
        out: list[Event] = [messages_snapshot(items)]
        if state:
            out.append(await self._state_from_record())
        return out

    async def _state_from_record(self) -> Event:
        store, sid = self.gw.store, self.sid
        session = await asyncio.to_thread(store.record.get_session, sid)
        steps = await asyncio.to_thread(store.record.steps, sid)
        value = state_from_record(session, steps, self.rt.prices, busy=self.rt.is_busy(sid))
        return {"type": "STATE_SNAPSHOT", "snapshot": self.rt.redact(value)}

    def _state_from_stream(self, t: Translator, ended: Ended) -> Event:
        """The state a run that sent a message ends in: its outcome, and its costs over the
        session's before it (what the record would say, counted without reading it)."""
        status, busy, awaiting = AFTER[ended.kind]
        before = self.session
        title = t.title if t.title is not None else (before.title if before else "")
        value = state_value(
            self.sid,
            title,
            status,
            busy=busy,
            awaiting_input=awaiting,
            forked=before.is_forked if before else False,
            cost=t.spent.plus(self._before),
        )
        return {"type": "STATE_SNAPSHOT", "snapshot": self.rt.redact(value)}

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
        if not rt.is_busy(sid) and not self.follow.queue:
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
        if self.awaiting is not None:
            if self.rt.is_busy(self.sid) or any(
                e.id == self.awaiting for e in await self.rt.queued(self.sid)
            ):
                return None  # it waits its turn
            if await self._cancelled():
                t.ended = Ended(
                    "error",
                    error="the queued message was cancelled before it ran",
                    code="unqueued",
                )
            else:  # it ran, and its run ended, unseen here: the record says how
                t.ended = Ended("success")
            return None
        if not self.rt.is_busy(self.sid) and not self.follow.queue:
            session = await asyncio.to_thread(self.gw.store.record.get_session, self.sid)
            if session.status in (Status.RUNNING, Status.PAUSED) and not session.awaiting_input:
                t.ended = Ended(
                    "error",
                    error="the run stopped on this gateway; reconnect to go on with it",
                    code="interrupted",
                )
            else:
                t.ended = Ended("success")
        return None

    async def _finish(self, t: Translator, ended: Ended, *, state: bool) -> list[Event]:
        sid, run_id = self.sid, self.run.run_id
        if ended.kind == "error":
            error: Event = {"type": "RUN_ERROR", "message": self.rt.redact.text(ended.error)}
            if ended.code:
                error["code"] = ended.code
            return [error]
        out = t.closing()
        if state:
            if self.sent:
                out.append(self._state_from_stream(t, ended))
            else:
                out.append(await self._state_from_record())
        finished: Event = {"type": "RUN_FINISHED", "threadId": sid, "runId": run_id}
        if ended.kind == "interrupt":
            known = {i["id"] for i in ended.interrupts}
            more = [
                interrupt_of(f)
                for f in self.rt.pending_approval_frames(sid)
                if f.get("stepId") not in known and f.get("stepId") not in self.follow.answered
            ]
            finished["outcome"] = {
                "type": "interrupt",
                "interrupts": self.rt.redact([*ended.interrupts, *more]),
            }
        elif ended.kind == "cancelled":
            finished["outcome"] = {"type": "cancelled"}
        else:
            outcome: dict[str, Any] = {"type": "success"}
            if ended.pending:
                outcome["pendingToolCallIds"] = list(ended.pending)
            finished["outcome"] = outcome
            if ended.result is not None:
                finished["result"] = ended.result
        out.append(finished)
        return out
