"""[acp] `xclaw acp`'s agent: the Agent Client Protocol's methods (the `agent-client-protocol`
SDK's `Agent` interface) carried out over the Python API (xclaw/api), so one code path serves
both `xclaw acp` (`xclaw.open`: runs in this process, on the database every command uses)
and `xclaw acp --connect URL` (`xclaw.connect`: runs in a gateway, which goes on when the
editor closes).

A prompt is a message's run: its typed events become `session/update`s (xclaw/acp/updates.py)
and its end the prompt's stop reason. An approval becomes `session/request_permission`
(xclaw/acp/permissions.py). `session/load` replays the conversation, then continues an
interrupted run as every xclaw client does (`Session.resume`: completed steps never run
again; an interrupted call only if the model issues it again and the person approves,
warned that it may have run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, update_agent_message_text, update_agent_thought_text
from acp.helpers import update_available_commands
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
)

from xclaw import __version__
from xclaw.acp.commands import BESIDE_A_RUN, COMMANDS, is_command, run_command
from xclaw.acp.mcp_servers import client_servers
from xclaw.acp.permissions import ask
from xclaw.acp.prompt import prompt_text
from xclaw.acp.updates import ToolCalls, Update, finished, history_updates, started
from xclaw.api.base import Agent, Events, Session
from xclaw.errors import XclawError
from xclaw.wire.frames import (
    ApprovalRequestFrame,
    DeltaFrame,
    ErrorFrame,
    NoticeFrame,
    QueuedFrame,
    ReplyFrame,
    StepFrame,
    ThinkingFrame,
    ToolFrame,
)
from xclaw.wire.protocol import parse_command

log = logging.getLogger("xclaw.acp")

# Opens the xclaw agent, with the client's MCP servers (name -> xclaw.yaml entry) added.
Opener = Callable[[dict[str, dict[str, Any]]], Awaitable[Agent]]
# The states of a session whose run did not end: loading or resuming it goes on with it.
UNFINISHED = frozenset({"running", "paused", "interrupted"})
# The stop reason of a run that ended on an error: the agent cannot go on with this turn.
FAILED = "refusal"


@dataclass
class Followed:
    """One session an editor has open on this connection."""

    session: Session
    cwd: str
    calls: ToolCalls
    standing: dict[str, bool] = field(default_factory=dict)  # tool -> allow/reject always
    cancelled: bool = False
    prompting: bool = False
    background: asyncio.Task[str] | None = None  # a resumed run followed outside a prompt
    replayed: int = 0  # history messages shown by session/load
    relayed: int = 0  # events of runs relayed live
    kept: QueuedFrame | None = None  # the last prompt was kept in the session's queue
    answering: set[asyncio.Task[None]] = field(default_factory=set)


def _agent_named(meta: dict[str, Any]) -> str | None:
    """The declared agent a `session/new` asks for: `_meta: {"xclaw": {"agent": NAME}}`
    (absent: xclaw's own). A value that is not a name is refused, not ignored."""
    ours = meta.get("xclaw")
    if ours is None:
        return None
    name = ours.get("agent") if isinstance(ours, dict) else None
    if ours and not (isinstance(name, str) and 0 < len(name) <= 200):
        raise RequestError(
            -32602,
            "Invalid params: _meta.xclaw.agent must be the name of an agent declared in "
            "xclaw.yaml's agents:",
            {"code": "bad_command"},
        )
    return name


def rpc_error(e: XclawError) -> RequestError:
    data = {"code": e.code, "details": e.message}
    if e.code in ("unknown_session", "ambiguous_session"):
        return RequestError(-32002, f"Resource not found: {e.message}", data)
    if e.code in (
        "bad_command",
        "bad_step",
        "config_error",
        "busy",
        "forbidden",
        "unknown_agent",
        "rollback_pending",  # a prompt while a rollback waits for --retry or --abandon
    ):
        return RequestError(-32602, f"Invalid params: {e.message}", data)
    return RequestError(-32603, f"Internal error: {e.message}", data)


class XclawAcpAgent:
    """The ACP agent (see the module docstring). `remote`: through a gateway, whose
    sessions work in its own workspaces (the editor's cwd is not theirs)."""

    def __init__(self, opener: Opener, *, remote: bool = False) -> None:
        self._opener = opener
        self._remote = remote
        self._agent: Agent | None = None
        self._opening = asyncio.Lock()
        self._servers: dict[str, dict[str, Any]] = {}
        self._sessions: dict[str, Followed] = {}
        self._conn: Client | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def close(self) -> None:
        for st in self._sessions.values():
            if st.background is not None:
                st.background.cancel()
        if self._agent is not None:
            await self._agent.close()

    # --- the xclaw agent and the sessions followed --------------------------------------------
    async def _ensure(self, servers: Any, session_id: str | None = None) -> Agent:
        """The xclaw agent, opened with the client's MCP servers the first time; servers
        asked for later cannot join a running process (said to the user)."""
        wanted, notes = client_servers(servers or [], remote=self._remote)
        async with self._opening:
            if self._agent is None:
                try:
                    self._agent = await self._opener(wanted)
                except XclawError as e:
                    raise rpc_error(e) from None
                self._servers = wanted
            else:
                late = sorted(n for n, c in wanted.items() if self._servers.get(n) != c)
                if late:
                    notes.append(
                        f"MCP server(s) {', '.join(late)}: not started (this xclaw acp process "
                        "started with other servers; restart the agent to use them)"
                    )
        if notes and session_id is not None:
            self._later(session_id, [update_agent_thought_text(f"[tools] {n}") for n in notes])
        return self._agent

    def _followed(self, session_id: str) -> Followed:
        st = self._sessions.get(session_id)
        if st is None:
            raise RequestError(
                -32002,
                "Resource not found: no session open with this id (session/new, session/load)",
                {"sessionId": session_id},
            )
        return st

    def _follow(self, session: Session, cwd: str, root: Path | None) -> Followed:
        st = Followed(session, cwd, ToolCalls(root))
        self._sessions[session.id] = st
        return st

    async def _send(self, session_id: str, update: Any) -> None:
        if self._conn is not None:
            await self._conn.session_update(session_id=session_id, update=update)

    def _later(self, session_id: str, updates: list[Any]) -> None:
        """Updates sent once the current request has been answered."""

        async def go() -> None:
            await asyncio.sleep(0)
            for u in updates:
                await self._send(session_id, u)

        task = asyncio.get_running_loop().create_task(go())
        self._keep(task)

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- ACP: the connection ------------------------------------------------------------------
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=not self._remote, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
            agent_info=Implementation(name="xclaw", title="xclaw", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    # --- ACP: sessions ------------------------------------------------------------------------
    async def new_session(
        self,
        cwd: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        agent = await self._ensure(mcp_servers)
        named = _agent_named(kwargs)
        try:
            if self._remote:
                session = await agent.new_session(agent=named)
                root = None
            else:
                session = await agent.new_session(agent=named, workspace=cwd)
                info = await session.info()
                root = Path(str(info.metadata.get("workspace") or cwd))
        except XclawError as e:
            raise rpc_error(e) from None
        self._follow(session, cwd, root)
        later: list[Any] = [update_available_commands(COMMANDS)]
        if self._remote:
            later.append(
                update_agent_thought_text(
                    "[workspace] this session runs in the xclaw gateway, in its own workspace "
                    f"there (not in {cwd})"
                )
            )
        self._later(session.id, later)
        await self._ensure(mcp_servers, session.id)
        return NewSessionResponse(session_id=session.id)

    async def _open(self, session_id: str, cwd: str, mcp_servers: Any) -> Followed:
        agent = await self._ensure(mcp_servers, session_id)
        old = self._sessions.get(session_id)
        if old is not None and old.background is not None and not old.background.done():
            return old  # already followed here (its run streams to this editor)
        try:
            session = await agent.session(session_id)
            if session.id != session_id:  # a prefix: ACP names sessions by their whole id
                raise RequestError(
                    -32002, "Resource not found: no session with this id", {"sessionId": session_id}
                )
            info = await session.info()
        except XclawError as e:
            raise rpc_error(e) from None
        own = info.metadata.get("workspace")
        root = Path(own) if isinstance(own, str) and not self._remote else None
        return self._follow(session, cwd, root)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        st = await self._open(session_id, cwd, mcp_servers)
        try:
            history = await st.session.history()
        except XclawError as e:
            raise rpc_error(e) from None
        for update in history_updates(history, st.calls.root):
            await self._send(session_id, update)
        # Where the record may still change: a call of the run in flight (no result yet).
        running = [i for i, m in enumerate(history) if getattr(m, "running", False)]
        st.replayed = running[0] if running else len(history)
        await self._send(session_id, update_available_commands(COMMANDS))
        await self._continue(st, loaded=True)
        return LoadSessionResponse()

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        st = await self._open(session_id, cwd, mcp_servers)
        self._later(session_id, [update_available_commands(COMMANDS)])
        await self._continue(st)
        return ResumeSessionResponse()

    async def _continue(self, st: Followed, loaded: bool = False) -> None:
        """Go on with an interrupted run (or follow one the gateway is running), its events
        sent as updates outside any prompt. A session with nothing to go on with starts
        nothing: the editor's next prompt is not refused as "in flight"."""
        if st.background is not None and not st.background.done():
            return
        try:
            info = await st.session.info()
        except XclawError as e:
            raise rpc_error(e) from None
        if not info.busy and info.state not in UNFINISHED:
            # A run driven elsewhere may have ended since the load read the record: what it
            # added after the call the load stopped at is shown now.
            if loaded:
                try:
                    await self._catch_up(st)
                except XclawError as e:
                    raise rpc_error(e) from None
            return

        async def go() -> str:
            await asyncio.sleep(0)  # after the load's answer
            try:
                before = st.relayed
                stop = await self._run(st, st.session.resume())
                if (await st.session.info()).busy:
                    # Driven by another process (a gateway's run, the editor having left):
                    # followed to its end, then what it added is shown from the record.
                    await st.session.wait()
                    await self._catch_up(st)
                elif loaded and st.relayed == before:
                    await self._catch_up(st)  # it ended elsewhere before we could follow it
                return stop
            except XclawError as e:
                await self._send(st.session.id, update_agent_message_text(f"[error] {e.message}"))
                return FAILED

        st.background = asyncio.get_running_loop().create_task(go())

    async def _catch_up(self, st: Followed) -> None:
        """Show from the record what was added after what the load replayed."""
        history = await st.session.history()
        for update in history_updates(history[st.replayed :], st.calls.root):
            await self._send(st.session.id, update)
        st.replayed = len(history)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        agent = await self._ensure([])
        try:
            infos = await agent.sessions(limit=500)
        except XclawError as e:
            raise rpc_error(e) from None
        out = []
        for info in infos:
            own = info.metadata.get("workspace")
            where = own if isinstance(own, str) and not self._remote else None
            if cwd is not None and where is not None and where != cwd:
                continue
            if cwd is not None and where is None and not self._remote:
                continue
            out.append(
                SessionInfo(
                    session_id=info.session_id,
                    cwd=where or cwd or str(Path.cwd()),
                    title=info.title or None,
                    updated_at=_iso(info.updated_at),
                )
            )
        return ListSessionsResponse(sessions=out)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        st = self._followed(session_id)
        await self._stop(st)
        self._sessions.pop(session_id, None)
        return CloseSessionResponse()

    # --- ACP: a turn --------------------------------------------------------------------------
    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        st = self._followed(session_id)
        text = prompt_text(prompt)
        if st.prompting or (st.background is not None and not st.background.done()):
            if not is_command(text):
                return await self._beside(st, text)
            return await self._command_beside(st, text)
        if is_command(text):
            answer = await run_command(st.session, text)
            await self._send(session_id, update_agent_message_text(answer))
            return PromptResponse(stop_reason="end_turn")
        st.cancelled = False
        st.prompting = True
        try:
            stop = await self._run(st, st.session.send(text))
        except XclawError as e:
            raise rpc_error(e) from None
        finally:
            st.prompting = False
        return PromptResponse(stop_reason=stop)  # type: ignore[arg-type]

    async def _command_beside(self, st: Followed, text: str) -> PromptResponse:
        """A command (a prompt `/word …`) while a run of the session is in flight. One that
        reads the record or copies it (/steps, /ps, /fork: BESIDE_A_RUN) is answered at
        once, as `xclaw chat` answers it. A rollback is refused `busy` with what to do: it
        rewinds the very record the run is writing, and it is no message the session's
        queue could keep for later — so the session's busy policy, which says what a
        message does, does not apply to it."""
        command = parse_command(text)
        assert command is not None
        if command.name in BESIDE_A_RUN:
            answer = await run_command(st.session, text)
            await self._send(st.session.id, update_agent_message_text(answer))
            return PromptResponse(stop_reason="end_turn")
        raise RequestError(
            -32602,
            f"Invalid params: /{command.name} rewinds this session, and a run of it is in "
            f"flight: stop the run (session/cancel) and send /{command.name} again once it "
            "has stopped (a command is not kept in the session's queue as a prompt is)",
            {"code": "busy", "command": command.name},
        )

    async def _beside(self, st: Followed, text: str) -> PromptResponse:
        """A prompt while a run of the session is in flight follows the session's busy
        policy (docs/protocol.md, "Input while a run is busy"): `reject` refuses it (`busy`,
        as before); `queue` and `interrupt` keep it, and its response comes when its own
        turn ends, that turn's updates sent from the record; `steer` gives it to the
        running model at its next tool boundary, and its response comes when that run ends
        (the prompt in flight relays the run). A prompt cancelled while it waits
        (`/unqueue`) ends `cancelled`."""
        sid = st.session.id
        st.kept = None
        try:
            stop = await self._run(st, st.session.send(text))
        except XclawError as e:
            raise rpc_error(e) from None
        kept, st.kept = st.kept, None
        if kept is None:  # the run before ended meanwhile: this one ran, relayed
            return PromptResponse(stop_reason=stop)  # type: ignore[arg-type]
        await self._send(
            sid, update_agent_thought_text(f"[{kept.busy}] kept until the run in flight ends")
        )
        try:
            await st.session.wait()  # the run before, and this prompt's own turn
            history = await st.session.history()
        except XclawError as e:
            raise rpc_error(e) from None
        at = [
            i
            for i, m in enumerate(history)
            if getattr(m, "kind", None) == "user" and getattr(m, "text", None) == text
        ]
        if not at:
            return PromptResponse(stop_reason="cancelled")  # it left the queue unrun
        if kept.busy != "steer":  # (a steered run was relayed by the prompt in flight)
            for update in history_updates(history[at[-1] + 1 :], st.calls.root):
                await self._send(sid, update)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        st = self._sessions.get(session_id)
        if st is not None:
            await self._stop(st)

    async def _stop(self, st: Followed) -> None:
        st.cancelled = True
        with contextlib.suppress(XclawError):
            await st.session.cancel()

    async def _run(self, st: Followed, events: Events) -> str:
        """Relay one run's events; its stop reason."""
        sid = st.session.id
        stop = "end_turn"
        said = False  # answer text streamed since the last tool call
        asking: set[asyncio.Task[None]] = set()  # this run's approval questions
        async for ev in events:
            st.relayed += 1
            update: Update | None = None
            if isinstance(ev, DeltaFrame):
                said = True
                update = update_agent_message_text(ev.content)
            elif isinstance(ev, ThinkingFrame):
                update = update_agent_thought_text(ev.content) if ev.content else None
            elif isinstance(ev, ToolFrame):
                said = False
                update = st.calls.tool(ev)
            elif isinstance(ev, StepFrame):
                # A step committed while a gateway's socket was down (a catch-up): a tool
                # call whose frames were missed is shown from the record.
                step = ev.step
                if (
                    step.type == "tool_call"
                    and step.status != "running"
                    and st.calls.missed(step.id)
                ):
                    await self._send(
                        sid,
                        started(
                            step.id, step.name, step.input, st.calls.root, status="in_progress"
                        ),
                    )
                    update = finished(step.id, step.status == "failed", step.output)
            elif isinstance(ev, ApprovalRequestFrame):
                task = asyncio.get_running_loop().create_task(self._answer(st, ev))
                st.answering.add(task)
                asking.add(task)
                task.add_done_callback(st.answering.discard)
            elif isinstance(ev, NoticeFrame):
                update = update_agent_thought_text(ev.content)
            elif isinstance(ev, QueuedFrame):
                st.kept = ev  # kept in the session's queue (a prompt beside a run)
            elif isinstance(ev, ReplyFrame):
                if not said and ev.content:
                    update = update_agent_message_text(ev.content)
            elif isinstance(ev, ErrorFrame):
                update = update_agent_message_text(f"\n[error] {ev.content}")
                stop = "max_turn_requests" if ev.code == "max_iterations" else FAILED
            if update is not None:
                await self._send(sid, update)
        for task in asking:  # (a prompt kept beside this run asks nothing of its own)
            task.cancel()
        return "cancelled" if st.cancelled else stop

    async def _answer(self, st: Followed, frame: ApprovalRequestFrame) -> None:
        sid = st.session.id
        await self._send(sid, st.calls.approval(frame))
        if self._conn is None:
            return
        verdict = await ask(self._conn, sid, frame, st.standing, st.calls.root)
        if verdict is None:
            return  # cancelled: the cancel answers it
        yes, why = verdict
        try:
            await st.session.approve(frame.step_id, yes, client="acp")
        except XclawError:
            return  # answered meanwhile (another client, a cancel)
        if not yes:
            await self._send(sid, st.calls.refused(frame, why))


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")
