"""[api] What the Python API promises, whichever way it reaches the runtime: `Agent` and `Session`
(abstract: `xclaw.open` gives the in-process ones, `xclaw.connect` the remote ones), the
stream of a run's events (`Events`) and what a run came to (`RunResult`).

Events are the gateway's frames (xclaw/wire/frames.py): `event.type` is the frame's `type`, and a
program written against one kind of agent runs against the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import warnings
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, overload

from xclaw.agents.definition import DEFAULT_AGENT, AgentDefinition, ModelSettings, define
from xclaw.agents.hooks import Hooks
from xclaw.errors import XclawError
from xclaw.schedules.spec import ScheduleError, no_step_to_fork
from xclaw.wire.busy import BusyPolicy
from xclaw.wire.frames import (
    AckFrame,
    ApprovalRequestFrame,
    BudgetInfo,
    CostSummary,
    DeltaFrame,
    ErrorFrame,
    ForkedFrame,
    HistoryFrame,
    HistoryMessage,
    NoticeFrame,
    PongFrame,
    QueuedFrame,
    QueuedMessage,
    RenamedFrame,
    ReplyFrame,
    RolledBackFrame,
    ServerFrame,
    SessionFrame,
    SessionInfo,
    StatusFrame,
    Step,
    StepFrame,
    StepsFrame,
    ThinkingDiscardedFrame,
    ThinkingFrame,
    ToolFrame,
    TreeNode,
)
from xclaw.wire.http_bodies import (
    AgentInfo,
    FireInfo,
    HookInfo,
    HookMade,
    RollbackAnswer,
    RollbackPreview,
    ScheduleInfo,
    SessionProcesses,
    ToolInfo,
)

if TYPE_CHECKING:
    from xclaw.tools.base import ToolContext

Event: TypeAlias = ServerFrame
"""One event of a run: a server frame of docs/protocol.md, typed (`event.type`)."""

F = TypeVar("F")


@dataclass(frozen=True)
class Approval:
    """An answer to an approval request with more than yes or no: what the model is told
    (`message`), and the input the call runs with instead of the model's (`input`)."""

    approved: bool
    message: str | None = None
    input: Mapping[str, Any] | None = None


Approve: TypeAlias = (
    bool
    | Callable[[ApprovalRequestFrame], bool | Approval]
    | Callable[[ApprovalRequestFrame], Awaitable[bool | Approval]]
)
"""How a run answers its approval requests by itself: always yes (True), always no (False),
or what a function (sync or async) decides for each request (a bool, or an Approval)."""


# Reads a structured answer into the program's type: (agent name, the answer as JSON) -> value.
OutputLoader: TypeAlias = Callable[[str | None, Any], Any]
T = TypeVar("T")


@dataclass(frozen=True)
class RunResult:
    """What a run came to: its final answer (`reply`) — for an agent with an output type,
    also as a validated value (`output`) — or the error that ended it, and every event it
    sent (in order)."""

    session_id: str
    events: list[Event] = field(default_factory=list)
    load: OutputLoader | None = field(default=None, repr=False, compare=False)

    @property
    def output(self) -> Any:
        """The structured answer of an agent with an `output_type` (docs/agents.md): an
        instance of its pydantic model (a dict for a JSON schema, or when this program does
        not know the agent's definition); None when the run gave none."""
        last = next((e for e in reversed(self.events) if isinstance(e, ReplyFrame)), None)
        if last is None or last.output is None:
            return None
        return last.output if self.load is None else self.load(last.agent, last.output)

    def output_as(self, cls: type[T]) -> T:
        """`output` as an instance of `cls` (a pydantic model: validated into it), typed for
        the type checker. ValueError when the run gave no structured answer."""
        from pydantic import BaseModel

        value = self.output
        if value is None:
            raise ValueError(f"the run gave no structured answer ({self.error or 'no reply'})")
        if isinstance(value, cls):
            return value
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
            return cls.model_validate(data)
        raise TypeError(f"the structured answer is a {type(value).__name__}, not a {cls.__name__}")

    @property
    def queued(self) -> QueuedFrame | None:
        """The message was kept to run later or to steer the run (`send(..., busy=...)`
        while a run was in flight): its `queued` event; None when it ran now."""
        return next((e for e in self.events if isinstance(e, QueuedFrame)), None)

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
    def budget(self) -> BudgetInfo | None:
        """The run stopped before a model call that would have gone past a budget cap (the
        session waits in state `budget`, docs/budgets.md): which cap, what was spent, what
        is left, what the call needed. None otherwise."""
        last = next((e for e in reversed(self.events) if isinstance(e, StatusFrame)), None)
        return None if last is None else last.budget

    @property
    def ok(self) -> bool:
        return self.reply is not None

    # Typed by the word: `result.of_type("tool")` is a list[ToolFrame].
    @overload
    def of_type(self, kind: Literal["ack"]) -> list[AckFrame]: ...
    @overload
    def of_type(self, kind: Literal["approval_request"]) -> list[ApprovalRequestFrame]: ...
    @overload
    def of_type(self, kind: Literal["delta"]) -> list[DeltaFrame]: ...
    @overload
    def of_type(self, kind: Literal["error"]) -> list[ErrorFrame]: ...
    @overload
    def of_type(self, kind: Literal["forked"]) -> list[ForkedFrame]: ...
    @overload
    def of_type(self, kind: Literal["history"]) -> list[HistoryFrame]: ...
    @overload
    def of_type(self, kind: Literal["notice"]) -> list[NoticeFrame]: ...
    @overload
    def of_type(self, kind: Literal["pong"]) -> list[PongFrame]: ...
    @overload
    def of_type(self, kind: Literal["renamed"]) -> list[RenamedFrame]: ...
    @overload
    def of_type(self, kind: Literal["reply"]) -> list[ReplyFrame]: ...
    @overload
    def of_type(self, kind: Literal["rolledback"]) -> list[RolledBackFrame]: ...
    @overload
    def of_type(self, kind: Literal["session"]) -> list[SessionFrame]: ...
    @overload
    def of_type(self, kind: Literal["status"]) -> list[StatusFrame]: ...
    @overload
    def of_type(self, kind: Literal["step"]) -> list[StepFrame]: ...
    @overload
    def of_type(self, kind: Literal["steps"]) -> list[StepsFrame]: ...
    @overload
    def of_type(self, kind: Literal["thinking"]) -> list[ThinkingFrame]: ...
    @overload
    def of_type(self, kind: Literal["thinking_discarded"]) -> list[ThinkingDiscardedFrame]: ...
    @overload
    def of_type(self, kind: Literal["tool"]) -> list[ToolFrame]: ...
    @overload
    def of_type(self, kind: str) -> list[Event]: ...
    @overload
    def of_type(self, kind: type[F]) -> list[F]: ...
    def of_type(self, kind: str | type[Any]) -> list[Any]:
        """The events of one type, in order: by its word (`"tool"`, `"step"`, …) or its class
        (`ToolFrame`); either way typed (`of_type("tool")` is a `list[ToolFrame]`)."""
        if isinstance(kind, str):
            return [e for e in self.events if e.type == kind]
        return [e for e in self.events if isinstance(e, kind)]


class Events(ABC):
    """The events of one run, in the order the gateway sends them — an async iterator that
    ends when the run ends. `await`ing it instead runs it to its end and gives its
    RunResult. A run starts when the iteration (or the await) begins.

    Cancelling the task that iterates (or awaits) cancels the run, as Session.cancel does.
    Leaving the loop early (`break`) only stops listening: the run goes on
    (Session.wait, Session.cancel)."""

    def __init__(
        self, session_id: str, approve: Approve | None = None, *, what: str = "a run"
    ) -> None:
        self.session_id = session_id
        self._approve = approve
        self._what = what  # what made it (`session.send('…')`): said if it is never started
        self._pending: deque[Event] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._started = False
        self._finished = False
        self._failed: BaseException | None = None
        self._answering: set[asyncio.Task[None]] = set()

    def __del__(self) -> None:
        # As Python says of a coroutine never awaited: a send nobody started sent nothing.
        if not getattr(self, "_started", True):
            warnings.warn(
                f"{self._what} (session {self.session_id}) was never awaited or iterated, "
                "so it did nothing: `await` it, or `async for` over it",
                RuntimeWarning,
                stacklevel=2,
            )

    # --- what an implementation provides ----------------------------------------------------
    @abstractmethod
    async def _start(self) -> None:
        """Start the run (raising a typed error when it cannot) and begin calling `_push`
        with its events and `_finish` once it has ended."""

    @abstractmethod
    async def _stop(self) -> None:
        """The consumer was cancelled: cancel the run, stop listening, and return once the
        run has stopped."""

    @abstractmethod
    async def _answer(self, step_id: str, answer: Approval) -> None:
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

    def _fail(self, error: BaseException) -> None:
        """The stream cannot go on (the gateway went away for good): the consumer gets
        `error` once the events before it are taken."""
        if not self._finished:
            self._failed = error
            self._finish()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _decide(self, request: ApprovalRequestFrame) -> None:
        rule = self._approve
        decided: Any
        if isinstance(rule, bool):
            decided = rule
        else:
            assert rule is not None
            decided = rule(request)
            if inspect.isawaitable(decided):
                decided = await decided
        answer = decided if isinstance(decided, Approval) else Approval(bool(decided))
        from xclaw.errors import BadStep

        # Answered meanwhile (another client, a cancel): nothing waits for it any more.
        with contextlib.suppress(BadStep):
            await self._answer(request.step_id, answer)

    # --- the consumer's side ----------------------------------------------------------------
    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> Event:
        if not self._started:
            self._started = True
            try:
                await self._start()
            except asyncio.CancelledError:
                await self._cancelled()  # cancelled while it started: the run, if it began
                raise
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._finished:
                if self._failed is not None:
                    failed, self._failed = self._failed, None
                    raise failed
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            except asyncio.CancelledError:
                if not self._finished:
                    await self._cancelled()
                raise
            finally:
                self._waiter = None

    async def _cancelled(self) -> None:
        """The consumer's task was cancelled (task.cancel(), Ctrl+C): the run is stopped and
        waited for, so that the cancellation ends once it has stopped (a second cancel ends
        the waiting only). How the stopping went is of no interest to a cancelled task."""
        with contextlib.suppress(XclawError):
            await asyncio.shield(self._stop())

    async def result(self) -> RunResult:
        """Run to the end; every event, the reply or the error."""
        events = [event async for event in self]
        return RunResult(self.session_id, events, self._load)

    # Reads structured answers into the program's types (set by an implementation that
    # knows the agents' definitions).
    _load: OutputLoader | None = None

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
    def send(
        self,
        text: str,
        *,
        approve: Approve | None = None,
        agent: Agent | str | None = None,
        busy: BusyPolicy | None = None,
    ) -> Events:
        """Send the user's `text`: the run's events (async for), or its RunResult (await).
        `approve` answers its approval requests by itself; otherwise answer each
        `approval_request` event with Session.approve. `agent`: the declared agent that runs
        it and the session's turns after it (recorded; default: the one it runs). Raises Busy
        while a run is in flight (one driver), ConfigError without a model, UnknownAgent.

        `busy`: what it does if a run is in flight (docs/protocol.md, "Input while a run is
        busy"): `reject` (Busy), `queue`, `steer` or `interrupt` — kept, durably, in the
        session's queue; the events then end with one `queued` event (RunResult.queued) and
        its own run comes later (Session.wait, Session.queued). None: the session's policy,
        else the server's (`reject` unless xclaw.yaml's `input.busy` says otherwise)."""

    @abstractmethod
    async def queued(self) -> list[QueuedMessage]:
        """The messages waiting for the session's run, in the order they run."""

    @abstractmethod
    async def unqueue(self, message_id: str) -> bool:
        """Cancel a waiting message (its id: `QueuedMessage.id`, the `message_id` of its
        `queued` event). False when it was not waiting (it ran, or was cancelled)."""

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
        self,
        step_id: str,
        approve: bool = True,
        *,
        message: str | None = None,
        input: Mapping[str, Any] | None = None,
        client: str | None = None,
    ) -> None:
        """Answer the approval request of step `step_id` (an `approval_request` event's
        step_id). `message`: what the model is told with the answer (a denial's reason);
        `input`: the call runs with this input instead of the model's (recorded as edited,
        the original kept; where the approval policy allows edits: docs/approval.md).
        `client`: which client the person answered through, as the record's `by` names it
        (`acp`, `mcp`, or a word of your own: lowercase letters, digits, `-`, `_`); default
        the API itself. BadStep when no approval is waiting for it."""

    @abstractmethod
    async def cancel(self) -> bool:
        """Stop the run in flight now (its running tool killed, its approval answered
        "cancelled"); returns once it stopped. False when nothing was running. The session
        then waits for the next instruction."""

    @abstractmethod
    async def wait(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Return when no run of this session is in flight here; Timeout (also a
        TimeoutError) after `timeout` seconds if one still is. (A bound as an argument, as
        asyncio.wait_for takes one: the same call without `async`, SyncSession.wait, has no
        asyncio.timeout to put around it.)"""

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
    async def processes(self) -> SessionProcesses:
        """What its commands left running in the background between steps (a dev server, a
        database), each with the step that started it. Only a session's container keeps
        processes (`sandbox.isolation: container`, docs/containers.md): a session without
        one answers an empty list and the reason (`reason`), not an error."""

    @abstractmethod
    async def rename(self, title: str) -> None:
        """A new title (redacted, at most 200 characters: BadCommand otherwise)."""

    @abstractmethod
    async def rollback(
        self, step_id: str, *, accept_irreversible: bool = False, retry: bool = False
    ) -> RollbackAnswer:
        """Undo the outside effects after `step_id` (their compensations, the latest first),
        then rewind to just before it (it and every later step are deleted; the workspace
        files too). Effects nothing undoes (irreversible ones) must be accepted:
        `accept_irreversible=True`, else IrreversibleEffects names them (its `effects`, the
        preview) and nothing is done. CompensationFailed: a compensation failed and the
        rollback waits, nothing rewound — call again with `retry=True` (run it again) or
        `accept_irreversible=True` (leave it done), or `abandon_rollback()`. Busy while a run
        is in flight; BadStep for a bad id."""

    @abstractmethod
    async def rollback_preview(self, step_id: str) -> RollbackPreview:
        """What `rollback(step_id)` would undo outside the workspace, and what it would leave
        done (nothing is done)."""

    @abstractmethod
    async def abandon_rollback(self) -> None:
        """Stop a rollback that stopped half-way: nothing more is undone, memory and files
        stay as they are."""

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

    # --- schedules and webhooks (docs/schedules.md) -----------------------------------------
    async def add_schedule(
        self,
        message: str,
        *,
        cron: str | None = None,
        every: str | None = None,
        at: str | None = None,
        tz: str = "UTC",
        catch_up: Literal["skip", "once", "all"] = "skip",
        fork: bool = False,
    ) -> ScheduleInfo:
        """A schedule sending `message` to this session at each tick of one of: `cron` (five
        fields, "0 9 * * 1-5"), `every` (a period: "30s", "30m", "2h", "1d"), `at` (once, an
        ISO 8601 time; without an offset, in `tz`). `fork`: each fire forks this session (a
        template, never written) into a new session and sends the message there. `catch_up`:
        what the ticks missed while no worker ran do — none fires (`skip`), one for all
        (`once`), each (`all`). Every worker on the database fires it, each tick once; its
        creator's rights apply at each fire. BadRequest for a wrong expression, period, time,
        zone or policy, and for `fork` of a session with no step yet (a fork copies it up to
        its last step). A new session nothing was said to yet is written now, as naming it
        writes it (empty, titled by its first message): the schedule's first fire is that."""
        if fork:
            if self._not_written():
                raise ScheduleError(no_step_to_fork(self.id))
        else:
            await self._write_new()
        return await self.agent._add_schedule(
            self.id,
            message,
            cron=cron,
            every=every,
            at=at,
            tz=tz,
            catch_up=catch_up,
            fork=fork,
        )

    def _not_written(self) -> bool:
        """A new session this object made, nothing said to it yet (so nothing written)."""
        return False

    async def _write_new(self) -> None:
        """A new session nothing was said to yet written now, empty (its first message
        titles it) and running the agent it was made for: what a schedule or webhook sends
        to must exist. Nothing for a session already written."""
        return None

    async def schedules(self) -> list[ScheduleInfo]:
        """The schedules that send to this session or fork it (of those `agent.schedules()`
        lists: your own, or every one for an admin)."""
        return [s for s in await self.agent.schedules() if self.id in (s.session_id, s.fork_of)]

    async def add_hook(self, name: str, template: str) -> HookMade:
        """A webhook: a signed `POST /hooks/NAME` on the gateway sends `template` to this
        session, `{body}` replaced by the request's body and `{a.b}` by a field of its JSON.
        The answer holds its `secret` — the sender signs with it — this once (no later answer
        has it). `name`: 1-64 of a-z 0-9 _ -. BadRequest for a bad name or template. A new
        session nothing was said to yet is written now (empty), as for `add_schedule`."""
        await self._write_new()
        return await self.agent._add_hook(self.id, name, template)

    async def hooks(self) -> list[HookInfo]:
        """The webhooks that send to this session (never their secrets)."""
        return [h for h in await self.agent.hooks() if h.session_id == self.id]

    @property
    @abstractmethod
    def agent(self) -> Agent:
        """The agent this session belongs to."""


class Agent:
    """An agent, as a value and as the way to its sessions (docs/agents.md,
    docs/python-api.md).

    `xclaw.Agent("support", instructions=..., tools=[...], output_type=Ticket, ...)` is a
    definition: what the agent is made of. It runs once opened — `xclaw.open(agent=support)`
    (in this process) or `xclaw.connect(url, agent="support")` (a gateway that declares it) —
    which give an `Agent` too: the same definition with the session methods working. The
    session methods of a definition that was not opened raise AgentNotOpen, saying how.
    `xclaw.open()` without an agent gives xclaw's own (`name == "default"`)."""

    _definition: AgentDefinition = DEFAULT_AGENT

    def __init__(
        self,
        name: str,
        *,
        instructions: str | Callable[[ToolContext], str | Awaitable[str]] | None = None,
        extend_default: bool = False,
        description: str = "",
        tools: Iterable[Callable[..., Any] | str] = (),
        builtin_tools: Iterable[str] | Literal["all"] | None = "all",
        allowed_tools: Iterable[str] | None = None,
        model: str | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        output_type: Any = None,
        sub_agents: Iterable[Agent] = (),
        hooks: Hooks | None = None,
    ) -> None:
        """`instructions`: the system prompt (text, or a function of the run's ToolContext
        made once per turn and recorded), replacing xclaw's default or, with
        `extend_default`, after it. `tools`: its own Python functions (or `module:function`),
        and tools of the server by name or pattern (`mcp__time__*`). `builtin_tools`: which
        built-ins it is offered (`"all"`, a list, or `[]`/None: none). `allowed_tools`: only
        tools matching these names or patterns are offered at all. `model`: a provider spec
        of its own (None: the session's). `model_settings`: `temperature`, `max_tokens`,
        `max_iterations`. `output_type`: a pydantic model or a JSON schema its answers must
        be. `sub_agents`: agents it may hand a task to (spawn_agent's `agent`). `hooks`:
        xclaw.Hooks(before_tool=..., after_tool=..., before_model=...)."""
        self._definition = define(
            name,
            instructions=instructions,
            extend_default=extend_default,
            description=description,
            tools=tools,
            builtin_tools=builtin_tools,
            allowed_tools=allowed_tools,
            model=model,
            model_settings=model_settings,
            output_type=output_type,
            sub_agents=[_definition_of(a) for a in sub_agents],
            hooks=hooks,
        )

    # --- the definition -----------------------------------------------------------------
    @property
    def definition(self) -> AgentDefinition:
        return self._definition

    @property
    def name(self) -> str:
        """The agent's name (`default`: xclaw's own)."""
        return self._definition.name

    @property
    def digest(self) -> str:
        """What names this exact definition in the record (a session resumed or taken over
        runs only the definition it recorded)."""
        return self._definition.digest

    @property
    def output_type(self) -> Any:
        """What its answers are read into (None: text only)."""
        spec = self._definition.output
        return None if spec is None else spec.load

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.digest}>"

    def _not_open(self, what: str) -> XclawError:
        from xclaw.errors import AgentNotOpen

        return AgentNotOpen(
            f"agent {self.name!r} is a definition, not opened: {what} needs "
            f"`async with xclaw.open(agent=agent) as opened:` (in this process) or "
            f"`xclaw.connect(url, agent={self.name!r})` (a gateway that declares it), then "
            f"opened.{what}(...)"
        )

    # --- sessions (an opened agent) ---------------------------------------------------------
    async def new_session(
        self,
        title: str | None = None,
        *,
        agent: Agent | str | None = None,
        workspace: str | Path | None = None,
    ) -> Session:
        """A new session. With a title it is written now; without one it is written with its
        first message (and titled after it), as a client's new session is. `agent`: the
        declared agent it runs (default: this one). `workspace`: a directory of your own for
        it to work in — a project — instead of its default workspace (written now; rollback
        rewinds it in place, a fork gets a workspace of its own; docs/workspace.md).
        In-process only: a gateway's sessions work in the gateway's workspaces (BadCommand)."""
        raise self._not_open("new_session")

    async def session(self, ref: str) -> Session:
        """An existing session by its id or a unique prefix of it. UnknownSession,
        AmbiguousSession (the error lists the candidates)."""
        raise self._not_open("session")

    async def sessions(
        self, *, limit: int = 100, search: str | None = None, state: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first: `search` keeps those whose title or id
        contains it (case-insensitive), `state` those in that state (running, paused,
        waiting, interrupted, new, success, failed)."""
        raise self._not_open("sessions")

    async def search(self, word: str, *, limit: int = 100) -> list[SessionInfo]:
        """Sessions whose title or id contains `word` (case-insensitive)."""
        return await self.sessions(search=word, limit=limit)

    async def tools(self) -> list[ToolInfo]:
        """Every tool a session's agent may call here (built-in, Python, MCP), with its
        approval and resume policies."""
        raise self._not_open("tools")

    async def agents(self) -> list[AgentInfo]:
        """The agents a session may run here: xclaw's own (`default`) and the declared ones."""
        raise self._not_open("agents")

    # --- schedules and webhooks (docs/schedules.md) -----------------------------------------
    async def schedules(self) -> list[ScheduleInfo]:
        """The schedules: those you made (a member of a shared gateway), every one (an admin,
        the server's token, `xclaw.open`), oldest first."""
        raise self._not_open("schedules")

    async def schedule(self, schedule_id: str) -> ScheduleInfo:
        """One schedule, as it is now (its next tick, what it fired and skipped).
        UnknownSchedule: no schedule by that id, or another member's."""
        raise self._not_open("schedule")

    async def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Stop it firing until resumed (its creator's or an admin's to do). UnknownSchedule."""
        raise self._not_open("pause_schedule")

    async def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Fire it again; the ticks of the pause are missed ones, its catch-up policy decides
        what they do. UnknownSchedule."""
        raise self._not_open("resume_schedule")

    async def remove_schedule(self, schedule_id: str) -> None:
        """Remove it (its fires stay recorded). UnknownSchedule."""
        raise self._not_open("remove_schedule")

    async def schedule_fires(self, schedule_id: str) -> list[FireInfo]:
        """Its latest fires, newest first: each one's deterministic id (the message id it ran
        as), its state (`pending`, `delivered`, `refused`), why it waits or was refused, and
        the message's step. UnknownSchedule."""
        raise self._not_open("schedule_fires")

    async def hooks(self) -> list[HookInfo]:
        """The webhooks (never their secrets): yours, or every one for an admin."""
        raise self._not_open("hooks")

    async def hook_fires(self, name: str) -> list[FireInfo]:
        """A webhook's latest deliveries, newest first, as `schedule_fires`. UnknownSchedule."""
        raise self._not_open("hook_fires")

    async def remove_hook(self, name: str) -> None:
        """Remove a webhook: its URL answers 401 from then on. UnknownSchedule."""
        raise self._not_open("remove_hook")

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
        raise self._not_open("add_schedule")

    async def _add_hook(self, session_id: str, name: str, template: str) -> HookMade:
        raise self._not_open("add_hook")

    async def close(self) -> None:
        """Stop: in-process runs are stopped and marked interrupted (resumed by the next
        process that resumes them); a remote agent closes its connections."""
        raise self._not_open("close")

    async def __aenter__(self) -> Agent:
        raise self._not_open("__aenter__")

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def quoted_start(text: str) -> str:
    """A message as a warning names it: its start, quoted."""
    return repr(text if len(text) <= 40 else text[:37] + "…")


async def within(bound: float | None, waiting: Awaitable[None], what: str) -> None:
    """`waiting`, bounded by `bound` seconds (None: unbounded): Timeout when it runs out."""
    if bound is None:
        await waiting
        return
    from xclaw.errors import Timeout

    try:
        async with asyncio.timeout(bound):
            await waiting
    except TimeoutError as e:
        if isinstance(e, XclawError):
            raise
        raise Timeout(f"{what}: still not done after {bound:g} s") from None


def _definition_of(agent: Agent | AgentDefinition) -> AgentDefinition:
    return agent if isinstance(agent, AgentDefinition) else agent.definition


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
    from xclaw.wire.protocol import parse_command

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
