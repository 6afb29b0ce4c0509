"""The Python API through a running gateway: `xclaw.connect(url, token=...)` gives the same
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

When a run has ended is asked of the gateway (`busy` of GET /api/sessions/ID) whenever a
frame may be its last; a `ping` then marks the end of its frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import httpx
import orjson
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from xclaw.api.base import Agent, Approve, Events, Session, refuse_commands
from xclaw.errors import BadCommand, BadStep, XclawError, from_code
from xclaw.frames import (
    ApprovalRequestFrame,
    BadServerFrame,
    ErrorFrame,
    HistoryFrame,
    HistoryMessage,
    NoticeFrame,
    PongFrame,
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
from xclaw.http_bodies import (
    ForkAnswer,
    HistoryAnswer,
    RollbackAnswer,
    SessionList,
    StepList,
    StepTree,
    ToolInfo,
    ToolList,
)

log = logging.getLogger("xclaw.api")

BACKOFF_START_S = 0.2
BACKOFF_MAX_S = 5.0
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
# Error codes with which the gateway refuses a run before it starts (docs/protocol.md).
REFUSALS = frozenset(
    {"busy", "config_error", "config_mismatch", "unknown_session", "bad_frame", "bad_command"}
)
# Error codes a run that started ends with, after its `status` Failed (docs/protocol.md).
RUN_FAILURES = frozenset(
    {"llm_error", "max_iterations", "internal_error", "disk_full", "store_error", "config_error"}
)
MAX_TITLE = 200
# How far the gateway's clock may be behind this one's, for the rare catch-up that has no
# step of the run to go by.
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


class SessionSocket:
    """One WebSocket attached to one session, reconnecting by itself until closed. Frames go
    to `listener` (the run being streamed, if any); `attached` is set after each attach's
    closing `status` frame."""

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
        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._fatal: XclawError | None = None
        self._refused: XclawError | None = None  # the last attach's refusal

    async def ensure(self) -> None:
        """Connected and attached (the first time: waits for it)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop())
        while not self.attached.is_set():
            if self._fatal is not None:
                raise self._fatal
            if self._task.done():
                self._task.result()
            waiter = asyncio.create_task(self.attached.wait())
            await asyncio.wait(
                {waiter, self._task}, timeout=1.0, return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
        if self._fatal is not None:
            raise self._fatal
        if self._refused is not None:
            refused, self._refused = self._refused, None
            self.attached.clear()
            raise refused

    async def send(self, frame: dict[str, Any]) -> None:
        """A frame, once connected (waiting through a reconnect)."""
        while True:
            await self.ensure()
            ws = self._ws
            if ws is None:
                self.attached.clear()
                continue
            try:
                await ws.send(json.dumps(frame))
                return
            except ConnectionClosed:
                self.attached.clear()

    async def send_now(self, frame: dict[str, Any]) -> None:
        """A frame on the socket as it is (a re-attach: its answer is awaited by `ensure`)."""
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send(json.dumps(frame))

    async def _loop(self) -> None:
        delay = BACKOFF_START_S
        headers = {"Authorization": f"Bearer {self.agent.token}"} if self.agent.token else {}
        reconnected = False  # the connection was lost and is made again
        while not self._closed:
            try:
                async with ws_connect(
                    self.agent.ws_url,
                    additional_headers=headers,
                    open_timeout=10,
                    max_size=None,
                    ping_interval=20,
                    ping_timeout=20,
                ) as ws:
                    self._ws = ws
                    delay = BACKOFF_START_S
                    self.attaching = True
                    await ws.send(json.dumps({"type": "reconnect", "sessionId": self.session_id}))
                    async for raw in ws:
                        frame = self._decode(raw)
                        if frame is None:
                            continue
                        if (
                            self.attaching
                            and isinstance(frame, StatusFrame)
                            and frame.busy is not None
                        ):
                            self.attaching = False
                            self.last_attach = frame
                            if reconnected:
                                reconnected = False
                                self.reconnects += 1
                                if self.on_reattach is not None:
                                    self.on_reattach(frame)
                            self.attached.set()
                            continue
                        if self.attaching and isinstance(frame, SessionFrame | HistoryFrame):
                            continue  # what the socket attached to: not a run's event
                        if self.attaching and isinstance(frame, ErrorFrame):
                            # The attach was refused (a malformed id): said to `ensure`.
                            self.attaching = False
                            self._refused = from_code(frame.code, frame.content)
                            self.attached.set()
                            continue
                        if self.listener is not None:
                            self.listener(frame)
                    code = ws.close_code
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd else None
            except (OSError, InvalidHandshake, InvalidStatus, TimeoutError) as e:
                log.info("event=connect_failed url=%s reason=%r", self.agent.ws_url, str(e))
                code = None
            finally:
                self._ws = None
                self.attached.clear()
            if code == CLOSE_UNAUTHORIZED:
                self._fatal = from_code("unauthorized", "the gateway refused the access token")
                return
            if code == CLOSE_FORBIDDEN_ORIGIN:
                self._fatal = from_code("forbidden_origin", "the gateway refused this Origin")
                return
            if self._closed:
                return
            reconnected = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    def _decode(self, raw: str | bytes) -> ServerFrame | None:
        try:
            return decode_frame(orjson.loads(raw))
        except (ValueError, BadServerFrame) as e:
            log.warning("event=bad_server_frame reason=%r", str(e))
            return None

    async def close(self) -> None:
        self._closed = True
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
        compaction: bool = False,
    ) -> None:
        super().__init__(session.id, approve)
        self._session = session
        self._frame = frame  # what starts it: a message; None: attaching (a resume)
        self._compaction = compaction
        # The first step this run wrote (its message, or the first it began): a catch-up
        # after a reconnect gives the steps from there on. None: none seen yet.
        self._first_seq: int | None = None
        self._started_ms = 0
        self._seen: set[tuple[str, str]] = set()  # (step id, status) given already
        self._asked: set[str] = set()  # approval requests given and not answered since
        self._answered: set[str] = set()
        self._replied = False
        self._first: asyncio.Future[ServerFrame] | None = None
        self._checking: asyncio.Task[None] | None = None
        self._barrier = False  # a ping sent: its pong ends the stream
        self._catching: set[asyncio.Task[None]] = set()
        self._early: list[ServerFrame] = []

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
            raise from_code(
                "busy", "a run is in flight for this session; wait for its reply or cancel it"
            )
        if self._frame is not None:
            await socket.ensure()  # attached first: what attaching sends is not this run's
        socket.listener = self._on_frame
        socket.on_reattach = self._reattached
        if self._frame is None:  # a resume: (re)attaching is what resumes a session
            await s._reattach()
            attach = socket.last_attach
            if attach is None or not attach.busy:
                self._done()
            return
        self._first = asyncio.get_running_loop().create_future()
        await socket.send(self._frame)
        first = await self._first
        self._first = None
        early, self._early = self._early, []
        if isinstance(first, ErrorFrame) and first.code in REFUSALS:
            self._done()
            raise from_code(first.code, first.content, session_id=s.id)
        for frame in (first, *early):
            self._take(frame)

    def _on_frame(self, frame: ServerFrame) -> None:
        if self._first is not None:  # the message is on its way: is it refused?
            if not self._first.done():
                self._first.set_result(frame)
            else:
                self._early.append(frame)  # after the first, in order
            return
        if not self._finished:
            self._take(frame)

    def _take(self, frame: ServerFrame) -> None:
        """A live frame: given unless it repeats one given already; and is it the end?"""
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
        except XclawError:
            busy = False  # the session is gone (deleted): nothing more will come
        except (httpx.HTTPError, OSError):
            return  # the gateway is away: the reconnect says how the run stands
        if busy or self._finished:
            return
        self._barrier = True
        with contextlib.suppress(XclawError):
            await self._session._socket().send({"type": "ping"})

    def _reattached(self, attach: StatusFrame) -> None:
        """The socket came back: what was committed meanwhile, from the record."""
        if self._first is not None and not self._first.done():
            self._first.set_result(attach)  # whether the message got there: the record says
        if not self._finished:
            task = asyncio.get_running_loop().create_task(self._catch_up(attach))
            self._catching.add(task)
            task.add_done_callback(self._catching.discard)

    async def _catch_up(self, attach: StatusFrame) -> None:
        s = self._session
        try:
            steps = await s.steps()
        except (XclawError, httpx.HTTPError, OSError):
            steps = []
        for step in steps:
            if (step.id, step.status) in self._seen:
                continue
            if self._first_seq is not None:
                ours = step.seq >= self._first_seq
            else:  # the socket dropped before any of its steps came: by when it began
                ours = step.start_time >= self._started_ms - CLOCK_SLACK_MS
            if ours:
                self._take(StepFrame.model_validate({"sessionId": s.id, "step": step.wire()}))
        if attach.busy or self._finished:
            return
        # The run ended while the socket was down: its end, from the record.
        if not self._replied and attach.status == "Success":
            text = _final_answer(steps)
            if text is not None:
                self._replied = True
                self._push(ReplyFrame.model_validate({"sessionId": s.id, "content": text}))
        else:
            self._push(attach)
        self._done()

    def _done(self) -> None:
        socket = self._session._sock
        if socket is not None and socket.listener == self._on_frame:
            socket.listener = None
            socket.on_reattach = None
        self._finish()

    def _stop(self) -> None:
        task = asyncio.get_running_loop().create_task(self._session._send_cancel())
        background = self._session._agent._background
        background.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(background.discard)
        self._done()

    async def _answer(self, step_id: str, approve: bool) -> None:
        await self._session.approve(step_id, approve)
        self._asked.discard(step_id)


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
        self, agent: RemoteAgent, session_id: str, title: str = "", *, unwritten: bool = False
    ) -> None:
        super().__init__(session_id, title)
        self._agent = agent
        self._sock: SessionSocket | None = None
        # A new session without a title: the gateway writes it with its first message.
        self._new = unwritten

    @property
    def agent(self) -> RemoteAgent:
        return self._agent

    def _socket(self) -> SessionSocket:
        if self._sock is None:
            self._sock = self._agent._socket(self.id)
        return self._sock

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
    def send(self, text: str, *, approve: Approve | None = None) -> Events:
        refuse_commands(text)
        frame = {"type": "message", "sessionId": self.id, "content": text}
        return RemoteEvents(self, frame, approve)

    def resume(self, *, approve: Approve | None = None, failed: bool = False) -> Events:
        if failed:
            raise BadCommand(
                "continuing a Failed session is a decision for the process that drives it: "
                "send a message, or use xclaw.open (resume(failed=True)) or `xclaw run "
                "--session ID`"
            )
        return RemoteEvents(self, None, approve)

    def compact(self) -> Events:
        frame = {"type": "message", "sessionId": self.id, "content": "/compact"}
        return RemoteEvents(self, frame, compaction=True)

    async def approve(
        self, step_id: str, approve: bool = True, *, client: str | None = None
    ) -> None:
        body: dict[str, Any] = {"approve": approve}
        if client is not None:
            body["client"] = client  # recorded as the client the person answered through
        try:
            await self._agent._http("POST", f"/sessions/{self.id}/approvals/{step_id}", json=body)
        except BadStep:
            raise BadStep.not_waiting(step_id, self.id) from None

    async def cancel(self) -> bool:
        if not (await self.info()).busy:
            return False
        await self._send_cancel()
        await self.wait()
        return True

    async def _send_cancel(self) -> None:
        await self._socket().send({"type": "cancel", "sessionId": self.id})

    async def wait(self) -> None:
        delay = 0.02
        while True:
            try:
                if not (await self.info()).busy:
                    return
            except XclawError:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    # --- the record ---------------------------------------------------------------------------
    async def info(self) -> SessionInfo:
        try:
            data = await self._agent._http("GET", f"/sessions/{self.id}")
        except XclawError as e:
            if e.code != "unknown_session":
                raise
            return await self._unwritten()
        found = SessionInfo.model_validate(data)
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
            data = await self._agent._http(
                "GET", f"/sessions/{self.id}/steps", params={"n": 0 if n is None else n}
            )
        except XclawError as e:
            if e.code == "unknown_session" and self._new:
                return []
            raise
        return StepList.model_validate(data).steps

    async def trace(self) -> list[TreeNode]:
        data = await self._agent._http("GET", f"/sessions/{self.id}/tree")
        return StepTree.model_validate(data).tree

    async def history(self) -> list[HistoryMessage]:
        try:
            data = await self._agent._http("GET", f"/sessions/{self.id}/history")
        except XclawError as e:
            if e.code == "unknown_session" and self._new:
                return []
            raise
        return HistoryAnswer.model_validate(data).messages

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
            self._new = False
            await self._until_written()
        data = await self._agent._http("PATCH", f"/sessions/{self.id}", json={"title": clean})
        self._title = SessionInfo.model_validate(data).title

    async def _until_written(self) -> None:
        for _ in range(200):
            try:
                await self._agent._http("GET", f"/sessions/{self.id}")
                return
            except XclawError as e:
                if e.code != "unknown_session":
                    raise
            await asyncio.sleep(0.025)

    async def rollback(self, step_id: str) -> RollbackAnswer:
        data = await self._agent._http(
            "POST", f"/sessions/{self.id}/rollback", json={"stepId": step_id}
        )
        return RollbackAnswer.model_validate(data)

    async def fork(self, step_id: str, title: str | None = None) -> RemoteSession:
        body: dict[str, Any] = {"stepId": step_id}
        if title is not None:
            body["title"] = title
        data = await self._agent._http("POST", f"/sessions/{self.id}/fork", json=body)
        new = ForkAnswer.model_validate(data).session
        return RemoteSession(self._agent, new.session_id, new.title)

    async def delete(self) -> None:
        await self._agent._http("DELETE", f"/sessions/{self.id}")


class RemoteAgent(Agent):
    """Sessions of a running gateway (see the module docstring)."""

    def __init__(self, url: str, token: str | None, *, timeout: float = 30.0) -> None:
        self.http_url, self.ws_url, self.token = _urls(url, token)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._client = httpx.AsyncClient(
            base_url=self.http_url + "/api", headers=headers, timeout=timeout
        )
        self._sockets: dict[str, SessionSocket] = {}
        self._background: set[asyncio.Task[None]] = set()

    def _socket(self, session_id: str) -> SessionSocket:
        socket = self._sockets.get(session_id)
        if socket is None:
            socket = self._sockets[session_id] = SessionSocket(self, session_id)
        return socket

    async def _http(self, method: str, path: str, **kwargs: Any) -> Any:
        """An API call's JSON answer; its error answer raised as the error its code names."""
        r = await self._client.request(method, path, **kwargs)
        if r.status_code >= 400:
            try:
                body = r.json()
                code, text = str(body["code"]), str(body["error"])
            except (ValueError, KeyError, TypeError):
                code, text = "internal_error", f"HTTP {r.status_code}: {r.text[:200]}"
            raise from_code(code, text)
        if r.status_code == 204:
            return None
        return r.json()

    async def check(self) -> None:
        """The gateway answers and takes the token (Unauthorized, or the connection error)."""
        await self._http("GET", "/health")

    async def new_session(
        self, title: str | None = None, *, workspace: str | Path | None = None
    ) -> RemoteSession:
        if workspace is not None:
            raise BadCommand(
                "a gateway's sessions work in the gateway's own workspaces: a directory of "
                "your own (workspace=) is for xclaw.open"
            )
        if title is None:
            # Written by the gateway with its first message, under this id (docs/protocol.md:
            # a client may bring its own; this one is as random as the gateway's).
            return RemoteSession(self, _new_id(), unwritten=True)
        data = await self._http("POST", "/sessions", json={"title": title})
        made = SessionInfo.model_validate(data)
        return RemoteSession(self, made.session_id, made.title)

    async def session(self, ref: str) -> RemoteSession:
        try:
            data = await self._http("GET", f"/sessions/{quote(ref, safe='')}")
            found = SessionInfo.model_validate(data)
            return RemoteSession(self, found.session_id, found.title)
        except XclawError as e:
            if e.code != "unknown_session":
                raise
        listed = SessionList.model_validate(
            await self._http("GET", "/sessions", params={"prefix": ref, "limit": 10_000})
        ).sessions
        if len(listed) == 1:
            return RemoteSession(self, listed[0].session_id, listed[0].title)
        if not listed:
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
        data = await self._http("GET", "/sessions", params=params)
        return SessionList.model_validate(data).sessions

    async def tools(self) -> list[ToolInfo]:
        return ToolList.model_validate(await self._http("GET", "/tools")).tools

    async def close(self) -> None:
        sockets, self._sockets = list(self._sockets.values()), {}
        for socket in sockets:
            await socket.close()
        await self._client.aclose()

    async def __aenter__(self) -> RemoteAgent:
        return self


class Connecting:
    """What `xclaw.connect(...)` returns: awaitable, and an async context manager."""

    def __init__(self, url: str, token: str | None) -> None:
        self._url = url
        self._token = token
        self._agent: RemoteAgent | None = None

    async def _open(self) -> RemoteAgent:
        agent = RemoteAgent(self._url, self._token)
        try:
            await agent.check()
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


def connect(url: str, *, token: str | None = None) -> Connecting:
    """An agent of the gateway at `url` (`http://127.0.0.1:3000`, or the `?token=` link its
    banner prints): the same interface as xclaw.open, through its WebSocket and HTTP API.
    `token`: the gateway's access token (XCLAW_TOKEN, or `$XCLAW_HOME/token` on its
    machine), unless the URL carries it. Unauthorized when it is refused."""
    return Connecting(url, token)


__all__ = ["RemoteAgent", "RemoteSession", "connect"]
