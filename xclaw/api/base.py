"""What the Python API promises, whichever way it reaches the runtime: `Agent` and `Session`
(abstract: `xclaw.open` gives the in-process ones, `xclaw.connect` the remote ones), the
stream of a run's events (`Events`) and what a run came to (`RunResult`).

Events are the gateway's frames (xclaw/frames.py): `event.type` is the frame's `type`, and a
program written against one kind of agent runs against the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from xclaw.frames import (
    ApprovalRequestFrame,
    CostSummary,
    ErrorFrame,
    HistoryMessage,
    ReplyFrame,
    ServerFrame,
    SessionInfo,
    Step,
    TreeNode,
)
from xclaw.http_bodies import RollbackAnswer, ToolInfo

Event: TypeAlias = ServerFrame
"""One event of a run: a server frame of docs/protocol.md, typed (`event.type`)."""

Approve: TypeAlias = (
    bool
    | Callable[[ApprovalRequestFrame], bool]
    | Callable[[ApprovalRequestFrame], Awaitable[bool]]
)
"""How a run answers its approval requests by itself: always yes (True), always no (False),
or what a function (sync or async) decides for each request."""


@dataclass(frozen=True)
class RunResult:
    """What a run came to: its final answer (`reply`), or the error that ended it, and every
    event it sent (in order)."""

    session_id: str
    events: list[Event] = field(default_factory=list)

    @property
    def reply(self) -> str | None:
        """The final answer; None when the run ended without one (an error, a cancel)."""
        last = next((e for e in reversed(self.events) if isinstance(e, ReplyFrame)), None)
        return None if last is None else last.content

    @property
    def error(self) -> ErrorFrame | None:
        """The error the run ended with (llm_error, max_iterations, …), if it did."""
        return next((e for e in reversed(self.events) if isinstance(e, ErrorFrame)), None)

    @property
    def ok(self) -> bool:
        return self.reply is not None

    def of_type(self, kind: str) -> list[Event]:
        """The events of one type (`"tool"`, `"step"`, …), in order."""
        return [e for e in self.events if e.type == kind]


class Events(ABC):
    """The events of one run, in the order the gateway sends them — an async iterator that
    ends when the run ends. `await`ing it instead runs it to its end and gives its
    RunResult. A run starts when the iteration (or the await) begins.

    Cancelling the task that iterates (or awaits) cancels the run, as Session.cancel does.
    Leaving the loop early (`break`) only stops listening: the run goes on
    (Session.wait, Session.cancel)."""

    def __init__(self, session_id: str, approve: Approve | None = None) -> None:
        self.session_id = session_id
        self._approve = approve
        self._pending: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._started = False
        self._finished = False
        self._answering: set[asyncio.Task[None]] = set()

    # --- what an implementation provides ----------------------------------------------------
    @abstractmethod
    async def _start(self) -> None:
        """Start the run (raising a typed error when it cannot) and begin calling `_push`
        with its events and `_finish` once it has ended."""

    @abstractmethod
    def _stop(self) -> None:
        """The consumer was cancelled: cancel the run, stop listening."""

    @abstractmethod
    async def _answer(self, step_id: str, approve: bool) -> None:
        """Answer an approval request of this run."""

    # --- what implementations call --------------------------------------------------------
    def _push(self, event: Event) -> None:
        self._pending.append(event)
        if isinstance(event, ApprovalRequestFrame) and self._approve is not None:
            task = asyncio.get_running_loop().create_task(self._decide(event))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        self._wake()

    def _finish(self) -> None:
        self._finished = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _decide(self, request: ApprovalRequestFrame) -> None:
        rule = self._approve
        if isinstance(rule, bool):
            yes = rule
        else:
            assert rule is not None
            answer = rule(request)
            yes = bool(await answer) if inspect.isawaitable(answer) else bool(answer)
        from xclaw.errors import BadStep

        # Answered meanwhile (another client, a cancel): nothing waits for it any more.
        with contextlib.suppress(BadStep):
            await self._answer(request.step_id, yes)

    # --- the consumer's side ----------------------------------------------------------------
    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> Event:
        if not self._started:
            self._started = True
            try:
                await self._start()
            except asyncio.CancelledError:
                self._stop()  # cancelled while it started: the run, if it began, too
                raise
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._finished:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            except asyncio.CancelledError:
                if not self._finished:
                    self._stop()
                raise
            finally:
                self._waiter = None

    async def result(self) -> RunResult:
        """Run to the end; every event, the reply or the error."""
        events = [event async for event in self]
        return RunResult(self.session_id, events)

    def __await__(self) -> Generator[Any, None, RunResult]:
        return self.result().__await__()


class Session(ABC):
    """One conversation with the agent: a row of the record and its steps. Obtained from
    Agent.new_session, Agent.session or Session.fork; cheap to hold (it is its id)."""

    def __init__(self, session_id: str, title: str = "") -> None:
        self._id = session_id
        self._title = title

    @property
    def id(self) -> str:
        """The session's id (the key of the record; what Agent.session takes back)."""
        return self._id

    @property
    def title(self) -> str:
        """The title as last seen by this object (Session.info reads it afresh)."""
        return self._title

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._id} {self._title!r}>"

    # --- a run --------------------------------------------------------------------------------
    @abstractmethod
    def send(self, text: str, *, approve: Approve | None = None) -> Events:
        """Send the user's `text`: the run's events (async for), or its RunResult (await).
        `approve` answers its approval requests by itself; otherwise answer each
        `approval_request` event with Session.approve. Raises Busy while a run is in flight
        (one driver), ConfigError without a model."""

    @abstractmethod
    def resume(self, *, approve: Approve | None = None, failed: bool = False) -> Events:
        """Continue the session's interrupted run (Running after a crash, or Paused on an
        approval: asked again as an event), under the resume rules (completed steps never
        run again; an interrupted call runs again only as docs/architecture.md says). No
        events when there is nothing to resume. `failed`: also continue a Failed session
        from where it stopped (its failed call is made again)."""

    @abstractmethod
    def compact(self) -> Events:
        """Summarise the conversation so far now (one model call, its own step); later
        turns start from the summary. Between turns only (Busy otherwise)."""

    @abstractmethod
    async def approve(
        self, step_id: str, approve: bool = True, *, client: str | None = None
    ) -> None:
        """Answer the approval request of step `step_id` (an `approval_request` event's
        step_id). BadStep when no approval is waiting for it. `client`: which client the
        person answered through, as the record's `by` names it (`acp`, `mcp`, or a word of
        your own: lowercase letters, digits, `-`, `_`); default the API itself."""

    @abstractmethod
    async def cancel(self) -> bool:
        """Stop the run in flight now (its running tool killed, its approval answered
        "cancelled"); returns once it stopped. False when nothing was running. The session
        then waits for the next instruction."""

    @abstractmethod
    async def wait(self) -> None:
        """Return when no run of this session is in flight here."""

    # --- the record ---------------------------------------------------------------------------
    @abstractmethod
    async def info(self) -> SessionInfo:
        """The session as the record has it now (status, state, title, fork origin, …)."""

    @abstractmethod
    async def steps(self, n: int | None = None) -> list[Step]:
        """Its steps, oldest first: every one, or the latest `n`."""

    @abstractmethod
    async def trace(self) -> list[TreeNode]:
        """The trace tree: one root per user message, each step under the LLM call that
        decided it (sub-agents' steps included)."""

    @abstractmethod
    async def history(self) -> list[HistoryMessage]:
        """The conversation as messages (user, assistant with its tool calls, tool results,
        compaction summaries), as a client shows it."""

    async def usage(self) -> CostSummary:
        """Tokens and estimated dollars of its LLM calls."""
        return cost_of(await self.steps())

    @abstractmethod
    async def rename(self, title: str) -> None:
        """A new title (redacted, at most 200 characters: BadCommand otherwise)."""

    @abstractmethod
    async def rollback(self, step_id: str) -> RollbackAnswer:
        """Rewind to just before `step_id` (it and every later step are deleted; the
        workspace files too). Busy while a run is in flight; BadStep for a bad id."""

    @abstractmethod
    async def fork(self, step_id: str, title: str | None = None) -> Session:
        """A new session whose history (and workspace) is this one's up to and including
        `step_id`; this one is unchanged."""

    @abstractmethod
    async def delete(self) -> None:
        """The session, its steps, snapshots and workspace files (its forks live on)."""

    async def tools(self) -> list[ToolInfo]:
        """The tools its agent may call, with their approval and resume policies."""
        return await self.agent.tools()

    @property
    @abstractmethod
    def agent(self) -> Agent:
        """The agent this session belongs to."""


class Agent(ABC):
    """The entry point: sessions of one xclaw database, in this process (`xclaw.open`) or
    through a running gateway (`xclaw.connect`). An async context manager: leaving it
    stops what this object runs (an in-process agent stops its runs, marking what was
    running interrupted, to be resumed later)."""

    @abstractmethod
    async def new_session(
        self, title: str | None = None, *, workspace: str | Path | None = None
    ) -> Session:
        """A new session. With a title it is written now; without one it is written with its
        first message (and titled after it), as a client's new session is. `workspace`: a
        directory of your own for it to work in — a project — instead of its default
        workspace (written now; rollback rewinds it in place, a fork gets a workspace of its
        own; docs/workspace.md). In-process only: a gateway's sessions work in the gateway's
        workspaces (BadCommand)."""

    @abstractmethod
    async def session(self, ref: str) -> Session:
        """An existing session by its id or a unique prefix of it. UnknownSession,
        AmbiguousSession (the error lists the candidates)."""

    @abstractmethod
    async def sessions(
        self, *, limit: int = 100, search: str | None = None, state: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first: `search` keeps those whose title or id
        contains it (case-insensitive), `state` those in that state (running, paused,
        waiting, interrupted, new, success, failed)."""

    async def search(self, word: str, *, limit: int = 100) -> list[SessionInfo]:
        """Sessions whose title or id contains `word` (case-insensitive)."""
        return await self.sessions(search=word, limit=limit)

    @abstractmethod
    async def tools(self) -> list[ToolInfo]:
        """Every tool a session's agent may call here (built-in, Python, MCP), with its
        approval and resume policies."""

    @abstractmethod
    async def close(self) -> None:
        """Stop: in-process runs are stopped and marked interrupted (resumed by the next
        process that resumes them); a remote agent closes its connections."""

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def cost_of(steps: Sequence[Step]) -> CostSummary:
    """The usage and estimated cost of a session's steps (its llm_calls), as `xclaw
    sessions` sums them."""
    total = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0}
    cost: float | None = None
    calls = unpriced = 0
    estimated = False
    for st in steps:
        if st.usage is None:
            continue
        calls += 1
        u = st.usage
        for key in total:
            total[key] += getattr(u, key)
        estimated = estimated or bool(u.estimated)
        if st.cost is None:
            if u.input or u.output:
                unpriced += 1
        else:
            cost = (cost or 0.0) + st.cost
    usage: dict[str, Any] = {**total, **({"estimated": True} if estimated else {})}
    return CostSummary.model_validate(
        {
            "usage": usage,
            "cost": None if cost is None else round(cost, 6),
            "llmCalls": calls,
            "unpricedCalls": unpriced,
        }
    )


def refuse_commands(text: str) -> None:
    """Text for the agent only: a slash command (`/steps`, `/rollback …`) is a client's, and
    each has its method here (steps, rollback, fork, compact, rename, …). Empty text is no
    message either."""
    from xclaw.errors import BadCommand
    from xclaw.protocol import parse_command

    if not text.strip():
        raise BadCommand("a message must not be empty")
    command = parse_command(text)
    if command is not None:
        raise BadCommand(
            f"/{command.name} is a slash command, which clients send; through the Python API "
            "each has its method (Session.steps, rollback, fork, compact, rename, …)"
        )


async def collect(events: AsyncIterator[Event]) -> list[Event]:
    """Every event of a stream (a helper for examples and tests)."""
    return [e async for e in events]
