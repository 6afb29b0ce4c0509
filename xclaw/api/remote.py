"""[api] The Python API through a running gateway: `xclaw.connect(url, token=...)` gives the same
Agent and Session as `xclaw.open`, over the gateway's WebSocket (runs, approvals, cancels)
and HTTP API (everything read, rollback, fork, rename) — docs/protocol.md.

Each session that runs something gets a socket of its own, attached to it (a socket is
attached to one session at a time). The socket reconnects by itself when it drops — the
gateway restarted, the network flapped — with a backoff, as the terminal client does, and
re-attaches (which resumes the session's interrupted run, the gateway's rule). A run's
event stream goes on across that without losing or repeating an event: steps committed
while the socket was down are read from the record and given as `step` events (each step
state once), an approval asked again is not given twice, and a run that ended meanwhile
ends its stream with the reply the record holds. Text streamed while the socket was down
(`delta`s) is not replayed: the llm_call step carries it.

A message carries an id of the client's (`messageId`): it is settled only by the gateway's
answer naming it — `ack` once it is recorded (durably), or an `error` refusing it — and
sent again, the same id, after every reconnect until then; the gateway runs an id once
(docs/protocol.md, "Sending a message exactly once"). A send its caller gave up on is never
sent again.

Nothing waits on the gateway without a bound (`connect(timeout=...)`): a request's answer,
connecting and attaching, a message's acknowledgement, the gateway's coming back while a
run streams. Past it: GatewayUnavailable, as for anything that is not an xclaw gateway
speaking its protocol — an answer or frame that is not JSON, not as declared
(xclaw/wire/frames.py, xclaw/wire/http_bodies.py), or over `max_size`. Frames of another session are
not this socket's and are dropped.

When a run has ended is asked of the gateway (`busy` of GET /api/sessions/ID) whenever a
frame may be its last; a `ping` then marks the end of its frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import httpx
import orjson
from pydantic import BaseModel, ValidationError
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from xclaw.agents.definition import AgentDefinition
from xclaw.api.base import (
    Agent,
    Approval,
    Approve,
    Events,
    Session,
    quoted_start,
    refuse_commands,
    within,
)
from xclaw.api.connection import (
    CLOSE_FORBIDDEN_ORIGIN,
    CLOSE_TOO_MANY_ATTEMPTS,
    CLOSE_UNAUTHORIZED,
    PING_S,
    Drop,
    Reconnecting,
)
from xclaw.errors import (
    AgentClosed,
    BadCommand,
    BadStep,
    GatewayUnavailable,
    IrreversibleEffects,
    XclawError,
    from_code,
)
from xclaw.wire.busy import BusyPolicy, check_policy
from xclaw.wire.frames import (
    AckFrame,
    ApprovalRequestFrame,
    BadServerFrame,
    ErrorFrame,
    HistoryFrame,
    HistoryMessage,
    NoticeFrame,
    PongFrame,
    QueuedFrame,
    QueuedMessage,
    ReplyFrame,
    ServerFrame,
    SessionFrame,
    SessionInfo,
    StatusFrame,
    Step,
    StepFrame,
    TreeNode,
    decode_frame,
)
from xclaw.wire.http_bodies import (
    AgentInfo,
    AgentList,
    FireInfo,
    FireList,
    ForkAnswer,
    Health,
    HistoryAnswer,
    HookInfo,
    HookList,
    HookMade,
    QueueAnswer,
    RollbackAnswer,
    RollbackPreview,
    ScheduleInfo,
    ScheduleList,
    SessionList,
    SessionProcesses,
    StepList,
    StepTree,
    ToolInfo,
    ToolList,
    UnqueueAnswer,
)
from xclaw.wire.protocol import MAX_FRAME_BYTES

log = logging.getLogger("xclaw.api")

M = TypeVar("M", bound=BaseModel)

# The backoff, the pings and the close codes are the one reconnect loop's
# (xclaw/api/connection.py), shared with the terminal client.
# The default bound on every wait for the gateway (connect(timeout=...)).
TIMEOUT_S = 30.0
# The largest frame or HTTP answer taken from a gateway (connect(max_size=...)): above a long
# session's history frame, far below what would exhaust memory.
MAX_SIZE = 64 * 1024 * 1024
# What a refused WebSocket handshake or an HTTP error answer without xclaw's body means.
REFUSED_BY_STATUS = {401: "unauthorized", 429: "too_many_attempts"}
# Error codes with which the gateway refuses a run before it starts (docs/protocol.md).
REFUSALS = frozenset(
    {"busy", "config_error", "config_mismatch", "unknown_session", "bad_frame", "bad_command"}
)
# Error codes a run that started ends with, after its `status` Failed (docs/protocol.md).
RUN_FAILURES = frozenset(
    {"llm_error", "max_iterations", "internal_error", "disk_full", "store_error", "config_error"}
    | {"blob_store_lost"}  # the object store lost files the run needed (docs/deploy.md)
)
MAX_TITLE = 200
# How far the gateway's clock may be behind this one's, for the rare catch-up that has no
# step of the run to go by (a resume whose socket dropped before any of its steps came).
CLOCK_SLACK_MS = 2000


def _urls(url: str, token: str | None) -> tuple[str, str, str | None]:
    """`http://host:port/?token=T` (the banner's link), `http://host:port`, `ws://host:port/ws`
    or `host:port` → (http base, ws URL, token)."""
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "ws", "wss"):
        raise ValueError(f"unsupported URL scheme in {url!r}: use http://, https://, ws://, wss://")
    query = parse_qs(parts.query)
    found = query.pop("token", [None])[0]
    secure = scheme in ("https", "wss")
    path = parts.path.rstrip("/").removesuffix("/ws")
    rest = urlencode({k: v[0] for k, v in query.items()})
    http = urlunsplit(("https" if secure else "http", parts.netloc, path, rest, ""))
    ws = urlunsplit(("wss" if secure else "ws", parts.netloc, path + "/ws", rest, ""))
    return http, ws, token or found


def _json(body: bytes, where: str) -> Any:
    """A gateway's JSON; GatewayUnavailable for anything else (orjson: no recursion limit
    to hit, a nesting limit of its own)."""
    try:
        return orjson.loads(body)
    except (ValueError, RecursionError):
        raise GatewayUnavailable(
            f"{where}: the answer is not JSON ({_start_of(body)}): not an xclaw gateway?"
        ) from None


def _start_of(body: bytes) -> str:
    text = body[:80].decode("utf-8", "replace")
    return repr(text + ("…" if len(body) > 80 else ""))


def answer_as(cls: type[M], data: Any, where: str) -> M:
    """An answer read into its declaration (xclaw/wire/http_bodies.py); GatewayUnavailable when
    it is not one."""
    try:
        return cls.model_validate(data)
    except (ValidationError, RecursionError) as e:
        first = e.errors()[0] if isinstance(e, ValidationError) else {"loc": (), "msg": str(e)}
        at = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise GatewayUnavailable(
            f"{where}: not the answer of an xclaw gateway ({at}: {first['msg']})"
        ) from None


class SessionSocket:
    """One WebSocket attached to one session, reconnecting by itself until closed. Frames go
    to `listener` (the run being streamed, if any); `attached` is set after each attach's
    closing `status` frame; `lost` is a future of the connection of the moment, done once it
    is gone."""

    def __init__(self, agent: RemoteAgent, session_id: str) -> None:
        self.agent = agent
        self.session_id = session_id
        self.listener: Callable[[ServerFrame], None] | None = None
        # After an attach: what the gateway said of the session (its closing status frame).
        self.attached = asyncio.Event()
        self.last_attach: StatusFrame | None = None
        self.reconnects = 0  # attaches after the first: the run stream reconciles
        self.attaching = False  # a reconnect frame sent: its frames until `status` with busy
        self.on_reattach: Callable[[StatusFrame], None] | None = None
        # Messages sent beside the run being streamed (`send(..., busy=...)` while it is
        # in flight): their answers (ack, queued, an error naming them), by message id.
        self.answers: dict[str, asyncio.Future[ServerFrame]] = {}
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.lost.set_result(None)  # no connection yet
        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._conn: Reconnecting | None = None
        self._reconnected = False  # the connection was lost and is made again
        self._closed = False
        self._fatal: XclawError | None = None
        self._refused: XclawError | None = None  # the last attach's refusal
        self._why = "not connected yet"  # why the last connection failed, for the error

    async def ensure(self, within: float | None = None) -> None:
        """Connected and attached, waiting through a reconnect up to the agent's timeout (or
        `within` seconds, when less is left of a wait that began earlier):
        GatewayUnavailable."""
        if self._closed:
            raise AgentClosed("this agent is closed; open another with xclaw.connect(...)")
        if self._task is None:
            self._task = asyncio.create_task(self._loop())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.agent.timeout if within is None else within)
        while not self.attached.is_set():
            if self._fatal is not None:
                raise self._fatal
            if self._task.done():
                self._task.result()
                raise AgentClosed("this agent is closed; open another with xclaw.connect(...)")
            left = deadline - loop.time()
            if left <= 0:
                raise GatewayUnavailable(
                    f"{self.agent.ws_url}: no xclaw gateway attached the session within "
                    f"{self.agent.timeout:g} s ({self._why})"
                )
            waiter = asyncio.create_task(self.attached.wait())
            try:
                await asyncio.wait(
                    {waiter, self._task}, timeout=min(left, 1.0), return_when="FIRST_COMPLETED"
                )
            finally:
                waiter.cancel()
        if self._fatal is not None:
            raise self._fatal
        if self._refused is not None:
            refused, self._refused = self._refused, None
            self.attached.clear()
            raise refused

    async def send(
        self, frame: dict[str, Any], within: float | None = None
    ) -> asyncio.Future[None]:
        """A frame, once attached (waiting through a reconnect, within the timeout or
        `within`); the `lost` future of the connection it went on."""
        text = orjson.dumps(frame).decode()
        while True:
            await self.ensure(within)
            ws, lost = self._ws, self.lost
            if ws is None or lost.done():
                await asyncio.sleep(0.01)  # that connection is ending: the next one
                continue
            try:
                async with asyncio.timeout(self.agent.timeout):
                    await ws.send(text)
                return lost
            except ConnectionClosed:
                continue  # the loop sees it too, and connects again
            except TimeoutError:
                raise GatewayUnavailable(
                    f"{self.agent.ws_url}: the gateway took no frame for {self.agent.timeout:g} s"
                ) from None

    async def send_now(self, frame: dict[str, Any]) -> None:
        """A frame on the socket as it is (a re-attach: its answer is awaited by `ensure`)."""
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, TimeoutError):
                async with asyncio.timeout(self.agent.timeout):
                    await ws.send(orjson.dumps(frame).decode())

    async def _loop(self) -> None:
        """The one reconnect loop (xclaw/api/connection.py), attaching this session on each
        connection."""
        agent = self.agent
        self._conn = Reconnecting(
            agent.ws_url,
            agent.token,
            on_open=self._opened,
            on_frame=self._frame,
            on_drop=self._dropped,
            open_timeout=agent.timeout,
            max_size=agent.max_size,
            ping=min(PING_S, agent.timeout),
        )
        if self._closed:
            return
        await self._conn.run()

    async def _opened(self, ws: ClientConnection) -> None:
        self._ws, self.lost = ws, asyncio.get_running_loop().create_future()
        self.attaching = True
        await ws.send(orjson.dumps({"type": "reconnect", "sessionId": self.session_id}).decode())

    def _frame(self, raw: str | bytes) -> None:
        frame = self._decode(raw)
        if frame is None:
            return
        if self.attaching and isinstance(frame, StatusFrame) and frame.busy is not None:
            self.attaching = False
            self.last_attach = frame
            if self._reconnected:
                self._reconnected = False
                self.reconnects += 1
                if self.on_reattach is not None:
                    self.on_reattach(frame)
            self.attached.set()
            return
        if self.attaching and isinstance(frame, SessionFrame | HistoryFrame):
            return  # what the socket attached to: not a run's event
        if self.attaching and isinstance(frame, ErrorFrame) and not frame.message_id:
            # The attach was refused (a malformed id): said to `ensure`.
            self.attaching = False
            self._refused = from_code(frame.code, frame.content)
            self.attached.set()
            return
        mid = getattr(frame, "message_id", None)
        waiter = self.answers.get(mid) if isinstance(mid, str) else None
        if waiter is not None and isinstance(frame, AckFrame | QueuedFrame | ErrorFrame):
            if not waiter.done():
                waiter.set_result(frame)  # a message sent beside the run being streamed
            return
        if self.listener is not None:
            self.listener(frame)

    def _dropped(self, drop: Drop, delay: float) -> bool:
        """The connection ended (or none was made): why, for `ensure`'s error; whether to
        connect again (not when the gateway refused this client for good)."""
        self._ws = None
        self.attached.clear()
        if not self.lost.done():
            self.lost.set_result(None)
        error, code = drop.error, drop.code
        status = drop.refused_status
        if status is not None:
            refused = REFUSED_BY_STATUS.get(status)
            if refused is not None:
                self._fatal = from_code(refused, f"the gateway answered HTTP {status}")
                return False
            self._why = f"the WebSocket was refused with HTTP {status}"
        elif isinstance(error, ConnectionClosed):
            self._why = f"the connection closed: {error}"
        elif error is not None:
            self._why = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            log.info("event=connect_failed url=%s reason=%r", self.agent.ws_url, self._why)
        if code == CLOSE_UNAUTHORIZED:
            self._fatal = from_code("unauthorized", "the gateway refused the access token")
            return False
        if code == CLOSE_FORBIDDEN_ORIGIN:
            self._fatal = from_code("forbidden_origin", "the gateway refused this Origin")
            return False
        if code == CLOSE_TOO_MANY_ATTEMPTS:
            self._fatal = from_code(
                "too_many_attempts", "too many failed sign-ins from this address"
            )
            return False
        if self._closed:
            return False
        self._reconnected = True
        return True

    def _decode(self, raw: str | bytes) -> ServerFrame | None:
        """A frame of this socket's session, typed; None for what is not one (not JSON, not
        as declared, of a type this version does not know, of another session)."""
        try:
            frame = decode_frame(orjson.loads(raw))
        except (ValueError, RecursionError, BadServerFrame) as e:
            log.warning("event=bad_server_frame reason=%r", str(e)[:200])
            return None
        sid = getattr(frame, "session_id", None)
        if frame is not None and sid is not None and sid != self.session_id:
            log.warning("event=foreign_frame type=%s session=%s", frame.type, sid)
            return None
        return frame

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.stop.set()
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


class RemoteEvents(Events):
    """A run on the gateway, through the session's socket (see the module docstring)."""

    def __init__(
        self,
        session: RemoteSession,
        frame: dict[str, Any] | None,
        approve: Approve | None = None,
        *,
        what: str,
        compaction: bool = False,
    ) -> None:
        super().__init__(session.id, approve, what=what)
        self._session = session
        # What starts it: a message (with its messageId, or /compact); None: attaching (a
        # resume).
        self._frame = frame
        self._message_id: str | None = None if frame is None else frame.get("messageId")
        self._compaction = compaction
        # The first step this run wrote (its message, or the first it began): a catch-up
        # after a reconnect gives the steps from there on. None: none seen yet.
        self._first_seq: int | None = None
        self._started_ms = 0
        self._seen: set[tuple[str, str]] = set()  # (step id, status) given already
        self._asked: set[str] = set()  # approval requests given and not answered since
        self._replied = False
        # While the message waits for the gateway's answer (ack, or an error naming it).
        self._settling: asyncio.Future[AckFrame | QueuedFrame | ErrorFrame] | None = None
        self._first: asyncio.Future[ServerFrame] | None = None  # /compact: refused?
        self._early: list[ServerFrame] = []  # frames that came before that answer
        self._running = False  # a run of this stream is known to be in flight
        self._checking: asyncio.Task[None] | None = None
        self._barrier = False  # a ping sent: its pong ends the stream
        self._catching: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        s = self._session
        self._started_ms = int(time.time() * 1000)
        socket = s._socket()
        # One driver: a run in flight refuses a message — one streamed here is known here; one
        # driven for another client, the gateway refuses (`busy`, below) — and a resume has
        # nothing to resume then (asked: one HTTP request a resume, none a message).
        if socket.listener is not None or (self._frame is None and (await s.info()).busy):
            if self._frame is None:
                self._finish()
                return
            if self._frame.get("busy") not in (None, "reject") and self._message_id:
                await self._beside(socket, self._frame)  # this stream's run is in flight
                return
            raise from_code(
                "busy", "a run is in flight for this session; wait for its reply or cancel it"
            )
        if self._frame is not None:
            await socket.ensure()  # attached first: what attaching sends is not this run's
        socket.listener = self._on_frame
        socket.on_reattach = self._reattached
        try:
            if self._frame is None:  # a resume: (re)attaching is what resumes a session
                await s._reattach()
                attach = socket.last_attach
                if attach is None or not attach.busy:
                    self._done()
                    return
            elif self._message_id is None:
                await self._send_command(socket, self._frame)
            else:
                await self._deliver(socket, self._frame)
        except BaseException:
            self._done()
            raise
        self._running = True
        if not self._finished:
            self._watch = asyncio.get_running_loop().create_task(self._watching(socket))

    async def _deliver(self, socket: SessionSocket, frame: dict[str, Any]) -> None:
        """The message sent until the gateway answers for it — again, with the same id, on
        each new connection (the gateway runs an id once) — and that answer taken."""
        agent = self._session._agent
        loop = asyncio.get_running_loop()
        self._settling = answer = loop.create_future()
        # One bound for it all, reconnects included: a gateway that takes the frame and
        # drops the connection every time is not waited for forever.
        deadline = loop.time() + agent.timeout
        while True:
            left = deadline - loop.time()
            if left > 0:
                lost = await socket.send(frame, within=left)
                left = deadline - loop.time()
                await asyncio.wait({answer, lost}, timeout=left, return_when="FIRST_COMPLETED")
            if answer.done():
                break
            if loop.time() >= deadline:
                raise GatewayUnavailable(
                    f"{agent.ws_url}: the gateway did not answer for the message within "
                    f"{agent.timeout:g} s"
                )
        self._settling = None
        early, self._early = self._early, []
        got = answer.result()
        if isinstance(got, ErrorFrame):
            raise from_code(got.code, got.content, session_id=self.session_id)
        self._session._written()
        if isinstance(got, QueuedFrame):  # kept for later: its one event, and the end
            self._push(got)
            self._done()
            return
        self._first_seq = _seq(got.step_id)
        for early_frame in early:
            self._take(early_frame)
        if got.duplicate and socket.last_attach is not None:
            # Recorded before the connection was lost: what its run did meanwhile (or all of
            # it, if it ended) is in the record.
            self._catch(socket.last_attach)

    async def _beside(self, socket: SessionSocket, frame: dict[str, Any]) -> None:
        """A message sent while another stream of this session's runs: its answer is its
        only event (`queued`; an `ack` if that run ended meanwhile: its run is not streamed
        here — Session.wait)."""
        mid = frame["messageId"]
        answer: asyncio.Future[ServerFrame] = asyncio.get_running_loop().create_future()
        socket.answers[mid] = answer
        try:
            await socket.send(frame)
            async with asyncio.timeout(self._session._agent.timeout):
                got = await answer
        except TimeoutError:
            raise GatewayUnavailable(
                f"{self._session._agent.ws_url}: the gateway did not answer for the message "
                f"within {self._session._agent.timeout:g} s"
            ) from None
        finally:
            socket.answers.pop(mid, None)
        if isinstance(got, ErrorFrame):
            raise from_code(got.code, got.content, session_id=self.session_id)
        self._push(got)
        self._finish()

    async def _send_command(self, socket: SessionSocket, frame: dict[str, Any]) -> None:
        """A command's frame (/compact): the first frame after it says whether it runs."""
        agent = self._session._agent
        self._first = first = asyncio.get_running_loop().create_future()
        await socket.send(frame)
        try:
            async with asyncio.timeout(agent.timeout):
                got = await first
        except TimeoutError:
            raise GatewayUnavailable(
                f"{agent.ws_url}: no answer to {frame['content']} within {agent.timeout:g} s"
            ) from None
        finally:
            self._first = None
        early, self._early = self._early, []
        if isinstance(got, ErrorFrame) and got.code in REFUSALS:
            raise from_code(got.code, got.content, session_id=self.session_id)
        for frame_ in (got, *early):
            self._take(frame_)

    def _on_frame(self, frame: ServerFrame) -> None:
        answer = self._settling
        if answer is not None:  # the message waits for its answer
            if self._answers(frame):
                if not answer.done():
                    answer.set_result(frame)  # type: ignore[arg-type]
            else:
                self._early.append(frame)  # in order, after the answer
            return
        if self._first is not None:  # the command is on its way: is it refused?
            if not self._first.done():
                self._first.set_result(frame)
            else:
                self._early.append(frame)
            return
        if not self._finished:
            self._take(frame)

    def _answers(self, frame: ServerFrame) -> bool:
        """The gateway's answer for this stream's message: its ack, an error naming it, or a
        bad_frame (which names no message: the frame could not be read)."""
        if isinstance(frame, AckFrame | QueuedFrame):
            return frame.message_id == self._message_id
        if isinstance(frame, ErrorFrame):
            if frame.message_id is None:
                return frame.code == "bad_frame"
            return frame.message_id == self._message_id
        return False

    def _take(self, frame: ServerFrame) -> None:
        """A live frame: given unless it repeats one given already; and is it the end?"""
        if isinstance(frame, AckFrame | QueuedFrame) or (
            isinstance(frame, ErrorFrame) and frame.message_id
        ):
            return  # the answer for a message (this one's was taken): not a run's event
        if isinstance(frame, PongFrame):
            if self._barrier:
                self._done()
            return
        if isinstance(frame, StepFrame):
            key = (frame.step.id, frame.step.status)
            if key in self._seen:
                return
            self._seen.add(key)
            if self._first_seq is None and (
                frame.step.status == "running" or frame.step.type == "user_input"
            ):
                self._first_seq = frame.step.seq  # (an older step marked interrupted is not)
            if frame.step.status != "running":
                self._asked.discard(frame.step.id)
        elif isinstance(frame, ApprovalRequestFrame):
            if frame.step_id in self._asked:
                return  # asked again on a reconnect: already given, not answered yet
            self._asked.add(frame.step_id)
        elif isinstance(frame, ReplyFrame):
            self._replied = True
        self._push(frame)
        if isinstance(frame, ReplyFrame) or (
            isinstance(frame, ErrorFrame) and frame.code in RUN_FAILURES
        ):
            self._done()  # the last frame of a run (xclaw/runtime/drive.py, outcomes.py)
        elif self._may_end(frame):
            self._check()

    def _may_end(self, frame: ServerFrame) -> bool:
        """A frame after which the run may be over: the gateway is asked (`_ended`). A reply
        and a run's failure are its last frames: no need to ask (`_take` ends there)."""
        if isinstance(frame, NoticeFrame):
            return True
        if isinstance(frame, StatusFrame):
            # A run that just started (busy) is not over: only a status saying the session
            # is idle may be the last frame.
            return self._compaction or frame.busy is False
        return False

    def _check(self) -> None:
        if self._checking is None or self._checking.done():
            self._checking = asyncio.get_running_loop().create_task(self._ended())

    async def _ended(self) -> None:
        """Ask the gateway whether the run is over; when it is, a ping marks the end of its
        frames."""
        try:
            busy = (await self._session.info()).busy
        except GatewayUnavailable:
            return  # the gateway is away: the reconnect says how the run stands
        except XclawError:
            busy = False  # the session is gone (deleted): nothing more will come
        if busy or self._finished:
            return
        self._barrier = True
        with contextlib.suppress(XclawError):
            await self._session._socket().send({"type": "ping"})

    def _reattached(self, attach: StatusFrame) -> None:
        """The socket came back: a message still unanswered is sent again (`_deliver`); a
        command's answer is the record's; what a run committed meanwhile is read from it."""
        if self._settling is not None:
            return
        if self._first is not None and not self._first.done():
            self._first.set_result(attach)  # whether the command got there: the record says
            return
        if self._running:
            self._catch(attach)

    def _catch(self, attach: StatusFrame) -> None:
        if not self._finished:
            task = asyncio.get_running_loop().create_task(self._catch_up(attach))
            self._catching.add(task)
            task.add_done_callback(self._catching.discard)

    async def _catch_up(self, attach: StatusFrame) -> None:
        s = self._session
        try:
            steps = await s.steps()
        except XclawError:
            steps = []
        first = self._first_seq
        # The steps of this run: from its first, up to the next message (another run's).
        later = [
            st.seq
            for st in steps
            if first is not None and st.seq > first and st.type == "user_input"
        ]
        end = min(later) if later else None
        ours = [
            st
            for st in steps
            if (
                first <= st.seq and (end is None or st.seq < end)
                if first is not None  # else: the socket dropped before any of its steps came
                else st.start_time >= self._started_ms - CLOCK_SLACK_MS
            )
        ]
        for step in ours:
            if (step.id, step.status) not in self._seen:
                self._take(StepFrame.model_validate({"sessionId": s.id, "step": step.wire()}))
        if (attach.busy and end is None) or self._finished:
            return
        # The run ended while the socket was down: its end, from the record.
        text = None if self._replied else _final_answer(ours)
        if text is not None and (end is not None or attach.status == "Success"):
            self._replied = True
            self._push(ReplyFrame.model_validate({"sessionId": s.id, "content": text}))
        else:
            self._push(attach)
        self._done()

    async def _watching(self, socket: SessionSocket) -> None:
        """While the run streams: a socket lost and not attached again within the timeout
        ends the stream with GatewayUnavailable (the run may go on in the gateway: resume
        it later)."""
        while not self._finished:
            await asyncio.shield(socket.lost)  # (shared: cancelling this must not end it)
            if self._finished:
                return
            try:
                await socket.ensure()
            except XclawError as e:
                self._done(e)
                return

    def _done(self, error: XclawError | None = None) -> None:
        socket = self._session._sock
        if socket is not None and socket.listener == self._on_frame:
            socket.listener = None
            socket.on_reattach = None
        watch = self._watch
        if watch is not None and watch is not asyncio.current_task():
            watch.cancel()
        if error is not None:
            self._fail(error)
        self._finish()

    async def _stop(self) -> None:
        running = self._running
        self._done()
        # A message never answered is not sent again, and nothing of it is known to run.
        if running:
            await self._session._cancel_now()

    async def _answer(self, step_id: str, answer: Approval) -> None:
        await self._session.approve(
            step_id, answer.approved, message=answer.message, input=answer.input
        )
        self._asked.discard(step_id)


def _seq(step_id: str) -> int:
    """5 of `s0005`."""
    return int(step_id.rsplit(":", 1)[-1].lstrip("s") or 0)


def _new_id() -> str:
    """As random as the gateway's own ids, and as valid: starting with a letter or digit."""
    while True:
        sid = secrets.token_urlsafe(16)
        if sid[0].isalnum():
            return sid


def _final_answer(steps: list[Step]) -> str | None:
    """The text of the last main-agent llm_call that called no tool: a turn's answer."""
    for step in reversed(steps):
        if step.type == "llm_call" and step.agent == "main" and step.status == "completed":
            out = step.output if isinstance(step.output, dict) else {}
            if not out.get("tool_calls"):
                text = out.get("text")
                return text if isinstance(text, str) else None
            return None
    return None


class RemoteSession(Session):
    def __init__(
        self,
        agent: RemoteAgent,
        session_id: str,
        title: str = "",
        *,
        unwritten: bool = False,
        runs: str | None = None,
    ) -> None:
        super().__init__(session_id, title)
        self._agent = agent
        self._sock: SessionSocket | None = None
        # A new session without a title: the gateway writes it with its first message.
        self._new = unwritten
        # The declared agent a new session runs, named in its first message (docs/agents.md).
        self._runs = runs

    @property
    def agent(self) -> RemoteAgent:
        return self._agent

    def _socket(self) -> SessionSocket:
        if self._sock is None:
            self._sock = self._agent._socket(self.id)
        return self._sock

    def _written(self) -> None:
        self._new = False
        self._agent._unwritten.discard(self.id)

    def _not_written(self) -> bool:
        return self._new

    async def _write_new(self) -> None:
        if not self._new:
            return
        # Written by the gateway under this id, as the caller's (an id written meanwhile by
        # this person is simply theirs: POST /api/sessions with sessionId).
        body: dict[str, Any] = {"sessionId": self.id}
        if self._runs is not None:
            body["agent"] = self._runs
        await self._agent._http("POST", "/sessions", json=body)
        self._written()

    async def _reattach(self) -> None:
        """Attach (again) now: what resumes an interrupted session on the gateway."""
        socket = self._socket()
        if socket.last_attach is None:
            await socket.ensure()
            return
        await socket.ensure()
        socket.attached.clear()
        socket.attaching = True
        await socket.send_now({"type": "reconnect", "sessionId": self.id})
        await socket.ensure()

    # --- a run --------------------------------------------------------------------------------
    def send(
        self,
        text: str,
        *,
        approve: Approve | None = None,
        agent: Agent | str | None = None,
        busy: BusyPolicy | None = None,
    ) -> Events:
        refuse_commands(text)
        frame = {"type": "message", "sessionId": self.id, "content": text, "messageId": _new_id()}
        if busy is not None:
            frame["busy"] = check_policy(busy)
        named = (
            self._agent._named(agent) if agent is not None else (self._runs if self._new else None)
        )
        if named is not None:
            frame["agent"] = named
        size = len(orjson.dumps(frame))
        if size > MAX_FRAME_BYTES:
            raise BadCommand(
                f"a message is at most {MAX_FRAME_BYTES:,} bytes on the wire (this one: {size:,})"
            )
        events = RemoteEvents(self, frame, approve, what=f"session.send({quoted_start(text)})")
        events._load = self._agent._load_output
        return events

    async def queued(self) -> list[QueuedMessage]:
        try:
            found = await self._agent._as(QueueAnswer, "GET", f"/sessions/{self.id}/queue")
        except XclawError as e:
            if e.code == "unknown_session" and self._new:
                return []
            raise
        return found.queued

    async def unqueue(self, message_id: str) -> bool:
        path = f"/sessions/{self.id}/queue/{quote(message_id, safe='')}"
        return (await self._agent._as(UnqueueAnswer, "DELETE", path)).cancelled

    def resume(self, *, approve: Approve | None = None, failed: bool = False) -> Events:
        if failed:
            raise BadCommand(
                "continuing a Failed session is a decision for the process that drives it: "
                "send a message, or use xclaw.open (resume(failed=True)) or `xclaw run "
                "--session ID`"
            )
        return RemoteEvents(self, None, approve, what="session.resume()")

    def compact(self) -> Events:
        frame = {"type": "message", "sessionId": self.id, "content": "/compact"}
        return RemoteEvents(self, frame, what="session.compact()", compaction=True)

    async def approve(
        self,
        step_id: str,
        approve: bool = True,
        *,
        message: str | None = None,
        input: Mapping[str, Any] | None = None,
        client: str | None = None,
    ) -> None:
        body: dict[str, Any] = {"approve": approve}
        if message is not None:
            body["message"] = message
        if input is not None:
            body["input"] = dict(input)
        if client is not None:
            body["client"] = client  # recorded as the client the person answered through
        try:
            await self._agent._http("POST", f"/sessions/{self.id}/approvals/{step_id}", json=body)
        except BadStep:
            raise BadStep.not_waiting(step_id, self.id) from None

    async def cancel(self) -> bool:
        if not (await self.info()).busy:
            return False
        await self._socket().send({"type": "cancel", "sessionId": self.id})
        await self.wait()
        return True

    async def _cancel_now(self) -> None:
        """Stop the run in flight and wait for it, each within the agent's timeout: a cancel
        that cannot be sent now is not sent later."""
        await self._socket().send({"type": "cancel", "sessionId": self.id})
        await self.wait(self._agent.timeout)

    async def wait(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await within(timeout, self._until_idle(), f"the run of session {self.id}")

    async def _until_idle(self) -> None:
        delay = 0.02
        while True:
            try:
                if not (await self.info()).busy:
                    return
            except XclawError as e:
                if e.code == "unknown_session":
                    return  # deleted: nothing runs
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    # --- the record ---------------------------------------------------------------------------
    async def info(self) -> SessionInfo:
        try:
            found = await self._agent._as(SessionInfo, "GET", f"/sessions/{self.id}")
        except XclawError as e:
            if e.code != "unknown_session":
                raise
            return await self._unwritten()
        self._title = found.title
        return found

    async def _unwritten(self) -> SessionInfo:
        """A new session no message was sent to yet (only this object knows of it)."""
        if not self._new:
            raise from_code("unknown_session", f"no session with id {self.id!r}")
        return SessionInfo.model_validate(
            {
                "sessionId": self.id,
                "title": "",
                "status": "Init",
                "createdAt": 0,
                "updatedAt": 0,
                "isForked": False,
                "parentSessionId": None,
                "forkedFromSeq": None,
                "forkedFrom": None,
                "awaitingInput": False,
                "metadata": {},
                "busy": False,
                "state": "new",
                "stateText": "New",
            }
        )

    async def steps(self, n: int | None = None) -> list[Step]:
        try:
            found = await self._agent._as(
                StepList, "GET", f"/sessions/{self.id}/steps", params={"n": 0 if n is None else n}
            )
        except XclawError as e:
            if e.code == "unknown_session" and self._new:
                return []
            raise
        return found.steps

    async def trace(self) -> list[TreeNode]:
        return (await self._agent._as(StepTree, "GET", f"/sessions/{self.id}/tree")).tree

    async def history(self) -> list[HistoryMessage]:
        try:
            found = await self._agent._as(HistoryAnswer, "GET", f"/sessions/{self.id}/history")
        except XclawError as e:
            if e.code == "unknown_session" and self._new:
                return []
            raise
        return found.messages

    async def rename(self, title: str) -> None:
        clean = " ".join(title.split())
        if len(clean) > MAX_TITLE:
            raise BadCommand(
                f"a title has at most {MAX_TITLE} characters (this one has {len(clean)})"
            )
        if self._new and (await self.info()).state == "new" and not (await self.steps()):
            # Naming it is the first thing said to it: written now, under its id.
            await self._socket().send(
                {"type": "message", "sessionId": self.id, "content": f"/title {clean}"}
            )
            self._written()
            await self._until_written()
        found = await self._agent._as(
            SessionInfo, "PATCH", f"/sessions/{self.id}", json={"title": clean}
        )
        self._title = found.title

    async def _until_written(self) -> None:
        for _ in range(200):
            try:
                await self._agent._http("GET", f"/sessions/{self.id}")
                return
            except XclawError as e:
                if e.code != "unknown_session":
                    raise
            await asyncio.sleep(0.025)

    async def rollback(
        self, step_id: str, *, accept_irreversible: bool = False, retry: bool = False
    ) -> RollbackAnswer:
        body: dict[str, Any] = {"stepId": step_id}
        if accept_irreversible:
            body["acceptIrreversible"] = True
        if retry:
            body["retry"] = True
        return await self._agent._as(
            RollbackAnswer, "POST", f"/sessions/{self.id}/rollback", json=body
        )

    async def processes(self) -> SessionProcesses:
        return await self._agent._as(SessionProcesses, "GET", f"/sessions/{self.id}/processes")

    async def rollback_preview(self, step_id: str) -> RollbackPreview:
        path = f"/sessions/{self.id}/rollback/{quote(step_id, safe='')}"
        return RollbackPreview.model_validate(await self._agent._http("GET", path))

    async def abandon_rollback(self) -> None:
        await self._agent._http("POST", f"/sessions/{self.id}/rollback/abandon")

    async def fork(self, step_id: str, title: str | None = None) -> RemoteSession:
        body: dict[str, Any] = {"stepId": step_id}
        if title is not None:
            body["title"] = title
        made = await self._agent._as(ForkAnswer, "POST", f"/sessions/{self.id}/fork", json=body)
        return RemoteSession(self._agent, made.session.session_id, made.session.title)

    async def delete(self) -> None:
        await self._agent._http("DELETE", f"/sessions/{self.id}")


class RemoteAgent(Agent):
    """Sessions of a running gateway (see the module docstring)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = TIMEOUT_S,
        max_size: int = MAX_SIZE,
    ) -> None:
        self.http_url, self.ws_url, self.token = _urls(url, token)
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = float(timeout)
        self.max_size = max_size
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._client = httpx.AsyncClient(
            base_url=self.http_url + "/api", headers=headers, timeout=timeout
        )
        self._sockets: dict[str, SessionSocket] = {}
        self._closed = False
        # New sessions handed out without a title, not written yet: found by their id.
        self._unwritten: set[str] = set()

    def _socket(self, session_id: str) -> SessionSocket:
        if self._closed:
            raise AgentClosed("this agent is closed; open another with xclaw.connect(...)")
        socket = self._sockets.get(session_id)
        if socket is None:
            socket = self._sockets[session_id] = SessionSocket(self, session_id)
        return socket

    async def _http(self, method: str, path: str, **kwargs: Any) -> Any:
        """An API call's JSON answer, within the timeout and the size limit; its error answer
        raised as the error its code names; GatewayUnavailable for no answer, or one that is
        not the gateway's."""
        if self._closed:
            raise AgentClosed("this agent is closed; open another with xclaw.connect(...)")
        where = f"{method} {self.http_url}/api{path}"
        try:
            async with asyncio.timeout(self.timeout):
                async with self._client.stream(method, path, **kwargs) as r:
                    body = await self._body(r, where)
        except TimeoutError:
            raise GatewayUnavailable(f"{where}: no answer within {self.timeout:g} s") from None
        except httpx.HTTPError as e:
            why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise GatewayUnavailable(f"{where}: {why}") from None
        status = r.status_code
        if status >= 400:
            raise self._refusal(status, body, where)
        if status == 204:
            return None
        if status >= 300:
            raise GatewayUnavailable(f"{where}: HTTP {status}, not an answer of an xclaw gateway")
        return _json(body, where)

    async def _body(self, r: httpx.Response, where: str) -> bytes:
        """The answer's bytes, refused past max_size before they are all read."""
        declared = r.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_size:
            raise GatewayUnavailable(
                f"{where}: an answer of {int(declared):,} bytes, over the limit of "
                f"{self.max_size:,} (connect(max_size=...))"
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in r.aiter_bytes():
            size += len(chunk)
            if size > self.max_size:
                raise GatewayUnavailable(
                    f"{where}: an answer over the limit of {self.max_size:,} bytes "
                    "(connect(max_size=...))"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _refusal(self, status: int, body: bytes, where: str) -> XclawError:
        """An HTTP error answer as the error its code names (xclaw's `{"code","error"}`), or
        as its status says when it has none (401, 429); else not the gateway's."""
        try:
            data = orjson.loads(body)
            code, text = str(data["code"]), str(data["error"])
        except (ValueError, RecursionError, KeyError, TypeError):
            refused = REFUSED_BY_STATUS.get(status)
            if refused is not None:
                return from_code(refused, f"{where}: HTTP {status}")
            return GatewayUnavailable(
                f"{where}: HTTP {status} ({_start_of(body)}), not an answer of an xclaw gateway"
            )
        error = from_code(code, text)
        effects = data.get("effects")  # irreversible_effects: what the rollback would leave
        if isinstance(error, IrreversibleEffects) and isinstance(effects, dict):
            error.effects = effects
        return error

    async def _as(self, cls: type[M], method: str, path: str, **kwargs: Any) -> M:
        """An API call's answer read into its declaration."""
        return answer_as(cls, await self._http(method, path, **kwargs), f"{method} /api{path}")

    async def check(self) -> None:
        """The gateway answers, as one, and takes the token (Unauthorized,
        GatewayUnavailable)."""
        await self._as(Health, "GET", "/health")

    async def new_session(
        self,
        title: str | None = None,
        *,
        agent: Agent | str | None = None,
        workspace: str | Path | None = None,
    ) -> RemoteSession:
        if workspace is not None:
            raise BadCommand(
                "a gateway's sessions work in the gateway's own workspaces: a directory of "
                "your own (workspace=) is for xclaw.open"
            )
        named = self._named(agent) if agent is not None else self._runs
        if title is None:
            # Written by the gateway with its first message, under this id (docs/protocol.md:
            # a client may bring its own; this one is as random as the gateway's).
            fresh = RemoteSession(self, _new_id(), unwritten=True, runs=named)
            self._unwritten.add(fresh.id)
            return fresh
        body = {"title": title, **({"agent": named} if named else {})}
        made = await self._as(SessionInfo, "POST", "/sessions", json=body)
        return RemoteSession(self, made.session_id, made.title)

    # --- declared agents (docs/agents.md) ---------------------------------------------------
    # The agent new sessions run (None: the gateway's default), and definitions this program
    # gave, whose structured answers it reads into their types.
    _runs: str | None = None
    _known: dict[str, AgentDefinition] | None = None

    @property
    def name(self) -> str:
        return self._runs or super().name

    def _named(self, agent: Agent | str) -> str:
        if isinstance(agent, str):
            return agent
        self._known = {**(self._known or {}), agent.name: agent.definition}
        return agent.name

    def _load_output(self, agent: str | None, value: Any) -> Any:
        definition = (self._known or {}).get(agent or "")
        if definition is None or definition.output is None:
            return value
        try:
            return definition.output.load(value)
        except ValueError:
            return value

    async def agents(self) -> list[AgentInfo]:
        return AgentList.model_validate(await self._http("GET", "/agents")).agents

    async def _choose(self, agent: Agent | str) -> None:
        """The agent new sessions run: declared by the gateway (UnknownAgent), and — given
        as a definition — the same definition (AgentMismatch: the gateway runs its own)."""
        from xclaw.errors import AgentMismatch, UnknownAgent

        name = self._named(agent)
        served = {a.name: a for a in await self.agents()}
        if name not in served:
            raise UnknownAgent(
                f"the gateway declares no agent {name!r} (it has: {', '.join(served)})"
            )
        if not isinstance(agent, str) and served[name].digest != agent.digest:
            raise AgentMismatch(
                f"the gateway's agent {name!r} has definition {served[name].digest}, this "
                f"program's {agent.digest}: the gateway runs its own (xclaw.yaml's agents:)"
            )
        self._runs = name

    async def session(self, ref: str) -> RemoteSession:
        try:
            found = await self._as(SessionInfo, "GET", f"/sessions/{quote(ref, safe='')}")
            return RemoteSession(self, found.session_id, found.title)
        except XclawError as e:
            if e.code != "unknown_session":
                raise
        listed = (
            await self._as(SessionList, "GET", "/sessions", params={"prefix": ref, "limit": 10_000})
        ).sessions
        if len(listed) == 1:
            return RemoteSession(self, listed[0].session_id, listed[0].title)
        if not listed:
            if ref in self._unwritten:  # handed out by new_session, nothing said to it yet
                return RemoteSession(self, ref, unwritten=True)
            raise from_code("unknown_session", f"no session with id {ref!r}", session_id=ref)
        from xclaw.errors import AmbiguousSession

        raise AmbiguousSession(ref, [s.session_id for s in listed])

    async def sessions(
        self, *, limit: int = 100, search: str | None = None, state: str | None = None
    ) -> list[SessionInfo]:
        params: dict[str, Any] = {"limit": limit}
        if search:
            params["q"] = search
        if state:
            params["state"] = state
        return (await self._as(SessionList, "GET", "/sessions", params=params)).sessions

    async def tools(self) -> list[ToolInfo]:
        return (await self._as(ToolList, "GET", "/tools")).tools

    # --- schedules and webhooks: /api/schedules, /api/hooks (docs/schedules.md) -------------
    async def _add_schedule(
        self,
        session_id: str,
        message: str,
        *,
        cron: str | None,
        every: str | None,
        at: str | None,
        tz: str,
        catch_up: str,
        fork: bool,
    ) -> ScheduleInfo:
        body: dict[str, Any] = {
            "message": message,
            "catchUp": catch_up,
            "tz": tz,
            ("forkOf" if fork else "sessionId"): session_id,
        }
        for key, value in (("cron", cron), ("every", every), ("at", at)):
            if value:
                body[key] = value
        return await self._as(ScheduleInfo, "POST", "/schedules", json=body)

    async def schedules(self) -> list[ScheduleInfo]:
        return (await self._as(ScheduleList, "GET", "/schedules")).schedules

    def _schedule_path(self, schedule_id: str) -> str:
        return f"/schedules/{quote(schedule_id, safe='')}"

    async def schedule(self, schedule_id: str) -> ScheduleInfo:
        return await self._as(ScheduleInfo, "GET", self._schedule_path(schedule_id))

    async def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        return await self._as(ScheduleInfo, "POST", self._schedule_path(schedule_id) + "/pause")

    async def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        return await self._as(ScheduleInfo, "POST", self._schedule_path(schedule_id) + "/resume")

    async def remove_schedule(self, schedule_id: str) -> None:
        await self._http("DELETE", self._schedule_path(schedule_id))

    async def schedule_fires(self, schedule_id: str) -> list[FireInfo]:
        path = self._schedule_path(schedule_id) + "/fires"
        return (await self._as(FireList, "GET", path)).fires

    async def _add_hook(self, session_id: str, name: str, template: str) -> HookMade:
        body = {"name": name, "sessionId": session_id, "template": template}
        return await self._as(HookMade, "POST", "/hooks", json=body)

    async def hooks(self) -> list[HookInfo]:
        return (await self._as(HookList, "GET", "/hooks")).hooks

    async def hook_fires(self, name: str) -> list[FireInfo]:
        return (await self._as(FireList, "GET", f"/hooks/{quote(name, safe='')}/fires")).fires

    async def remove_hook(self, name: str) -> None:
        await self._http("DELETE", f"/hooks/{quote(name, safe='')}")

    async def close(self) -> None:
        if self._closed:
            return
        sockets, self._sockets = list(self._sockets.values()), {}
        self._closed = True
        for socket in sockets:
            await socket.close()
        await self._client.aclose()

    async def __aenter__(self) -> RemoteAgent:
        return self


class Connecting:
    """What `xclaw.connect(...)` returns: awaitable, and an async context manager."""

    def __init__(
        self,
        url: str,
        token: str | None,
        timeout: float,
        max_size: int,
        agent: Agent | str | None = None,
    ) -> None:
        self._url = url
        self._token = token
        self._timeout = timeout
        self._max_size = max_size
        self._agent: RemoteAgent | None = None
        self._runs = agent

    async def _open(self) -> RemoteAgent:
        agent = RemoteAgent(self._url, self._token, timeout=self._timeout, max_size=self._max_size)
        try:
            await agent.check()
            if self._runs is not None:
                await agent._choose(self._runs)
        except BaseException:
            await agent.close()
            raise
        self._agent = agent
        return agent

    def __await__(self) -> Generator[Any, None, RemoteAgent]:
        return self._open().__await__()

    async def __aenter__(self) -> RemoteAgent:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        if self._agent is not None:
            await self._agent.close()


def connect(
    url: str,
    *,
    token: str | None = None,
    timeout: float = TIMEOUT_S,
    max_size: int = MAX_SIZE,
    agent: Agent | str | None = None,
) -> Connecting:
    """An agent of the gateway at `url` (`http://127.0.0.1:3000`, or the `?token=` link its
    banner prints): the same interface as xclaw.open, through its WebSocket and HTTP API.
    `token`: the gateway's access token (XCLAW_TOKEN, or `$XCLAW_HOME/token` on its
    machine), unless the URL carries it. Unauthorized when it is refused. `agent`: the
    declared agent its new sessions run (the gateway's xclaw.yaml declares it).

    `timeout`: how long any one wait on the gateway may last, in seconds — a request's
    answer, connecting and attaching, a message's acknowledgement, the gateway coming back
    while a run streams; past it, GatewayUnavailable. `max_size`: the largest frame or
    answer taken from it, in bytes (GatewayUnavailable above)."""
    return Connecting(url, token, timeout, max_size, agent)


__all__ = ["RemoteAgent", "RemoteSession", "connect"]
