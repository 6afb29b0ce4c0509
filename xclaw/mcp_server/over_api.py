"""[mcp_server] The MCP server's `Sessions` over the Python API (`xclaw mcp`: `xclaw.open`, runs in
this process on xclaw's database). A run goes on after the tool call that started it returns; its
approvals are kept until answered (`approve`, or elicitation). A session whose run was interrupted
(this process was killed) is continued by the next call that looks at it, under the resume rules:
completed steps never again, an interrupted call only if re-issued and approved
(`maybe_repeated`)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from xclaw.api.base import Agent, Events, Session
from xclaw.errors import BadCommand, XclawError
from xclaw.mcp_server.rollback_answers import (
    preview_answer,
    preview_needs_confirmation,
    rolled_back_answer,
)
from xclaw.wire.frames import ApprovalRequestFrame, ErrorFrame, ReplyFrame, StepFrame

CLIENT = "mcp"


@dataclass
class Run:
    task: asyncio.Task[None] | None = None
    pending: dict[str, ApprovalRequestFrame] = field(default_factory=dict)
    reply: str | None = None
    error: str | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # Set once the run has begun (its first event) or could not (`refused`).
    begun: asyncio.Event = field(default_factory=asyncio.Event)
    refused: XclawError | None = None

    @property
    def done(self) -> bool:
        return self.task is None or self.task.done()


class ApiSessions:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._runs: dict[str, Run] = {}

    async def _session(self, session_id: str) -> Session:
        session = await self.agent.session(session_id)
        if session.id != session_id:  # a prefix: tools name sessions by their whole id
            raise BadCommand(f"no session with id {session_id!r} (give the whole id)")
        return session

    async def _follow(self, session_id: str, events: Events) -> Run:
        """The run followed from here on, once it has begun: its message is recorded (the
        session exists) before the call answers, and a run refused at its start (busy,
        driven elsewhere) is said by the call, not found later."""
        run = Run()

        async def consume() -> None:
            try:
                async for ev in events:
                    if isinstance(ev, ApprovalRequestFrame):
                        run.pending[ev.step_id] = ev
                    elif isinstance(ev, StepFrame) and ev.step.status != "running":
                        run.pending.pop(ev.step.id, None)
                    elif isinstance(ev, ReplyFrame):
                        run.reply = ev.content
                    elif isinstance(ev, ErrorFrame):
                        run.error = f"{ev.code}: {ev.content}"
                    run.begun.set()
                    run.changed.set()
            except XclawError as e:  # the run could not start, or its events stopped coming
                if run.begun.is_set():
                    run.error = f"{e.code}: {e.message}"
                else:
                    run.refused = e
            finally:
                run.begun.set()
                run.changed.set()

        run.task = asyncio.get_running_loop().create_task(consume())
        await run.begun.wait()
        if run.refused is not None:
            raise run.refused
        self._runs[session_id] = run
        return run

    async def _wait(self, run: Run, wait_s: float) -> None:
        """Until the run ends, asks something, or wait_s passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not run.done and not run.pending:
            left = deadline - loop.time()
            if left <= 0:
                return
            run.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.changed.wait(), left)

    async def _answer(self, session: Session, run: Run | None) -> dict[str, Any]:
        info = await session.info()
        out: dict[str, Any] = {
            "session_id": session.id,
            "title": info.title,
            "state": info.state,
            "state_text": info.state_text,
            "running": run is not None and not run.done,
            "pending_approvals": [
                {
                    "step_id": r.step_id,
                    "name": r.name,
                    "input": r.input,
                    "reason": r.reason,
                    "maybe_repeated": r.maybe_repeated,
                }
                for r in (run.pending.values() if run is not None else ())
            ],
        }
        if run is not None and run.done:
            out["reply"] = run.reply
            if run.error:
                out["error"] = run.error
        return out

    async def send(
        self, text: str, session_id: str | None, wait_s: float, agent: str | None
    ) -> dict[str, Any]:
        if session_id is None:
            session = await self.agent.new_session(agent=agent)
        else:
            session = await self._session(session_id)
            run = self._runs.get(session.id)
            if run is not None and not run.done:
                raise BadCommand(
                    "a run of this session is in flight: session_status follows it, cancel stops it"
                )
        run = await self._follow(session.id, session.send(text, agent=agent))
        await self._wait(run, wait_s)
        return await self._answer(session, run)

    async def status(self, session_id: str, wait_s: float) -> dict[str, Any]:
        session = await self._session(session_id)
        run = self._runs.get(session.id)
        if run is None or run.done:
            state = (await session.info()).state
            if state in ("running", "paused", "interrupted"):
                # Interrupted here (this process restarted): continued under the resume rules.
                run = await self._follow(session.id, session.resume())
        if run is not None:
            await self._wait(run, wait_s)
        return await self._answer(session, run)

    async def sessions(self, limit: int, search: str | None) -> list[dict[str, Any]]:
        return [
            {
                "session_id": s.session_id,
                "title": s.title,
                "state": s.state,
                "updated_at": s.updated_at,
            }
            for s in await self.agent.sessions(limit=limit, search=search)
        ]

    async def steps(self, session_id: str, n: int | None) -> list[dict[str, Any]]:
        return [s.wire() for s in await (await self._session(session_id)).steps(n)]

    async def approve(self, session_id: str, step_id: str, approve: bool) -> dict[str, Any]:
        session = await self._session(session_id)
        await session.approve(step_id, approve, client=CLIENT)
        run = self._runs.get(session.id)
        if run is not None:
            run.pending.pop(step_id, None)
        return {"session_id": session.id, "step_id": step_id, "approved": approve}

    async def rollback(
        self, session_id: str, step_id: str, confirm: bool, accept_irreversible: bool
    ) -> dict[str, Any]:
        session = await self._session(session_id)
        if not confirm:
            preview = await session.rollback_preview(step_id)
            shown = preview.model_dump(by_alias=True, mode="json")
            if preview_needs_confirmation(shown):
                return preview_answer(session_id, shown)
        answer = await session.rollback(step_id, accept_irreversible=accept_irreversible)
        return rolled_back_answer(
            session_id,
            answer.step_id,
            answer.deleted,
            [c.model_dump(by_alias=True, mode="json") for c in answer.compensated],
            [e.model_dump(by_alias=True, mode="json") for e in answer.not_undone],
        )

    async def fork(self, session_id: str, step_id: str, title: str | None) -> dict[str, Any]:
        new = await (await self._session(session_id)).fork(step_id, title)
        return {
            "session_id": new.id,
            "title": new.title,
            "from_session_id": session_id,
            "from_step_id": step_id,
        }

    async def cancel(self, session_id: str) -> dict[str, Any]:
        stopped = await (await self._session(session_id)).cancel()
        return {"session_id": session_id, "cancelled": stopped}

    async def transcript(self, session_id: str) -> list[dict[str, Any]]:
        return [m.wire() for m in await (await self._session(session_id)).history()]
