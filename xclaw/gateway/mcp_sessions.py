"""[gateway] The MCP tools' `Sessions` (xclaw/mcp_server/tools.py) over the gateway's runtime, for
`/mcp`: what the person signed in to the request may see and do, decided exactly as on the HTTP API
(xclaw/gateway/access.py: an admin everything, a member their sessions and those shared with them;
another's session answers as an id nobody has).

Runs are the gateway's: one started by `send_message` goes on after the call returns, and
after the MCP host goes away; a call looks at a run through the runtime (busy, the approvals
it waits for) and the record (the reply), so a host that reconnects — to a gateway restarted
meanwhile too — sees the same answer. `session_status` continues interrupted work as a client
attaching over the WebSocket does (resume on reconnect).

Who asks is set per message by `signed_in` (xclaw/gateway/mcp_sdk.py), in `ASKING`:
one server answers every person. What signed them in is asked again before each access and
while a call waits, as for a socket: a user removed (or given a new token) is refused within
about a second, a call in flight included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from xclaw.errors import BadStep, SessionNotFound, Unauthorized
from xclaw.gateway.context import Gateway
from xclaw.gateway.identity import SignedIn
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.mcp_server.rollback_answers import preview_answer, rolled_back_answer
from xclaw.people.teams import Actor, Identity, Need
from xclaw.store.steps.model import StepStatus
from xclaw.store.steps.rows import SESSION_ID_RE
from xclaw.views.branch_diff import final_answer
from xclaw.wire.protocol import session_json, step_json
from xclaw.wire.shapes import Frame

CLIENT = "mcp"
# Who the message being handled comes from (set by the endpoint's middleware).
ASKING: ContextVar[SignedIn] = ContextVar("xclaw_mcp_asking")
GONE = "your access token no longer works (the user was removed or given a new one)"
# How often a wait looks again at a run driven by another worker (its frames wake it sooner).
RECHECK_S = 1.0
# The latest steps a finished run's reply or error is looked for in.
LAST_STEPS = 50


class RunWatch:
    """A session's frames while a call waits on its run: any frame wakes the wait; an error
    frame is kept to be said. `still`: whether the person may still wait (asked at least
    every RECHECK_S)."""

    def __init__(
        self, rt: GatewayRuntime, session_id: str, still: Callable[[], Awaitable[None]]
    ) -> None:
        self.rt = rt
        self.sid = session_id
        self.still = still
        self.error: str | None = None
        self._changed = asyncio.Event()
        self._off = rt.subscribe(session_id, self._frame)

    def _frame(self, frame: Frame) -> None:
        if frame.get("type") == "error":
            self.error = f"{frame.get('code', 'error')}: {frame.get('content', '')}"
        self._changed.set()

    def close(self) -> None:
        self._off()

    def _settled(self) -> bool:
        return not self.rt.is_busy(self.sid) or bool(self.rt.pending_approval_frames(self.sid))

    async def wait(self, wait_s: float) -> None:
        """Until the run ends, asks for an approval, or `wait_s` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        # The run's end, when this worker drives it (it ends after its last frame); a run
        # on another worker is looked at again every RECHECK_S, its frames waking it sooner.
        idle: asyncio.Future[None] | None = asyncio.ensure_future(self.rt.wait_idle(self.sid))
        try:
            while not self._settled():
                await self.still()
                left = deadline - loop.time()
                if left <= 0:
                    return
                self._changed.clear()
                changed = asyncio.ensure_future(self._changed.wait())
                waits: set[asyncio.Future[Any]] = {changed} if idle is None else {changed, idle}
                try:
                    await asyncio.wait(waits, timeout=min(left, RECHECK_S))
                finally:
                    changed.cancel()
                if idle is not None and idle.done():
                    _ = idle.cancelled() or idle.exception()  # the run's own outcome, not ours
                    idle = None
        finally:
            if idle is not None:
                idle.cancel()  # the wait only: the run is shielded from it


class GatewaySessions:
    def __init__(self, gw: Gateway) -> None:
        self.gw = gw

    # --- who asks, and what they may do -------------------------------------------------------
    @staticmethod
    def _signed() -> SignedIn:
        try:
            return ASKING.get()
        except LookupError:  # a message the endpoint did not sign in: never served
            raise Unauthorized("no one is signed in to this request") from None

    def _who(self) -> Identity:
        return self._signed().identity

    async def _still(self) -> None:
        """What signed the person in still holds (their user, their token): else refused."""
        if not await self.gw.auth.still(self._signed()):
            self.gw.auth.forget()
            raise Unauthorized(GONE)

    def _actor(self) -> Actor:
        return Actor(self._who(), "http", CLIENT)

    def _watch(self, session_id: str) -> RunWatch:
        return RunWatch(self.gw.runtime, session_id, self._still)

    async def _require(self, session_id: str, need: Need) -> str:
        """The session, if the person may do `need` to it; another's, or one nobody has (an
        id not even well formed too), is unknown."""
        await self._still()
        if not SESSION_ID_RE.match(session_id):
            raise SessionNotFound(session_id[:200])
        await self.gw.access.require(self._who(), session_id, need)
        await asyncio.to_thread(self.gw.store.record.get_session, session_id)  # the admin's too
        return session_id

    # --- answers ------------------------------------------------------------------------------
    async def _answer(self, session_id: str, watch: RunWatch | None = None) -> dict[str, Any]:
        rt = self.gw.runtime
        session = await asyncio.to_thread(self.gw.store.record.get_session, session_id)
        busy = rt.is_busy(session_id)
        shown = session_json(session, busy=busy)
        out: dict[str, Any] = {
            "session_id": session_id,
            "title": session.title,
            "state": shown["state"],
            "state_text": shown["stateText"],
            "running": busy,
            "pending_approvals": [
                {
                    "step_id": f["stepId"],
                    "name": f["name"],
                    "input": f["input"],
                    "reason": f["reason"],
                    "maybe_repeated": bool(f.get("maybeRepeated")),
                }
                for f in rt.pending_approval_frames(session_id)
            ],
        }
        if not busy:
            # The run's end from the record: a host that reconnects (to a gateway restarted
            # meanwhile too) is told what one that waited heard.
            steps = await asyncio.to_thread(
                self.gw.store.record.latest_steps, session_id, LAST_STEPS
            )
            out["reply"] = final_answer(steps) if shown["state"] == "success" else None
            error = watch.error if watch is not None else None
            if error is None and shown["state"] == "failed":
                failed = [s for s in steps if s.status is StepStatus.FAILED and s.error_message]
                error = failed[-1].error_message if failed else None
            if error:
                out["error"] = error
        clean: dict[str, Any] = rt.redact(out)
        return clean

    # --- Sessions -----------------------------------------------------------------------------
    async def send(
        self, text: str, session_id: str | None, wait_s: float, agent: str | None
    ) -> dict[str, Any]:
        rt = self.gw.runtime
        if agent is not None:
            rt.agent_named(agent)  # unknown_agent before anything is written
        if session_id is None:
            await self._still()
            fresh, _ = await rt.peek(None)
            sid = fresh.session_id
        else:
            sid = await self._require(session_id, Need.ACT)
        watch = self._watch(sid)
        try:
            # A new session is written with its message, as its sender's (docs/teams.md).
            await rt.send(sid, text, create=session_id is None, actor=self._actor(), agent=agent)
            await watch.wait(wait_s)
            return await self._answer(sid, watch)
        finally:
            watch.close()

    async def status(self, session_id: str, wait_s: float) -> dict[str, Any]:
        rt = self.gw.runtime
        sid = await self._require(session_id, Need.READ)
        watch = self._watch(sid)
        try:
            # Interrupted work continues, as when a client attaches (resume on reconnect).
            await rt.resume_if_needed(sid)
            await watch.wait(wait_s)
            return await self._answer(sid, watch)
        finally:
            watch.close()

    async def sessions(self, limit: int, search: str | None) -> list[dict[str, Any]]:
        await self._still()
        rt = self.gw.runtime
        word = (search or "").lower()
        found = []
        for s in await self.gw.access.sessions(self._who(), limit=None if word else limit):
            shown = rt.redact(session_json(s, busy=rt.is_busy(s.session_id)))
            # Redacted before the search: a word must not find what the answer would not show.
            if word and word not in str(shown["title"]).lower() and word not in s.session_id:
                continue
            found.append(
                {
                    "session_id": s.session_id,
                    "title": shown["title"],
                    "state": shown["state"],
                    "updated_at": s.updated_at,
                }
            )
            if len(found) >= limit:
                break
        return found

    async def steps(self, session_id: str, n: int | None) -> list[dict[str, Any]]:
        sid = await self._require(session_id, Need.READ)
        store = self.gw.store
        if n is None:
            steps = await asyncio.to_thread(store.record.steps, sid)
        else:  # bounded by the tool
            steps = await asyncio.to_thread(store.record.latest_steps, sid, n)
        prices = self.gw.runtime.prices
        out: list[dict[str, Any]] = self.gw.runtime.redact([step_json(s, prices) for s in steps])
        return out

    async def approve(self, session_id: str, step_id: str, approve: bool) -> dict[str, Any]:
        sid = await self._require(session_id, Need.APPROVE)
        try:
            self.gw.runtime.answer_approval(sid, step_id, approve, self._actor().by())
        except BadStep:
            raise BadStep.not_waiting(step_id[:200], sid) from None
        return {"session_id": sid, "step_id": step_id, "approved": approve}

    async def rollback(
        self, session_id: str, step_id: str, confirm: bool, accept_irreversible: bool
    ) -> dict[str, Any]:
        sid = await self._require(session_id, Need.ACT)
        if not confirm:
            preview = await self.gw.runtime.rollback_preview(sid, step_id)
            if not preview.plain:
                return preview_answer(sid, preview.as_json())
        result = await self.gw.commands.rollback(
            sid, step_id, self._actor(), accept=accept_irreversible
        )
        for frame in result.frames.broadcast:
            self.gw.hub.broadcast(sid, frame)  # the sockets attached see the new history
        return rolled_back_answer(
            sid, result.step_id, result.deleted, result.compensated, result.not_undone
        )

    async def fork(self, session_id: str, step_id: str, title: str | None) -> dict[str, Any]:
        sid = await self._require(session_id, Need.ACT)
        new = await self.gw.commands.fork(sid, step_id, title, self._actor())  # the maker's
        return {
            "session_id": new.session_id,
            "title": new.title,
            "from_session_id": sid,
            "from_step_id": step_id,
        }

    async def cancel(self, session_id: str) -> dict[str, Any]:
        sid = await self._require(session_id, Need.ACT)
        stopped = self.gw.runtime.cancel(sid)
        if stopped:
            await self.gw.commands.record(sid, "cancel", self._actor())
        return {"session_id": sid, "cancelled": stopped}

    async def transcript(self, session_id: str) -> list[dict[str, Any]]:
        sid = await self._require(session_id, Need.READ)
        frame = await asyncio.to_thread(self.gw.runtime.history_frame, sid)
        messages: list[dict[str, Any]] = frame.get("messages", [])  # redacted by the runtime
        return messages
