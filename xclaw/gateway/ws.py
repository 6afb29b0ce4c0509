"""[gateway] The `/ws` endpoint: one socket per client speaking docs/protocol.md.

Each socket has one reader (frames in, handled one at a time, in order) and one writer (a
queue drained onto the wire), so the runtime's sinks never block or await: they only enqueue.
A bad frame costs the sender an `error` frame, never the connection or the session.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from xclaw.errors import (
    NotAttached,
    SessionBusy,
    SessionNotFound,
    StepNotFound,
    StoreError,
    XclawError,
)
from xclaw.gateway.auth import origin_allowed, token_from_request
from xclaw.gateway.commands import COMMAND_NEEDS, CommandError, session_title
from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import Refusal, SignedIn
from xclaw.people.teams import Actor, Need
from xclaw.runtime.inputs import Submitted
from xclaw.wire.build import (
    ack_frame,
    error_frame,
    for_session,
    history_frame,
    notice_frame,
    pong_frame,
    queued_frame,
    queued_notice,
    session_frame,
)
from xclaw.wire.busy import BusyPolicy
from xclaw.wire.protocol import (
    PROTOCOL_VERSION,
    ApprovalFrame,
    BadFrame,
    CancelFrame,
    Command,
    MessageFrame,
    PingFrame,
    ReconnectFrame,
    parse_client_frame,
    parse_command,
)
from xclaw.wire.shapes import Frame, FrameJson

log = logging.getLogger("xclaw.gateway.ws")

FIRST_FRAME_TIMEOUT_S = 10.0
# A client that stops reading is cut off rather than letting its queue grow without bound;
# it reconnects and gets the history. Counted in bytes (frames vary from 20 bytes to
# megabytes: a count of frames let one reader hold 100 MB) and, as a backstop, in frames.
# A single frame larger than the byte bound still goes when nothing else is queued.
MAX_QUEUED_BYTES = 16 * 1024 * 1024
MAX_QUEUED_FRAMES = 10_000
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_TOO_MANY_ATTEMPTS = 4429
SIGN_IN_REFUSED = {
    Refusal.UNAUTHORIZED: (
        "missing or wrong access token (see the server's start-up banner)",
        CLOSE_UNAUTHORIZED,
    ),
    Refusal.TOO_MANY_ATTEMPTS: (
        "too many failed sign-ins from this address; wait a minute",
        CLOSE_TOO_MANY_ATTEMPTS,
    ),
}
# Typed without their argument these answer their usage line, whoever asks.
USAGE_WHEN_BARE = ("rollback", "fork", "title")
# What these answer on a new session nobody has written yet (docs/protocol.md), without
# touching the record: there is nothing in it to list, rewind or branch from.
NO_STEPS_YET = "No steps yet: this session starts with your first message."
NOTHING_YET = ("steps", "rollback", "fork", "ps", "queue", "unqueue")
CLOSE_TOO_SLOW = 1013

_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


def _raw(message: Mapping[str, Any]) -> str | bytes | None:
    """The payload of an ASGI websocket.receive message; None for a disconnect."""
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if isinstance(text, str):
        return text
    data = message.get("bytes")
    return data if isinstance(data, bytes) else b""


def _first_frame_token(raw: str | bytes) -> str | None:
    """The `token` field of the first frame, read before anything else is trusted."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    token = data.get("token") if isinstance(data, dict) else None
    return token if isinstance(token, str) else None


# Every frame of every client is encoded here (~3.5 frames per step): orjson, measured ~4x
# faster in the server than the standard encoder (bench/HISTORY.md). What it refuses — text
# with a lone surrogate (a hostile model or tool can produce one), an integer beyond 64 bits
# — goes through the standard encoder, \u-escaped, instead of killing the writer.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS
_ENCODE_ASCII = json.JSONEncoder(ensure_ascii=True, default=str).encode


def encode_frame(frame: Frame) -> str:
    """A server frame as JSON text that encodes as UTF-8."""
    try:
        return orjson.dumps(frame, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return _ENCODE_ASCII(frame)


async def _refuse(ws: WebSocket, code: str, text: str, close_code: int) -> None:
    try:
        await ws.send_text(json.dumps(error_frame(text, code)))
        await ws.close(close_code, code)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


class Connection:
    """One client socket: its attachment to (at most) one session and its outgoing queue."""

    def __init__(self, ws: WebSocket, gw: Gateway, signed: SignedIn) -> None:
        self.ws = ws
        self.gw = gw
        self.signed = signed
        self.id = next(_ids)
        self.session_id: str | None = None
        # The attached session is a new one nobody had written when it attached. It is
        # nobody's until written, then only its writer's: every frame decides it from the
        # record at the moment it acts (`_need`), and only a write that claims it in its own
        # transaction (a first message, /title) may write it.
        self._pending = False
        # A member's frames of such a session (the runtime's, the hub's), held until it is
        # written as theirs: under an id a client chose, someone else may write it first,
        # and then none may reach here.
        self._quarantine: list[Frame] = []
        # The declared agent that new session runs, given with its first message.
        self._new_agent: str | None = None
        self._unsubscribe: Any = None
        # Frames are serialised when queued, so what is counted is what is held. A plain
        # deque drained by write_loop, woken through one future when it was empty.
        self._out: deque[str | _Close] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._queued_bytes = 0
        self._closing = False
        self._held: list[Frame] | None = None

    # --- outgoing ---------------------------------------------------------------------------
    # No frame leaves without redaction (docs/security.md): the runtime's frames are redacted
    # by the runtime (Runtime.emit), every other frame here (`push`, the hub's).
    @property
    def pending(self) -> bool:
        return self._pending

    def _from_runtime(self, frame: Frame) -> None:
        """The sink given to the runtime: held back while an attach reads the history, and a
        member's while their new session is not written yet (as theirs)."""
        if self._held is not None:
            self._held.append(frame)
        elif self._pending and not self.signed.identity.admin:
            self._quarantine.append(frame)
        else:
            self._queue(frame)

    def _written(self) -> None:
        """The pending session is written now, as this person's: its held frames go out."""
        self._pending = False
        held, self._quarantine = self._quarantine, []
        for frame in held:
            self._queue(frame)

    def _from_hub(self, frame: Frame) -> None:
        """The sink given to the hub (frames the gateway made for every socket of a session,
        e.g. a rollback's new history)."""
        self._from_runtime(self.gw.runtime.redact(frame))

    def push(self, frame: FrameJson) -> None:
        """Queue a frame the gateway made for this socket, redacted: never blocks, never
        raises."""
        self._queue(self.gw.runtime.redact(frame))

    def _queue(self, frame: Frame) -> None:
        """Queue a frame that is already redacted."""
        if self._closing:
            return
        text = encode_frame(frame)
        size = len(text)
        backlog = len(self._out)
        if backlog and (
            backlog >= MAX_QUEUED_FRAMES or self._queued_bytes + size > MAX_QUEUED_BYTES
        ):
            self._closing = True
            log.warning(
                "event=slow_client conn=%s session=%s queued_frames=%s queued_bytes=%s",
                self.id,
                self.session_id,
                backlog,
                self._queued_bytes,
            )
            self._enqueue(_Close(CLOSE_TOO_SLOW, "client too slow"))
            return
        self._queued_bytes += size
        self._enqueue(text)

    def _enqueue(self, item: str | _Close) -> None:
        self._out.append(item)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def write_loop(self) -> None:
        out = self._out
        try:
            while True:
                while out:
                    item = out.popleft()
                    if isinstance(item, _Close):
                        await self.ws.close(item.code, item.reason)
                        return
                    self._queued_bytes -= len(item)
                    await self.ws.send_text(item)
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
                self._wake = None
        except (WebSocketDisconnect, RuntimeError, OSError):
            return  # the reader sees the disconnect and cleans up

    def error(self, text: str, code: str, message_id: str | None = None) -> None:
        self.push(error_frame(text, code, self.session_id, message_id=message_id))

    # --- the watch (xclaw/gateway/context.py Gateway.watch) ---------------------------------
    def sign_out(self) -> None:
        """The user was removed or given a new token: refused from now on, and told why."""
        log.info("event=signed_out conn=%s", self.id)
        self.detach()
        self.push(
            error_frame(
                "your access token no longer works (the user was removed or given a new one)",
                "unauthorized",
            )
        )
        self._closing_with(CLOSE_UNAUTHORIZED, "unauthorized")

    def lose_session(self, *, tell: bool = True) -> None:
        """Their part in the attached session was taken away, or its new session was written
        by someone else: detached (what was held back of it dropped), told as for an id that
        does not exist (`tell`: here; else by the frame that found out)."""
        sid = self.session_id
        if sid is None:
            return
        log.info("event=access_lost conn=%s session=%s", self.id, sid)
        self._pending = False
        self._new_agent = None
        self._quarantine = []
        self.detach()
        self.session_id = None
        if tell:
            self.push(error_frame(SessionNotFound(sid).message, "unknown_session", sid))

    def keep_session(self) -> None:
        """Another socket of this person wrote the new session: its held frames go out."""
        self._written()

    def _closing_with(self, code: int, reason: str) -> None:
        if not self._closing:
            self._enqueue(_Close(code, reason))
            self._closing = True

    # --- attachment -------------------------------------------------------------------------
    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.session_id is not None:
            self.gw.hub.remove(self.session_id, self._from_hub)

    async def attach(self, requested: str | None, *, agent: str | None = None) -> str:
        """Resume on reconnect: attach to the session, send `session`, `history` and any approval
        still waiting, let the runtime resume what was interrupted, then send `status` with
        `busy` so a client knows whether to wait for a reply. An unknown (or null) id is attached
        as a new session that is written at its first message."""
        rt = self.gw.runtime
        try:
            session, created = await rt.peek(requested)
        except ValueError as e:
            raise BadFrame(f"reconnect frame: sessionId: {e}") from None
        sid = session.session_id
        if not created:  # another's session answers as an id nobody has (docs/teams.md)
            await self.gw.access.require(self.signed.identity, sid, Need.READ)
        self.detach()
        self.session_id = sid
        self._pending = created
        # The declared agent a new session runs: given with its first message (/new --agent).
        self._new_agent = agent if created else None
        self._quarantine = []
        # Subscribe first, then read the history in a worker thread (a long session must not
        # stall the event loop); frames a run in flight emits meanwhile are held back and sent
        # after the history they continue, so none is lost and none arrives out of order.
        self._held = []
        self._unsubscribe = rt.subscribe(sid, self._from_runtime)
        self.gw.hub.add(sid, self._from_hub)
        try:
            if created:
                history = history_frame("[]", [])
            else:
                history = await asyncio.to_thread(rt.history_frame, sid)
        finally:
            held, self._held = self._held, None
        # A new session nobody had written: whatever runs under its id is someone else's
        # first message (frames of it are held back, below), not this socket's to be told.
        hidden = created and not self.signed.identity.admin
        attached = session_frame(
            session,
            created=created,
            busy=rt.is_busy(sid) and not hidden,
            user=self.signed.identity.user,  # whom the client is signed in as
            agent=self._new_agent,
        )
        self.push(attached)
        self._queue(for_session(history, sid))  # redacted by the runtime (it may be long)
        for frame in held:
            self._from_runtime(frame)
        for frame in rt.pending_approval_frames(sid):
            if frame not in held:
                self._from_hub(frame)
        current = session
        if not created:
            await rt.resume_if_needed(sid)
            # Messages waiting for the run (docs/protocol.md, "Input while a run is busy").
            if (queue := await rt.queue_on_attach(sid)) is not None:
                self.push(queue)
            current = await asyncio.to_thread(self.gw.store.record.get_session, sid)
        busy = rt.is_busy(sid) and not hidden
        self.push(for_session(rt.status_frame(current, busy=busy), sid))
        log.info(
            "event=attach conn=%s session=%s created=%s status=%s",
            self.id,
            sid,
            created,
            current.status.value,
        )
        return sid

    async def _target(self, requested: str | None, *, attach: bool) -> str:
        """The session a frame addresses. A `message` naming a known session this socket is
        not attached to attaches it (documented); approvals and cancels just act on it."""
        if requested is None or requested == self.session_id:
            if self.session_id is not None:
                return self.session_id
            if attach:
                return await self.attach(None)
            raise NotAttached(
                "this socket is not attached to a session: "
                'send {"type":"reconnect","sessionId":ID} first'
            )
        # Existence and the person's part in one lookup: another's session answers as an id
        # nobody has, by the same path in the same time.
        _, role = await self.gw.access.lookup(self.signed.identity, requested)
        if role is None:
            raise SessionNotFound(requested)
        if attach:
            return await self.attach(requested)
        return requested

    async def _need(self, sid: str, need: Need) -> bool:
        """Refuse unless this person may do `need` to `sid`. True: `sid` is this socket's new
        session and nobody has written it yet, read from the record now — the frame then
        does nothing to it, or writes it as theirs in the transaction that creates it. Written
        since, it is decided as any session: theirs (another socket of theirs wrote it), or
        not (the socket is detached, and answered as for an id nobody has). The last await
        before the frame acts: approvals and cancels act with no await after it."""
        who = self.signed.identity
        if sid == self.session_id and self._pending:
            exists, role = await self.gw.access.lookup(who, sid, fresh=True)
            if sid != self.session_id or not self._pending:
                return await self._need(sid, need)  # the watch decided it meanwhile
            if not exists:
                return True
            if role is None:
                self.lose_session(tell=False)
                raise SessionNotFound(sid)
            self._written()
        await self.gw.access.require(who, sid, need)
        return False

    def actor(self, client: str | None = None) -> Actor:
        return Actor(self.signed.identity, "websocket", client)

    async def _switch(self, sid: str, cmd: Command) -> None:
        """/switch PREFIX attaches to an existing session only; /new [title] to a new one."""
        if cmd.name == "new":
            agent, rest = new_agent(cmd.rest)
            if agent is not None:
                self.gw.runtime.agent_named(agent)  # unknown_agent before anything changes
            title = self.gw.runtime.title_of(session_title(rest))
            if not title:  # written with its first message, as a session opened anywhere
                await self.attach(None, agent=agent)
                return
            # Named: written now, as /title writes a session nothing was said to yet, so the
            # name survives the client leaving (or reconnecting) before the first message.
            fresh, _ = await self.gw.runtime.peek(None)
            await self._write_new(fresh.session_id, title)
            if agent is not None:  # recorded with it, for whichever socket sends first
                await self.gw.runtime.choose_agent(fresh.session_id, agent)
            await self.attach(fresh.session_id)
            return
        if len(cmd.args) != 1:
            raise CommandError(
                "usage: /switch ID — a session id or a unique prefix of one (see /sessions); /new [title] starts a new session"
            )
        # Among the sessions this person may see only: another's is neither found nor
        # makes a prefix ambiguous.
        target = await self.gw.access.resolve(self.signed.identity, cmd.args[0])
        await self.attach(target.session_id)

    async def _write_new(self, sid: str, title: str = "") -> None:
        """Write a new session as this person's, its ownership in the same transaction. An id
        written meanwhile by someone else is refused there (SessionNotFound: this socket,
        attached to it, is detached), nothing written; by this person, or one they may act
        on, it is simply theirs."""
        who, teams = self.signed.identity, self.gw.teams
        try:
            if teams is not None:
                await asyncio.to_thread(
                    teams.create_session_as, sid, who.user, title=title, member=not who.admin
                )
            else:  # a store without users: everything is the admin's
                await asyncio.to_thread(
                    self.gw.store.record.create_session, session_id=sid, title=title
                )
        except SessionNotFound:
            if sid == self.session_id:
                self.lose_session(tell=False)
            raise
        except StoreError:
            if await asyncio.to_thread(self.gw.store.record.find_session, sid) is None:
                raise
        if sid == self.session_id and self._pending:
            self._written()

    async def _send(
        self,
        sid: str,
        text: str,
        message_id: str | None,
        agent: str | None = None,
        busy: BusyPolicy | None = None,
    ) -> Submitted:
        """A message (its step, and whether `message_id` had it recorded before), run by the
        declared `agent` (None: the session's). On this socket's new session, its first: the
        session is written in the transaction that records it, as its sender's — refused
        there if someone else wrote the id first (the socket is then detached, answered as
        for an unknown id)."""
        pending = sid == self.session_id and self._pending
        if agent is None and pending:
            agent = self._new_agent
        try:
            sent = await self.gw.runtime.submit(
                sid,
                text,
                busy=busy,
                create=sid == self.session_id,
                actor=self.actor(),
                message_id=message_id,
                agent=agent,
            )
        except (SessionNotFound, SessionBusy):
            if not pending or sid != self.session_id or not self._pending:
                raise
            # Refused in the transaction, or another's first message is being written:
            # whose is it now?
            exists, role = await self.gw.access.lookup(self.signed.identity, sid, fresh=True)
            if exists and role is None and sid == self.session_id:
                self.lose_session(tell=False)
                raise SessionNotFound(sid) from None
            raise
        if pending and sid == self.session_id and self._pending:
            self._written()
        return sent

    # --- incoming ---------------------------------------------------------------------------
    async def handle(self, raw: str | bytes) -> None:
        if not await self.gw.auth.still(self.signed):
            self.sign_out()
            return
        try:
            frame = parse_client_frame(raw)
            if frame.v != PROTOCOL_VERSION:
                raise BadFrame(
                    f"unsupported protocol version {frame.v}; "
                    f"this gateway speaks v{PROTOCOL_VERSION}"
                )
            await self._dispatch(frame)
        except BadFrame as e:
            log.info("event=bad_frame conn=%s reason=%r", self.id, str(e)[:200])
            self.error(str(e), "bad_frame")
        except XclawError as e:
            log.info("event=error conn=%s session=%s code=%s", self.id, self.session_id, e.code)
            # A refused message names the client's id for it, if it gave one (protocol.md).
            self.error(e.message, e.code, getattr(frame, "message_id", None))
        except Exception:  # a bug must not take the connection (or the server) down
            log.exception("event=internal_error conn=%s session=%s", self.id, self.session_id)
            self.error("internal error in the gateway; see the server log", "internal_error")

    async def _dispatch(self, frame: Any) -> None:
        rt = self.gw.runtime
        if isinstance(frame, PingFrame):
            self.push(pong_frame())
        elif isinstance(frame, ReconnectFrame):
            await self.attach(frame.session_id or None)
        elif isinstance(frame, MessageFrame):
            if not frame.content.strip():
                raise BadFrame("message frame: content: must not be empty")
            sid = await self._target(frame.session_id, attach=True)
            cmd = parse_command(frame.content)
            if cmd is None:
                await self._need(sid, Need.ACT)
                # SessionBusy -> `busy`: one driver (unless the message asks to wait).
                sent = await self._send(
                    sid, frame.content, frame.message_id, frame.agent, frame.busy
                )
                if sent.queued is not None:  # kept (durably) for later: said to the sender
                    if frame.message_id is not None:
                        self.push(
                            queued_frame(sid, frame.message_id, sent.queued.mode, sent.duplicate)
                        )
                    else:
                        self.push(queued_notice(sent.queued.mode, sid))
                    return
                assert sent.step is not None
                if frame.message_id is not None:  # recorded (durably): said to the sender
                    self.push(
                        ack_frame(sid, frame.message_id, sent.step.display_id, sent.duplicate)
                    )
                return
            if cmd.name in ("switch", "new"):
                await self._switch(sid, cmd)
                return
            need = COMMAND_NEEDS.get(cmd.name)
            unwritten = False
            if need is not None and (cmd.args or cmd.name not in USAGE_WHEN_BARE):
                unwritten = await self._need(sid, need)
            if unwritten:  # nothing in it yet; only naming it writes it (as theirs)
                if cmd.name == "title":
                    await self._write_new(sid)
                elif cmd.name in NOTHING_YET:
                    self.push(notice_frame(NO_STEPS_YET, sid))
                    return
                else:  # /share, /compact: there is no session to share or compact yet
                    raise SessionNotFound(sid)
            result = await self.gw.commands.run(sid, cmd, self.actor())
            for out in result.reply:
                self.push(out)
            for out in result.broadcast:
                self.gw.hub.broadcast(sid, out)
        elif isinstance(frame, ApprovalFrame):
            sid = await self._target(frame.session_id, attach=False)
            # An edited call is the editor's own act: what a collaborator may do.
            unwritten = await self._need(sid, Need.APPROVE if frame.input is None else Need.ACT)
            by = self.actor(frame.client).by()
            try:
                if unwritten:  # nothing can wait in a session nobody has written
                    raise StepNotFound(frame.step_id, sid)
                rt.answer_approval(
                    sid,
                    frame.step_id,
                    frame.approve,
                    by,
                    message=frame.message,
                    edited=frame.input,
                )
            except StepNotFound:
                self.push(
                    error_frame(
                        f"no approval is waiting for step {frame.step_id!r} in session {sid}",
                        "bad_step",
                        sid,
                    )
                )
        elif isinstance(frame, CancelFrame):
            sid = await self._target(frame.session_id, attach=False)
            unwritten = await self._need(sid, Need.ACT)
            if unwritten or not rt.cancel(sid):
                self.push(notice_frame("[cancel] nothing is running", sid))
            else:
                await self.gw.commands.record(sid, "cancel", self.actor())


def new_agent(rest: str) -> tuple[str | None, str]:
    """`/new --agent NAME [title]`: (NAME, the title); without `--agent`, (None, rest)."""
    words = rest.split(maxsplit=2)
    if not words or words[0] != "--agent":
        return None, rest
    if len(words) < 2:
        raise CommandError("usage: /new --agent NAME [title] — an agent /agents lists")
    return words[1], words[2] if len(words) > 2 else ""


async def websocket_endpoint(ws: WebSocket) -> None:
    gw: Gateway = ws.app.state.gateway
    await ws.accept()
    secure = ws.url.scheme == "wss"
    if not origin_allowed(
        ws.headers.get("origin"), ws.headers.get("host"), gw.settings.allowed_origins, secure=secure
    ):
        log.warning("event=refused reason=origin origin=%r", ws.headers.get("origin"))
        await _refuse(
            ws,
            "forbidden_origin",
            "this Origin may not connect (add it to allowed_origins)",
            CLOSE_FORBIDDEN_ORIGIN,
        )
        return
    peer = ws.client.host if ws.client else None  # the socket's (forwarded.py)
    given = token_from_request(ws.headers, ws.query_params)
    first: str | bytes | None = None
    if given is None and not gw.auth.proxy_names(peer, ws.headers):
        # No header, query token or proxy sign-on: the first frame must carry the token.
        try:
            first = _raw(await asyncio.wait_for(ws.receive(), FIRST_FRAME_TIMEOUT_S))
        except (TimeoutError, WebSocketDisconnect, RuntimeError):
            first = None
        given = _first_frame_token(first) if first is not None else None
    signed = await gw.auth.sign_in(given, peer, ws.headers, via="websocket")
    if isinstance(signed, Refusal):  # logged by sign_in, without the token
        text, close_code = SIGN_IN_REFUSED[signed]
        await _refuse(ws, signed.value, text, close_code)
        return
    address = gw.auth.client_address(peer, ws.headers)
    conn = Connection(ws, gw, signed)
    user = signed.identity.user
    log.info("event=connect conn=%s client=%s user=%s", conn.id, address, user or "-")
    writer = asyncio.create_task(conn.write_loop())
    if user is not None:
        gw.users_online.add(conn)
    try:
        if first is not None:
            await conn.handle(first)
        while True:
            try:
                raw = _raw(await ws.receive())
            except (WebSocketDisconnect, RuntimeError):
                break
            if raw is None:
                break
            await conn.handle(raw)
    finally:
        gw.users_online.discard(conn)
        conn.detach()
        writer.cancel()
        log.info("event=disconnect conn=%s session=%s", conn.id, conn.session_id)
