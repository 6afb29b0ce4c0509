"""[api] The Python API without `async`: for scripts, notebooks and other code without an event
loop of its own (a notebook has one already running, which is why this does not use it).

The agent lives on an event loop of its own, in a daemon thread; each call hands it a
coroutine and waits for the answer. A run's events come back as a plain iterator. Ctrl+C
(KeyboardInterrupt) while a call waits cancels that call — for a run, the run itself, as
Session.cancel does — and the interrupt goes on up.

    with xclaw.open_sync(db="app.db", model="script:demo.json") as agent:
        session = agent.new_session(title="notes")
        for event in session.send("hello"):
            print(event.type)
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, ParamSpec, TypeVar

from xclaw.api.base import Agent, Approval, Approve, Event, Events, RunResult, Session
from xclaw.api.local import open as open_async
from xclaw.api.remote import connect
from xclaw.wire.busy import BusyPolicy
from xclaw.wire.frames import (
    ApprovalRequestFrame,
    CostSummary,
    HistoryMessage,
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

T = TypeVar("T")
P = ParamSpec("P")

# How long Ctrl+C waits for the run it cancels to stop (a tool's processes get SIGTERM, then
# SIGKILL after the shell's grace): a bound, not a pause — it ends once the run has stopped.
STOP_WAIT_S = 60.0


class _Loop:
    """An event loop running in a daemon thread; `call` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="xclaw-api", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        ended = threading.Event()
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:
            task = self.loop.create_task(coro)
            task.add_done_callback(lambda _task: ended.set())
            tasks.append(task)

        def cancel() -> None:
            tasks[0].cancel()  # (queued after `start`: the task is there)

        self.loop.call_soon_threadsafe(start)
        try:
            ended.wait()
        except KeyboardInterrupt:
            # The task is cancelled where it waits — a run is cancelled — and the interrupt
            # goes on up once it has ended: the run stopped, its tool's processes killed
            # (Events._cancelled). A second Ctrl+C stops the waiting.
            self.loop.call_soon_threadsafe(cancel)
            ended.wait(timeout=STOP_WAIT_S)
            raise
        return tasks[0].result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        if not self.thread.is_alive():
            self.loop.close()


class SyncEvents:
    """A run's events as a plain iterator (`for event in session.send(...)`), or its result
    (`.result()`). As the async Events: the run starts when the iteration begins."""

    def __init__(self, loop: _Loop, events: Events) -> None:
        self._loop = loop
        self._events = events

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            return self._loop.call(self._events.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def result(self) -> RunResult:
        """Run to the end: every event, the reply or the error."""
        return self._loop.call(self._events.result())


class SyncSession:
    """Session, without `await` (see xclaw.api.base.Session for what each method does)."""

    def __init__(self, loop: _Loop, session: Session, agent: SyncAgent) -> None:
        self._loop = loop
        self.session = session
        self._agent = agent

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def title(self) -> str:
        return self.session.title

    @property
    def agent(self) -> SyncAgent:
        return self._agent

    def __repr__(self) -> str:
        return f"<SyncSession {self.id} {self.title!r}>"

    def _approve(self, approve: Approve | None) -> Approve | None:
        """A plain function asked for approvals runs off the agent's loop (it may block,
        e.g. on input())."""
        if approve is None or isinstance(approve, bool):
            return approve
        rule = approve

        async def decide(request: ApprovalRequestFrame) -> bool | Approval:
            if inspect.iscoroutinefunction(rule):
                answer: Any = await rule(request)
            else:
                answer = await asyncio.to_thread(rule, request)
                if inspect.isawaitable(answer):
                    answer = await answer
            return answer if isinstance(answer, Approval) else bool(answer)

        return decide

    def send(
        self,
        text: str,
        *,
        approve: Approve | None = None,
        agent: Agent | str | None = None,
        busy: BusyPolicy | None = None,
    ) -> SyncEvents:
        return SyncEvents(
            self._loop,
            self.session.send(text, approve=self._approve(approve), agent=agent, busy=busy),
        )

    def run(
        self,
        text: str,
        *,
        approve: Approve | None = None,
        agent: Agent | str | None = None,
        busy: BusyPolicy | None = None,
    ) -> RunResult:
        """send(...).result(): the run to its end (or, kept for later, its `queued`)."""
        return self.send(text, approve=approve, agent=agent, busy=busy).result()

    def queued(self) -> list[QueuedMessage]:
        return self._loop.call(self.session.queued())

    def unqueue(self, message_id: str) -> bool:
        return self._loop.call(self.session.unqueue(message_id))

    def resume(self, *, approve: Approve | None = None, failed: bool = False) -> SyncEvents:
        return SyncEvents(
            self._loop, self.session.resume(approve=self._approve(approve), failed=failed)
        )

    def compact(self) -> SyncEvents:
        return SyncEvents(self._loop, self.session.compact())

    def approve(
        self,
        step_id: str,
        approve: bool = True,
        *,
        message: str | None = None,
        input: Mapping[str, Any] | None = None,
        client: str | None = None,
    ) -> None:
        self._loop.call(
            self.session.approve(step_id, approve, message=message, input=input, client=client)
        )

    def cancel(self) -> bool:
        return self._loop.call(self.session.cancel())

    def wait(self, timeout: float | None = None) -> None:
        self._loop.call(self.session.wait(timeout))

    def info(self) -> SessionInfo:
        return self._loop.call(self.session.info())

    def steps(self, n: int | None = None) -> list[Step]:
        return self._loop.call(self.session.steps(n))

    def trace(self) -> list[TreeNode]:
        return self._loop.call(self.session.trace())

    def history(self) -> list[HistoryMessage]:
        return self._loop.call(self.session.history())

    def usage(self) -> CostSummary:
        return self._loop.call(self.session.usage())

    def rename(self, title: str) -> None:
        self._loop.call(self.session.rename(title))

    def rollback(
        self, step_id: str, *, accept_irreversible: bool = False, retry: bool = False
    ) -> RollbackAnswer:
        return self._loop.call(
            self.session.rollback(step_id, accept_irreversible=accept_irreversible, retry=retry)
        )

    def rollback_preview(self, step_id: str) -> RollbackPreview:
        return self._loop.call(self.session.rollback_preview(step_id))

    def processes(self) -> SessionProcesses:
        return self._loop.call(self.session.processes())

    def abandon_rollback(self) -> None:
        self._loop.call(self.session.abandon_rollback())

    def fork(self, step_id: str, title: str | None = None) -> SyncSession:
        return SyncSession(
            self._loop, self._loop.call(self.session.fork(step_id, title)), self._agent
        )

    def delete(self) -> None:
        self._loop.call(self.session.delete())

    def tools(self) -> list[ToolInfo]:
        return self._loop.call(self.session.tools())

    def add_schedule(
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
        made = self.session.add_schedule(
            message, cron=cron, every=every, at=at, tz=tz, catch_up=catch_up, fork=fork
        )
        return self._loop.call(made)

    def schedules(self) -> list[ScheduleInfo]:
        return self._loop.call(self.session.schedules())

    def add_hook(self, name: str, template: str) -> HookMade:
        return self._loop.call(self.session.add_hook(name, template))

    def hooks(self) -> list[HookInfo]:
        return self._loop.call(self.session.hooks())


class SyncAgent:
    """Agent, without `await`; a context manager (`with`) that closes it at the end."""

    def __init__(self, loop: _Loop, agent: Agent) -> None:
        self._loop = loop
        self.agent = agent

    @property
    def name(self) -> str:
        """The agent's name (`default`: xclaw's own)."""
        return self.agent.name

    def new_session(
        self,
        title: str | None = None,
        *,
        agent: Agent | str | None = None,
        workspace: str | Path | None = None,
    ) -> SyncSession:
        made = self._loop.call(self.agent.new_session(title, agent=agent, workspace=workspace))
        return SyncSession(self._loop, made, self)

    def session(self, ref: str) -> SyncSession:
        return SyncSession(self._loop, self._loop.call(self.agent.session(ref)), self)

    def sessions(
        self, *, limit: int = 100, search: str | None = None, state: str | None = None
    ) -> list[SessionInfo]:
        return self._loop.call(self.agent.sessions(limit=limit, search=search, state=state))

    def search(self, word: str, *, limit: int = 100) -> list[SessionInfo]:
        return self._loop.call(self.agent.search(word, limit=limit))

    def tools(self) -> list[ToolInfo]:
        return self._loop.call(self.agent.tools())

    def agents(self) -> list[AgentInfo]:
        return self._loop.call(self.agent.agents())

    def schedules(self) -> list[ScheduleInfo]:
        return self._loop.call(self.agent.schedules())

    def schedule(self, schedule_id: str) -> ScheduleInfo:
        return self._loop.call(self.agent.schedule(schedule_id))

    def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        return self._loop.call(self.agent.pause_schedule(schedule_id))

    def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        return self._loop.call(self.agent.resume_schedule(schedule_id))

    def remove_schedule(self, schedule_id: str) -> None:
        self._loop.call(self.agent.remove_schedule(schedule_id))

    def schedule_fires(self, schedule_id: str) -> list[FireInfo]:
        return self._loop.call(self.agent.schedule_fires(schedule_id))

    def hooks(self) -> list[HookInfo]:
        return self._loop.call(self.agent.hooks())

    def hook_fires(self, name: str) -> list[FireInfo]:
        return self._loop.call(self.agent.hook_fires(name))

    def remove_hook(self, name: str) -> None:
        self._loop.call(self.agent.remove_hook(name))

    def close(self) -> None:
        try:
            self._loop.call(self.agent.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> SyncAgent:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _synchronous(opener: Callable[P, Awaitable[Agent]]) -> Callable[P, SyncAgent]:
    """`opener` (xclaw.open, xclaw.connect) without an event loop: the same arguments, the
    agent on a loop of its own."""

    def start(*args: P.args, **kwargs: P.kwargs) -> SyncAgent:
        loop = _Loop()

        async def opened() -> Agent:
            return await opener(*args, **kwargs)

        try:
            return SyncAgent(loop, loop.call(opened()))
        except BaseException:
            loop.stop()
            raise

    start.__name__ = f"{opener.__name__}_sync"
    start.__doc__ = (
        f"xclaw.{opener.__name__}(...) without an event loop: the same arguments, a SyncAgent."
        f"\n\n{opener.__doc__ or ''}"
    )
    return start


open_sync = _synchronous(open_async)
connect_sync = _synchronous(connect)


def _same_words() -> None:
    """Each method here does what the async method of the same name does: it says so in
    the same words (help(), an editor's hover)."""
    for sync, base in ((SyncSession, Session), (SyncAgent, Agent)):
        for name, member in vars(sync).items():
            if name.startswith("_") or not callable(member) or member.__doc__:
                continue
            member.__doc__ = getattr(base, name).__doc__


_same_words()
