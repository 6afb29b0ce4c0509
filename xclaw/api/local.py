"""[api] The in-process API: `xclaw.open(...)` drives sessions with the same Runtime `xclaw serve`
runs (xclaw/runtime), on the same database and workspaces, so every promise holds as it does
behind the gateway (write-ahead, completed once, no blind repeat, one driver — another
process serving the same database is another worker, docs/postgres.md).

Reads go through the runtime's store calls (the Store protocol the gateway reads with,
off the event loop); everything that changes a session goes through the Runtime's methods.
The events are the runtime's frames, read into their typed classes (xclaw/wire/frames.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xclaw.agents.definition import DEFAULT_NAME, AgentDefinition
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
from xclaw.api.options import build_settings
from xclaw.errors import AgentClosed, ConfigError, DatabaseRefused, StoreError, UnknownSession
from xclaw.people.answered_by import AnsweredBy
from xclaw.people.teams import SERVER_TOKEN
from xclaw.store.steps.model import OWN_WORKSPACE_KEY
from xclaw.wire.build import queued_frame
from xclaw.wire.busy import BusyPolicy, check_policy
from xclaw.wire.frames import (
    BY_TYPE,
    SERVER_FRAME,
    CostSummary,
    HistoryFrame,
    HistoryMessage,
    QueuedFrame,
    QueuedMessage,
    SessionInfo,
    Step,
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
from xclaw.wire.protocol import session_json, step_json, tree_json
from xclaw.wire.shapes import Frame

if TYPE_CHECKING:
    from xclaw.llm.base import Model
    from xclaw.llm.provider import Provider
    from xclaw.runtime.runtime import Runtime
    from xclaw.schedules.firing import Scheduler
    from xclaw.store import Store

# Who answered an approval given through this API, as the record says it (docs/approval.md).
ANSWERED_BY = AnsweredBy.person("python", "in-process")
MAX_TITLE = 200


class LocalEvents(Events):
    """A run in this process: the runtime's frames for the session, from the moment it is
    asked to start to the moment its run task ends."""

    def __init__(
        self,
        session: LocalSession,
        start: Callable[[], Any],
        approve: Approve | None = None,
        *,
        what: str,
    ) -> None:
        super().__init__(session.id, approve, what=what)
        self._session = session
        self._begin = start
        self._unsubscribe: Callable[[], None] | None = None
        self._load = session.agent.load_output

    def _sink(self, frame: Frame) -> None:
        # Read into its class; a frame of a type this version does not know is ignored.
        if frame.get("type") in _KNOWN:
            self._push(SERVER_FRAME.validate_python(frame))

    async def _start(self) -> None:
        rt = self._session._rt
        sid = self.session_id
        self._unsubscribe = rt.subscribe(sid, self._sink)
        try:
            started = await self._begin()
        except BaseException:
            self._done()
            raise
        if isinstance(started, QueuedFrame):  # kept for later: its one event, and the end
            self._pending.clear()  # (the run in flight's frames are not this one's)
            self._push(started)
            self._done()
            return
        run = rt.runs.get(sid)
        if started is False or run is None or run.task is None or run.task.done():
            self._done()
            return
        run.task.add_done_callback(lambda _task: self._done())

    def _done(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._finish()

    async def _stop(self) -> None:
        rt = self._session._rt
        rt.cancel(self.session_id)
        # Its tool's processes killed, its steps written (not the queued runs after it).
        await rt.wait_idle(self.session_id, following=False)

    async def _answer(self, step_id: str, answer: Approval) -> None:
        await self._session.approve(
            step_id, answer.approved, message=answer.message, input=answer.input
        )


class LocalSession(Session):
    def __init__(
        self,
        agent: LocalAgent,
        session_id: str,
        title: str,
        *,
        unwritten: bool,
        runs: str | None = None,
    ) -> None:
        super().__init__(session_id, title)
        self._agent = agent
        # A new session without a title: written by its first message (Runtime.send create).
        self._unwritten = unwritten
        # The declared agent a new session runs, said with its first message (recorded).
        self._runs = runs

    @property
    def agent(self) -> LocalAgent:
        return self._agent

    @property
    def _rt(self) -> Runtime:
        """The agent's runtime; AgentClosed once the agent is closed."""
        return self._agent._live()

    def _written(self) -> None:
        self._unwritten = False
        self._agent._unwritten.discard(self.id)

    def _not_written(self) -> bool:
        return self._unwritten

    async def _write_new(self) -> None:
        if not self._unwritten:
            return
        rt = self._rt
        if await rt.db(rt.store.record.find_session, self.id) is None:
            try:
                await rt.db(rt.store.record.create_session, session_id=self.id)
            except StoreError:  # written meanwhile (its first message, elsewhere)
                if await rt.db(rt.store.record.find_session, self.id) is None:
                    raise
            else:
                if self._runs is not None and self._runs != DEFAULT_NAME:
                    await rt.choose_agent(self.id, self._runs)  # its fires run it
        self._written()

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
        if busy is not None:
            check_policy(busy)  # ValueError now, not when it is started
        named = self._agent.register(agent) if agent is not None else None

        async def start() -> bool | QueuedFrame:
            runs = named or (self._runs if self._unwritten else None)
            sent = await self._rt.submit(
                self.id, text, busy=busy, create=self._unwritten, agent=runs
            )
            self._written()
            if sent.queued is not None:
                return QueuedFrame.model_validate(
                    queued_frame(self.id, sent.queued.id, sent.queued.mode, sent.duplicate)
                )
            return True

        return LocalEvents(self, start, approve, what=f"session.send({quoted_start(text)})")

    async def queued(self) -> list[QueuedMessage]:
        return [QueuedMessage.model_validate(e.to_json()) for e in await self._rt.queued(self.id)]

    async def unqueue(self, message_id: str) -> bool:
        return await self._rt.unqueue(self.id, message_id) is not None

    def resume(self, *, approve: Approve | None = None, failed: bool = False) -> Events:
        async def start() -> bool:
            if not await self._exists():
                return False  # a new session nothing was said to yet
            return await self._rt.resume_if_needed(self.id, failed=failed)

        return LocalEvents(self, start, approve, what="session.resume()")

    def compact(self) -> Events:
        async def start() -> bool:
            await self._rt.compact(self.id)
            return True

        return LocalEvents(self, start, what="session.compact()")

    async def approve(
        self,
        step_id: str,
        approve: bool = True,
        *,
        message: str | None = None,
        input: Mapping[str, Any] | None = None,
        client: str | None = None,
    ) -> None:
        from xclaw.errors import BadStep

        by = ANSWERED_BY if client is None else AnsweredBy.person(_client(client), "in-process")
        try:
            self._rt.answer_approval(self.id, step_id, approve, by, message=message, edited=input)
        except BadStep:
            raise BadStep.not_waiting(step_id, self.id) from None

    async def cancel(self) -> bool:
        stopped = self._rt.cancel(self.id)
        await self._rt.wait_idle(self.id, following=False)
        return stopped

    async def wait(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await within(timeout, self._rt.wait_idle(self.id), f"the run of session {self.id}")

    # --- the record ---------------------------------------------------------------------------
    async def info(self) -> SessionInfo:
        rt = self._rt
        found = await rt.db(rt.store.record.find_session, self.id)
        if found is None:
            if not self._unwritten:
                raise UnknownSession(self.id)
            found, _ = await rt.peek(self.id)
        shown = SessionInfo.model_validate(rt.redact(session_json(found, busy=rt.is_busy(self.id))))
        self._title = shown.title
        return shown

    async def steps(self, n: int | None = None) -> list[Step]:
        rt = self._rt
        if not await self._exists():
            return []  # a new session nothing was said to yet
        if n is None:
            rows = await rt.db(rt.store.record.steps, self.id)
        else:
            rows = await rt.db(rt.store.record.latest_steps, self.id, n)
        return [Step.model_validate(rt.redact(step_json(st, rt.prices))) for st in rows]

    async def trace(self) -> list[TreeNode]:
        rt = self._rt
        if not await self._exists():
            return []
        roots = await rt.db(rt.store.record.step_tree, self.id)
        return [TreeNode.model_validate(rt.redact(tree_json(r, rt.prices))) for r in roots]

    async def history(self) -> list[HistoryMessage]:
        if not await self._exists():
            return []
        frame = await asyncio.to_thread(self._rt.history_frame, self.id)
        return HistoryFrame.model_validate(frame).messages

    async def usage(self) -> CostSummary:
        from xclaw.views.record import session_cost

        rt = self._rt
        rows = await rt.db(rt.store.record.steps, self.id) if await self._exists() else []
        return CostSummary.model_validate(session_cost(rows, rt.prices).to_json())

    async def _exists(self) -> bool:
        """False for a new session not written yet (no steps); UnknownSession when gone."""
        rt = self._rt
        if await rt.db(rt.store.record.find_session, self.id) is not None:
            return True
        if self._unwritten:
            return False
        raise UnknownSession(self.id)

    async def rename(self, title: str) -> None:
        clean = _title(title)
        rt = self._rt
        if self._unwritten:  # naming it is the first thing said to it: written now
            await rt.db(
                rt.store.record.create_session, session_id=self.id, title=rt.title_of(clean)
            )
            self._written()
        session = await rt.rename(self.id, clean)
        self._title = session.title

    async def rollback(
        self, step_id: str, *, accept_irreversible: bool = False, retry: bool = False
    ) -> RollbackAnswer:
        from xclaw.store.steps.model import display_id

        result = await self._rt.rollback(
            self.id,
            step_id,
            accept_irreversible=accept_irreversible,
            retry=retry,
            by=ANSWERED_BY,
        )
        return RollbackAnswer.model_validate(
            self._rt.redact(
                {
                    "session": session_json(result.session, busy=False),
                    "stepId": display_id(result.target_seq),
                    "deleted": result.deleted,
                    "compensated": result.compensated_json(),
                    "notUndone": result.not_undone_json(),
                }
            )
        )

    async def processes(self) -> SessionProcesses:
        listing = await self._rt.processes(self.id)
        return SessionProcesses.model_validate(self._rt.redact(listing.to_json()))

    async def rollback_preview(self, step_id: str) -> RollbackPreview:
        preview = await self._rt.rollback_preview(self.id, step_id)
        return RollbackPreview.model_validate(self._rt.redact(preview.as_json()))

    async def abandon_rollback(self) -> None:
        await self._rt.abandon_rollback(self.id, by=ANSWERED_BY)

    async def fork(self, step_id: str, title: str | None = None) -> LocalSession:
        new = await self._rt.fork(self.id, step_id, None if title is None else _title(title))
        return LocalSession(self._agent, new.session_id, new.title, unwritten=False)

    async def delete(self) -> None:
        await self._rt.delete(self.id)


class LocalAgent(Agent):
    """Sessions driven in this process (see the module docstring), by the agent it was
    opened with (`xclaw.open(agent=...)`; xclaw's own without one)."""

    def __init__(
        self, runtime: Runtime, store: Store, definition: AgentDefinition | None = None
    ) -> None:
        self.runtime = runtime
        self._store = store
        self._closed = False
        # New sessions handed out without a title, not written yet: found by their id.
        self._unwritten: set[str] = set()
        if definition is not None:
            self._definition = runtime.agents.add(definition, replace=True)
        self._scheduler: Scheduler | None = None

    def _live(self) -> Runtime:
        if self._closed:
            raise AgentClosed(
                "this agent is closed (agent.close(), or the end of its `async with`); "
                "open another with xclaw.open(...)"
            )
        return self.runtime

    def register(self, agent: Agent | str) -> str:
        """The name a session's run gives the runtime: a definition given here is known to
        it from now on; a name must be declared (UnknownAgent otherwise)."""
        from xclaw.errors import UnknownAgent

        if isinstance(agent, str):
            if agent not in self.runtime.agents:
                known = ", ".join(d.name for d in self.runtime.agents.named()) or "none"
                raise UnknownAgent(f"no agent named {agent!r} is declared here (declared: {known})")
            return agent
        return self.runtime.agents.add(agent.definition, replace=True).name

    def load_output(self, agent: str | None, value: Any) -> Any:
        """A structured answer read into the type its agent declares (RunResult.output)."""
        definition = self.runtime.agents.get(agent or "")
        if definition is None or definition.output is None:
            return value
        try:
            return definition.output.load(value)
        except ValueError:
            return value  # declared otherwise now: the answer as it was given

    async def new_session(
        self,
        title: str | None = None,
        *,
        agent: Agent | str | None = None,
        workspace: str | Path | None = None,
    ) -> LocalSession:
        rt = self._live()
        runs = self.register(agent if agent is not None else self)
        fresh, _ = await rt.peek(None)
        if workspace is not None:
            # Written now, with its directory: every process resolves its workspace from it.
            own = rt.own_directory(workspace)
            made = await rt.db(
                rt.store.record.create_session,
                session_id=fresh.session_id,
                title=rt.title_of(_title(title or "")),
                metadata={OWN_WORKSPACE_KEY: str(own)},
            )
            if runs != DEFAULT_NAME:  # recorded now too: its first message runs it
                made = await rt.choose_agent(made.session_id, runs)
            return LocalSession(self, made.session_id, made.title, unwritten=False, runs=runs)
        if title is None:
            self._unwritten.add(fresh.session_id)
            return LocalSession(self, fresh.session_id, "", unwritten=True, runs=runs)
        clean = rt.title_of(_title(title))
        made = await rt.db(rt.store.record.create_session, session_id=fresh.session_id, title=clean)
        if runs != DEFAULT_NAME:  # recorded now, as its title: its first message runs it
            made = await rt.choose_agent(made.session_id, runs)
        return LocalSession(self, made.session_id, made.title, unwritten=False, runs=runs)

    async def session(self, ref: str) -> LocalSession:
        rt = self._live()
        try:
            found = await rt.db(rt.store.record.resolve_session, ref)
        except UnknownSession:
            if ref not in self._unwritten:
                raise
            if await rt.db(rt.store.record.find_session, ref) is None:  # written meanwhile?
                return LocalSession(self, ref, "", unwritten=True)
            found = await rt.db(rt.store.record.get_session, ref)
        return LocalSession(self, found.session_id, rt.title_of(found.title), unwritten=False)

    async def sessions(
        self, *, limit: int = 100, search: str | None = None, state: str | None = None
    ) -> list[SessionInfo]:
        rt = self._live()
        narrowed = bool(search or state)
        rows = await rt.db(rt.store.record.list_sessions, limit=None if narrowed else limit)
        word = (search or "").lower()
        out = []
        for s in rows:
            shown = rt.redact(session_json(s, busy=rt.is_busy(s.session_id)))
            if word and word not in shown["title"].lower() and word not in s.session_id.lower():
                continue
            if state is not None and shown["state"] != state:
                continue
            out.append(SessionInfo.model_validate(shown))
            if len(out) >= limit:
                break
        return out

    async def tools(self) -> list[ToolInfo]:
        """The tools this agent is offered (xclaw's own: every tool here)."""
        from xclaw.runtime.drive import agent_config
        from xclaw.tools.approval import ApprovalPolicy
        from xclaw.tools.listing import tool_rows

        rt = self._live()
        await rt.toolbox.prepare()  # MCP servers start here if no run has started them yet
        parts = rt.agent_setups.parts(self._definition, agent_config(rt.settings))
        tools = rt.toolbox.tools if parts is None else parts.tools
        rows = tool_rows(tools, ApprovalPolicy.from_settings(rt.settings.tool_setup()))
        return [ToolInfo.model_validate(r) for r in rt.redact(rows)]

    async def agents(self) -> list[AgentInfo]:
        return [AgentInfo.model_validate(a) for a in self.runtime.agents.listing()]

    # --- schedules and webhooks: as `xclaw schedule` and `xclaw hook` make them, as the admin
    # (xclaw/schedules/making.py); every `xclaw serve` on the database fires them.
    def fire_schedules(self) -> None:
        """Fire the database's schedules in this process while it is open (`open(schedules=
        True)`): one more worker, with the gateway's own checks (xclaw/schedules/firing.py)."""
        from xclaw.schedules.firing import Scheduler

        rt = self.runtime
        if not rt.settings.schedules.enabled:
            return
        s = rt.settings.schedules
        self._scheduler = Scheduler(
            rt.store,
            rt.store.teams,
            rt,
            rt.worker_id,
            grace_ms=int(s.grace_s * 1000),
            poll_s=s.poll_s,
        )
        self._scheduler.start()

    async def _schedules_call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        rt = self._live()
        return await rt.db(fn, rt.store, SERVER_TOKEN, *args, **kwargs)

    def _schedule_info(self, row: Any) -> ScheduleInfo:
        return ScheduleInfo.model_validate(self.runtime.redact(row.to_json()))

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
        import time

        from xclaw.schedules.making import add_schedule, kind_of

        kind, when = kind_of(cron, every, at)
        made = await self._schedules_call(
            add_schedule,
            kind=kind,
            when=when,
            tz=tz,
            session=None if fork else session_id,
            fork_of=session_id if fork else None,
            message=message,
            catch_up=catch_up,
            now_ms=int(time.time() * 1000),
        )
        if self._scheduler is not None:
            self._scheduler.wake()  # a moment already past fires at once
        return self._schedule_info(made)

    async def schedules(self) -> list[ScheduleInfo]:
        rt = self._live()
        rows = await rt.db(rt.store.schedules.schedules)
        return [self._schedule_info(r) for r in rows]

    async def schedule(self, schedule_id: str) -> ScheduleInfo:
        rt = self._live()
        return self._schedule_info(await rt.db(rt.store.schedules.get_schedule, schedule_id))

    async def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        from xclaw.schedules.making import change_schedule

        return self._schedule_info(
            await self._schedules_call(change_schedule, schedule_id, paused=True)
        )

    async def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        from xclaw.schedules.making import change_schedule

        return self._schedule_info(
            await self._schedules_call(change_schedule, schedule_id, paused=False)
        )

    async def remove_schedule(self, schedule_id: str) -> None:
        from xclaw.schedules.making import change_schedule

        await self._schedules_call(change_schedule, schedule_id, paused=None)

    async def _fires(self, source: str, name: str) -> list[FireInfo]:
        rt = self._live()
        rows = await rt.db(rt.store.schedules.fires_of, name)
        return [FireInfo.model_validate(rt.redact(f.to_json())) for f in rows if f.source == source]

    async def schedule_fires(self, schedule_id: str) -> list[FireInfo]:
        await self.schedule(schedule_id)  # UnknownSchedule
        return await self._fires("schedule", schedule_id)

    async def _add_hook(self, session_id: str, name: str, template: str) -> HookMade:
        import time

        from xclaw.schedules.making import add_hook

        made = await self._schedules_call(
            add_hook,
            name=name,
            session=session_id,
            template=template,
            now_ms=int(time.time() * 1000),
        )
        # Not redacted: the secret is what this answer is for (shown this once).
        return HookMade.model_validate(
            {**self.runtime.redact(made.to_json()), "secret": made.secret}
        )

    async def hooks(self) -> list[HookInfo]:
        rt = self._live()
        rows = await rt.db(rt.store.schedules.hooks)
        return [HookInfo.model_validate(rt.redact(h.to_json())) for h in rows]

    async def hook_fires(self, name: str) -> list[FireInfo]:
        from xclaw.errors import UnknownSchedule

        rt = self._live()
        if await rt.db(rt.store.schedules.get_hook, name) is None:
            raise UnknownSchedule(f"no webhook {name!r}")
        return await self._fires("hook", name)

    async def remove_hook(self, name: str) -> None:
        from xclaw.schedules.making import remove_hook

        await self._schedules_call(remove_hook, name)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._scheduler is not None:
                await self._scheduler.stop()
            await self.runtime.shutdown()
        finally:
            self._store.close()

    async def __aenter__(self) -> LocalAgent:
        return self


def _client(word: str) -> str:
    from xclaw.errors import BadCommand
    from xclaw.people.answered_by import CLIENT_RE

    if not CLIENT_RE.match(word):
        raise BadCommand(f"client {word!r}: lowercase letters, digits, '-', '_' (at most 32)")
    return word


def _title(title: str) -> str:
    from xclaw.errors import BadCommand

    clean = " ".join(title.split())
    if len(clean) > MAX_TITLE:
        raise BadCommand(f"a title has at most {MAX_TITLE} characters (this one has {len(clean)})")
    return clean


_KNOWN = frozenset(BY_TYPE)


class Opening:
    """What `xclaw.open(...)` returns: awaitable (the agent) and an async context manager
    (the agent, closed when the block ends)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._agent: LocalAgent | None = None

    async def _open(self) -> LocalAgent:
        from xclaw.runtime.runtime import Runtime
        from xclaw.store import Access, open_store

        o = dict(self._options)
        model: Model | None = o.pop("model_object", None)
        agent: Agent | str | None = o.pop("agent", None)
        agents: tuple[Agent, ...] = o.pop("agents", ())
        deps: Any = o.pop("deps", None)
        fire_schedules: bool = o.pop("schedules", False)
        settings, toolbox_extra = build_settings(**o)
        _refuse_missing_directory(settings.database, settings.home)
        store = open_store(
            settings.database,
            access=Access.CREATE,
            blob_store=settings.blob_store,
            blob_grace_s=settings.blob_grace_s,
        )
        try:
            runtime = Runtime(store, settings, model=model)
            for tool in toolbox_extra:
                if tool.name in runtime.toolbox.tools:
                    raise ConfigError(
                        f"tools: {tool.ref!r}: a tool named {tool.name!r} exists already"
                    )
                runtime.toolbox.tools[tool.name] = tool
            runtime.deps = deps
            for other in agents:
                runtime.agents.add(other.definition, replace=True)
            definition = None
            if isinstance(agent, str):
                definition = runtime.agents.get(agent)
                if definition is None:
                    from xclaw.errors import UnknownAgent

                    known = ", ".join(d.name for d in runtime.agents.named()) or "none"
                    raise UnknownAgent(
                        f"open(agent={agent!r}): no agent of that name is declared "
                        f"(xclaw.yaml's agents: declares {known})"
                    )
            elif agent is not None:
                definition = agent.definition
            self._agent = LocalAgent(runtime, store, definition)
            if fire_schedules:
                self._agent.fire_schedules()
        except BaseException:
            store.close()
            raise
        return self._agent

    def __await__(self) -> Generator[Any, None, LocalAgent]:
        return self._open().__await__()

    async def __aenter__(self) -> LocalAgent:
        return await self._open()

    async def __aexit__(self, *exc: object) -> None:
        if self._agent is not None:
            await self._agent.close()


def _refuse_missing_directory(database: str, home: Path) -> None:
    """A SQLite file goes in a directory that exists (a misspelt path creates nothing, as
    with the command line); only xclaw's own home is made when missing."""
    text = database.removeprefix("sqlite:///")
    if "://" in text or not text.strip():
        return  # PostgreSQL, or what open_store refuses with its own words
    parent = Path(text).expanduser().parent
    if parent.is_dir() or parent == Path(home).expanduser():
        return
    raise DatabaseRefused(
        f"no directory {parent} for the database {text}: create it first, or check the path"
    )


def open(
    db: str | Path | None = None,
    *,
    model: str | Model | None = None,
    approval: str | None = None,
    workspace: str | Path | None = None,
    home: str | Path | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    tools: Iterable[Callable[..., Any] | str] = (),
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    providers: Sequence[str | Mapping[str, Any]] | None = None,
    provider_kinds: Sequence[Provider[Any]] = (),
    cwd: str | Path | None = None,
    agent: Agent | str | None = None,
    agents: Iterable[Agent] = (),
    deps: Any = None,
    schedules: bool = False,
) -> Opening:
    """An agent in this process, on the database `db` (a SQLite path or a postgresql://
    URL; default: as `xclaw serve` finds it — XCLAW_DB, xclaw.yaml, ~/.xclaw/xclaw.db).

    Settings are read as every xclaw command reads them (the environment, `.env` and
    xclaw.yaml in `cwd`, docs/configuration.md); the arguments win over them:

    - model: a provider spec (`openai:gpt-4o-mini`, `script:path.json`, comma-separated
      for a fallback chain), or an object implementing xclaw.llm.base.Model
    - approval: `ask`, `auto-edits` or `yolo`; workspace, home: directories
    - config: another xclaw.yaml (a path), or its content (a mapping) instead of the file
    - tools: Python functions (marked with @xclaw.tool, or plain typed functions) or
      `module:function` references, added to the built-in tools
    - mcp_servers: MCP servers by name, as xclaw.yaml's `mcp_servers:`
    - providers: the provider chain, as xclaw.yaml's `providers:` (specs or mappings)
    - provider_kinds: kinds of model of your own (xclaw.llm.provider.Provider objects), as a
      provider package adds them: their `<kind>:<model>` specs work in model and providers
    - agent: the agent its new sessions run (an `xclaw.Agent`, or the name of one of
      xclaw.yaml's `agents:`); without one, xclaw's own (docs/agents.md)
    - agents: more agents a session may run (`send(..., agent=...)`, sub-agents' names)
    - deps: your program's own object, given to every tool, hook and instructions
      function as `ctx.deps` (never recorded)
    - schedules: fire the database's schedules here while the agent is open, as one more
      worker beside any `xclaw serve` on it (each tick once, docs/schedules.md); by default
      they are made and read here and fired by the servers

    `async with xclaw.open(...) as agent:` closes it at the end of the block;
    `agent = await xclaw.open(...)` leaves that to `await agent.close()`.
    """
    options: dict[str, Any] = {
        "db": db,
        "approval": approval,
        "workspace": workspace,
        "home": home,
        "config": config,
        "tools": tuple(tools),
        "mcp_servers": mcp_servers,
        "providers": providers,
        "provider_kinds": tuple(provider_kinds),
        "cwd": cwd,
        "agent": agent,
        "agents": tuple(agents),
        "deps": deps,
        "schedules": schedules,
    }
    if isinstance(model, str) or model is None:
        options["model"] = model
    else:
        options["model_object"] = model
    return Opening(**options)
