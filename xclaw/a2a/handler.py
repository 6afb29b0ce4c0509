"""[a2a] The A2A methods (`a2a-sdk`'s RequestHandler, served by its JSON-RPC dispatcher) over xclaw
sessions (docs/a2a.md): SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask,
SubscribeToTask. Push notifications and the extended card are not offered.

Built on the gateway's seams only — GatewayRuntime, the Store, the access checks the HTTP API
makes (xclaw/gateway/access.py) — and answered from the record (xclaw/a2a/tasks.py): after
a restart GetTask shows a task where the record has it, and SubscribeToTask (or GetTask)
lets interrupted work go on, as a client attaching does. Another person's task or context
answers as one nobody has.

A message is recorded write-ahead with its `messageId` (xclaw/gateway/message_ids.py): the
same message sent again — a caller that crashed, or `a2a_call` settling a call — gets the
task it made, and never runs twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length

from xclaw.a2a.files import changed_files
from xclaw.a2a.tasks import (
    ANSWER_ARTIFACT,
    STREAM_ENDS,
    TERMINAL,
    Turn,
    answer_artifact,
    metadata_struct,
    state_of,
    task_of,
    text_message,
    turns_of,
    waiting_task,
    waiting_task_id,
)
from xclaw.errors import Forbidden, SessionNotFound, XclawError
from xclaw.gateway.adapter_commands import may_run, run_command
from xclaw.gateway.context import Gateway
from xclaw.gateway.following import Following
from xclaw.gateway.identity import SignedIn
from xclaw.gateway.message_ids import client_ids, protocol_id
from xclaw.people.teams import Actor, Identity, Need
from xclaw.store.steps.model import MAIN_AGENT, Session, Status, Step
from xclaw.wire.busy import policy_for
from xclaw.wire.protocol import MAX_FRAME_BYTES, Command
from xclaw.wire.session_commands import protocol_command

log = logging.getLogger("xclaw.a2a")

KEY_PREFIX = "a2a:"
KEEPALIVE_S = 15.0
MAX_PAGE = 100
DEFAULT_PAGE = 50
CANCEL_WAIT_S = 15.0
SENT_WAIT_S = 30.0
# How often a message kept in the session's queue is looked for there while it waits.
QUEUED_CHECK_S = 5.0
# A working task's stream says which tool it runs at most this often (a status update with
# the tool and its input): progress for people, not a copy of every step (the task and its
# artifacts hold the outcome; GetTask and the session's steps hold the rest).
PROGRESS_EVERY_S = 0.5
MAX_CACHED_FILES = 1_000
YES = frozenset({"approve", "approved", "yes", "y", "ok", "allow", "allowed"})
NO = frozenset({"deny", "denied", "no", "n", "reject", "rejected", "refuse"})
# The frames a task's stream may end at (the rest only go on).
ENDING_FRAMES = frozenset({"reply", "approval_request", "error", "status", "idle"})
# A step's reference in a task id (`SESSION:s0005`); anything else there is a message's id.
STEP_REF = re.compile(r"s\d+")


def _read(frame: dict[str, Any]) -> bool:
    """The frames a task's stream reads: a tool starting, and what it may end at (deltas and
    steps wake nobody: a paced run's stream woke ~70 times a task for ~12)."""
    kind = frame.get("type")
    return kind in ENDING_FRAMES or (kind == "tool" and frame.get("state") == "running")


class _Page:
    """One ListTasks page over the matching tasks, newest first: the first `skip` passed
    over, at most `size` kept; `more` once a match is found past the page."""

    def __init__(self, skip: int, size: int) -> None:
        self.skip, self.size = skip, size
        self.seen = 0  # matching tasks met so far
        self.more = False
        self.tasks: list[Task] = []

    def takes(self) -> bool:
        """Whether the next matching task goes on this page."""
        self.seen += 1
        if self.seen <= self.skip:
            return False
        if len(self.tasks) == self.size:
            self.more = True
            return False
        return True


@dataclass
class Started:
    """A task a message started or answered, its frames followed since before it acted."""

    session_id: str
    task_id: str
    follow: Following
    # The task as the stream opens, when known without reading the record (a new task).
    first: Task | None = None
    # A tool that may change files ran in it (only then are the changed files looked for).
    side_effects: bool = False
    # The queue entry (its id) of a message kept while a task of the context works: the
    # task is `submitted` until its turn opens (then `working`).
    waiting: str | None = None
    # How the task ended when the record cannot say (a waiting message cancelled).
    final: Task | None = None


def _who(context: ServerCallContext) -> Identity:
    signed = context.state.get("signed")
    if not isinstance(signed, SignedIn):  # ApiGuard signs every request in first
        raise InvalidRequestError(message="not signed in")
    return signed.identity


def _parts(message: Message) -> tuple[str, bool | None]:
    """The message's text, and an approval answer given as data ({"approved": BOOL})."""
    texts: list[str] = []
    approved: bool | None = None
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = part.data
            if value.WhichOneof("kind") == "struct_value":
                field = value.struct_value.fields.get("approved")
                if field is not None and field.WhichOneof("kind") == "bool_value":
                    approved = field.bool_value
        else:
            raise InvalidParamsError(message="only text and data parts are read by this agent")
    text = "\n".join(texts)
    if len(text) > MAX_FRAME_BYTES:
        raise InvalidParamsError(message=f"message too long (limit {MAX_FRAME_BYTES} characters)")
    return text, approved


def _answer_of(text: str, approved: bool | None) -> bool | None:
    if approved is not None:
        return approved
    word = text.strip().strip(".!").lower()
    if word in YES:
        return True
    if word in NO:
        return False
    return None


class XclawRequestHandler(RequestHandler):
    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.rt = gw.runtime
        self._files: OrderedDict[str, list[Artifact]] = OrderedDict()

    # --- the record -------------------------------------------------------------------------
    async def _require(self, who: Identity, sid: str, need: Need) -> None:
        try:
            await self.gw.access.require(who, sid, need)
        except SessionNotFound:
            raise TaskNotFoundError from None
        except Forbidden as e:
            raise InvalidRequestError(message=e.message) from None

    async def _turn(
        self, task_id: str, who: Identity, need: Need = Need.READ
    ) -> tuple[Session, list[Step], Turn]:
        sid, sep, ref = task_id.partition(":")
        if not sep or not sid or not ref:
            raise TaskNotFoundError
        session = await asyncio.to_thread(self.gw.store.record.find_session, sid)
        if session is None:
            raise TaskNotFoundError
        await self._require(who, sid, need)
        steps = await asyncio.to_thread(self.gw.store.record.steps, sid, agent=MAIN_AGENT)
        turn = next((t for t in turns_of(steps) if t.answers_to(task_id)), None)
        if turn is None:
            raise TaskNotFoundError
        return session, steps, turn

    async def _waiting(self, task_id: str, who: Identity) -> Task | None:
        """The task of a message still waiting in its context's queue (`submitted`), or None.
        Asked before the record's turns, so a message that starts between the two reads is
        found in one or the other."""
        sid, sep, ref = task_id.partition(":")
        if not sep or not sid or not ref or STEP_REF.fullmatch(ref):
            return None  # a step's id: a turn's task
        session = await asyncio.to_thread(self.gw.store.record.find_session, sid)
        if session is None:
            return None
        await self._require(who, sid, Need.READ)
        for entry in await self.rt.queued(sid):
            if waiting_task_id(sid, entry.id) == task_id:
                return waiting_task(entry, client_message_id=_client_id(entry.id))
        return None

    async def _task(
        self,
        session: Session,
        steps: list[Step],
        turn: Turn,
        *,
        files: bool = True,
        answered: set[str] | None = None,
    ) -> Task:
        sid = session.session_id
        busy = self.rt.is_busy(sid)
        state = state_of(turn, session, busy=busy)
        artifacts: list[Artifact] = []
        if state == TaskState.TASK_STATE_COMPLETED:
            artifacts = answer_artifact(turn)
            if files:
                artifacts += await self._changed_files(turn)
        ids = client_ids(steps, KEY_PREFIX)
        task = task_of(
            turn,
            session,
            busy=busy,
            client_message_id=ids.get(turn.message.display_id),
            artifacts=artifacts,
            answered=answered or set(),
        )
        return task

    async def _changed_files(self, turn: Turn) -> list[Artifact]:
        """What the (finished) turn changed in the workspace; read once, then kept: an
        earlier turn's for good, the latest's until the session has a step more."""
        last = max(s.seq for s in (turn.message, *turn.steps))
        key = f"{turn.task_id}@{last}"
        cached = self._files.get(key)
        if cached is not None:
            return cached
        from xclaw.workspace.snapshots import SnapshotConfig

        rt = self.rt
        config = SnapshotConfig.from_settings(rt.settings.sandbox)
        workspace = rt.toolbox.workspace(turn.message.session_id)
        try:
            found = await asyncio.to_thread(
                changed_files, self.gw.store.snapshots, turn, workspace, config
            )
        except (OSError, XclawError) as e:
            log.warning("event=a2a_files_unread task=%s error=%r", turn.task_id, str(e))
            return []
        self._files[key] = found
        while len(self._files) > MAX_CACHED_FILES:
            self._files.popitem(last=False)
        return found

    async def _going_on(self, session: Session, turn: Turn) -> None:
        """Interrupted work of the session goes on when someone asks about its task (as a
        client attaching lets it: the record says where it stopped)."""
        sid = session.session_id
        resumable = session.status is Status.PAUSED or (
            session.status is Status.RUNNING and not session.awaiting_input
        )
        if turn.latest and resumable and not self.rt.is_busy(sid):
            await self.rt.resume_if_needed(sid)

    # --- starting and answering ---------------------------------------------------------------
    async def _start(self, params: SendMessageRequest, context: ServerCallContext) -> Started:
        message = params.message
        if not message.message_id:
            raise InvalidParamsError(message="message.messageId is required")
        if message.role != Role.ROLE_USER:
            raise InvalidParamsError(message="message.role must be ROLE_USER")
        text, approved = _parts(message)
        who = _who(context)
        actor = Actor(who, "http", "a2a")
        if message.task_id:
            return await self._answer(message.task_id, text, approved, who, actor)
        return await self._new_task(message, text, who, actor)

    async def _answer(
        self, task_id: str, text: str, approved: bool | None, who: Identity, actor: Actor
    ) -> Started:
        """The next message of an input-required task: the answer to what it waits for."""
        session, _steps, turn = await self._turn(task_id, who)
        sid = session.session_id
        state = state_of(turn, session, busy=self.rt.is_busy(sid))
        if not turn.latest or state in TERMINAL:
            raise InvalidParamsError(
                message=f"task {task_id} is over; a message without taskId (contextId "
                f"{sid}) starts the next task"
            )
        approve = _answer_of(text, approved)
        if approve is None:
            raise InvalidParamsError(
                message=f'task {task_id} waits for an approval: answer "approve" or "deny" '
                '(or data {"approved": true|false})'
            )
        await self._require(who, sid, Need.APPROVE)
        follow = Following(self.rt, wanted=_read, session_id=sid)
        follow.start()
        try:
            for step in turn.waiting_approvals():
                if not await follow.answer(step.display_id, approve, actor):
                    raise InvalidRequestError(
                        message=f"task {task_id}: approval {step.display_id} is not waiting"
                    )
            if state != TaskState.TASK_STATE_INPUT_REQUIRED:
                log.info("event=a2a_answer_again task=%s", task_id)  # answered before
        except BaseException:
            follow.close()
            raise
        return Started(sid, task_id, follow)

    async def _new_task(self, message: Message, text: str, who: Identity, actor: Actor) -> Started:
        rt, store = self.rt, self.gw.store
        if not text.strip():
            raise InvalidParamsError(message="the message has no text")
        agent = _agent_named(message)
        if agent is not None:
            try:
                rt.agent_named(agent)  # before anything is written
            except XclawError as e:
                raise InvalidParamsError(message=e.message) from None
        try:
            found, new = await rt.peek(message.context_id or None)
        except ValueError as e:
            raise InvalidParamsError(message=f"contextId: {e}") from None
        sid = found.session_id
        session = None if new else found
        if session is not None:
            try:
                await self.gw.access.require(who, sid, Need.ACT)
            except SessionNotFound:
                raise InvalidParamsError(message=f"no context {sid!r}") from None
            except Forbidden as e:
                raise InvalidRequestError(message=e.message) from None
        key = protocol_id(KEY_PREFIX, message.message_id)
        follow = Following(rt, sid, _read)
        follow.start()
        try:
            if session is not None:
                sent = await asyncio.to_thread(store.record.message_step, sid, key)
                if sent is not None:  # the same message again: the task it made
                    return Started(sid, sent.step_id, follow)
                if rt.is_busy(sid):
                    return await self._queued_task(
                        message, text, session, key, follow, actor, agent
                    )
            # The message's id is recorded with the message (one transaction): sent again,
            # it is found, and its task answers.
            try:
                await rt.send(
                    sid, text, create=session is None, actor=actor, message_id=key, agent=agent
                )
            except XclawError as e:
                raise InvalidRequestError(message=rt.redact.text(e.message)) from None
            step_id = await follow.sent_message(wait_s=SENT_WAIT_S)
            if step_id is None:  # (its step frame comes as the run starts)
                raise InvalidRequestError(message="the message was not recorded in time")
            return _working(sid, step_id, follow, text, message)
        except BaseException:
            follow.close()
            raise

    async def _queued_task(
        self,
        message: Message,
        text: str,
        session: Session,
        key: str,
        follow: Following,
        actor: Actor,
        agent: str | None,
    ) -> Started:
        """A message while a task of the context is working follows the session's busy
        policy (docs/protocol.md, "Input while a run is busy"): `reject` refuses it as
        before; `queue` and `interrupt` (and `steer`, which runs as `queue` here: a task is
        a turn) keep it in the session's queue, and its task — the turn it opens — is
        answered once that turn starts, followed from its first step."""
        rt, sid = self.rt, session.session_id
        policy = policy_for(None, session.metadata, rt.settings.input.busy)
        if policy == "reject":
            raise InvalidRequestError(
                message=f"a task of context {sid} is working; wait for it (or cancel "
                "it) before the next message"
            )
        follow.awaiting = key  # the frames of the task before it are not this task's
        try:
            sent = await rt.submit(
                sid,
                text,
                busy="queue" if policy == "steer" else policy,
                actor=actor,
                message_id=key,
                agent=agent,
            )
        except XclawError as e:
            raise InvalidRequestError(message=rt.redact.text(e.message)) from None
        kept = sent.queued
        if kept is None and sent.step is not None:
            follow.awaiting = None  # it ran at once (the task before ended meanwhile)
            step_id = await follow.sent_message(wait_s=SENT_WAIT_S)
            if step_id is None:
                raise InvalidRequestError(message="the message was not recorded in time")
            return _working(sid, step_id, follow, text, message)
        if kept is None:
            raise InvalidRequestError(message="the message was neither run nor kept")
        # A task from now on, `submitted` while it waits; its stream says when it works.
        started = Started(sid, waiting_task_id(sid, kept.id), follow, waiting=kept.id)
        started.first = waiting_task(kept, client_message_id=message.message_id)
        return started

    async def _until_it_runs(self, started: Started) -> TaskStatusUpdateEvent:
        """A waiting message's task, followed until its turn opens (`working`) or it is
        cancelled while it waits (`canceled`, and the task's last word: `started.final`)."""
        sid, tid, key = started.session_id, started.task_id, started.waiting
        assert key is not None
        status = TaskStatus()
        while await started.follow.sent_message(wait_s=QUEUED_CHECK_S) is None:
            if any(e.id == key for e in await self.rt.queued(sid)):
                continue  # it waits its turn
            if await asyncio.to_thread(self.gw.store.record.message_step, sid, key) is None:
                status.state = TaskState.TASK_STATE_CANCELED
                status.message.CopyFrom(
                    text_message(
                        "the queued message was cancelled before it ran",
                        context_id=sid,
                        task_id=tid,
                        message_id=f"xclaw:{tid}:canceled",
                    )
                )
                status.timestamp.GetCurrentTime()
                assert started.first is not None
                started.final = Task()
                started.final.CopyFrom(started.first)
                started.final.status.CopyFrom(status)
                return TaskStatusUpdateEvent(task_id=tid, context_id=sid, status=status)
            break  # recorded, its frame missed: it works
        started.waiting = None
        status.state = TaskState.TASK_STATE_WORKING
        status.timestamp.GetCurrentTime()
        return TaskStatusUpdateEvent(task_id=tid, context_id=sid, status=status)

    # --- commands ---------------------------------------------------------------------------
    async def _command(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | None:
        """A message that is a command (`/steps`, `/rollback …`, `/fork` in its text, or
        `metadata.rollback`), answered with a message — its words, and the WebSocket's
        frame of it as a data part — and no task: a command is no turn of the session.
        None: the message is not one."""
        message = params.message
        if message.task_id:
            return None  # (the answer to what a task waits for)
        command = _rollback_asked(message)
        if command is None:
            command = protocol_command(_parts(message)[0])
        if command is None:
            return None
        if not message.message_id:
            raise InvalidParamsError(message="message.messageId is required")
        if message.role != Role.ROLE_USER:
            raise InvalidParamsError(message="message.role must be ROLE_USER")
        sid = message.context_id
        if not sid:
            raise InvalidParamsError(
                message=f"/{command.name} acts on a context: the message needs its contextId"
            )
        actor = Actor(_who(context), "http", "a2a")
        try:
            await may_run(self.gw, sid, command, actor)
        except SessionNotFound:
            raise InvalidParamsError(message=f"no context {sid!r}") from None
        except Forbidden as e:
            raise InvalidRequestError(message=e.message) from None
        try:
            answered = await run_command(self.gw, sid, command, actor)
        except XclawError as e:
            raise InvalidRequestError(
                message=f"/{command.name}: {self.rt.redact.text(e.message)}", data={"code": e.code}
            ) from None
        reply = Message(
            message_id=f"xclaw:{sid}:command:{message.message_id}",
            context_id=sid,
            role=Role.ROLE_AGENT,
            parts=[Part(text=self.rt.redact.text(answered.text))],
        )
        for frame in answered.frames:
            part = Part()
            part.data.struct_value.CopyFrom(metadata_struct(self.rt.redact(dict(frame))))
            reply.parts.append(part)
        return reply

    # --- following a task -------------------------------------------------------------------
    async def _now(self, started: Started, who: Identity) -> Task:
        if started.final is not None:
            return started.final
        if (waiting := await self._waiting(started.task_id, who)) is not None:
            return waiting
        session, steps, turn = await self._turn(started.task_id, who)
        return await self._task(session, steps, turn, answered=started.follow.answered)

    async def _stream(self, started: Started, who: Identity) -> AsyncIterator[Event]:
        """The task, then its updates until it ends or waits for someone. Built from the
        frames as they come (the record is read only for a task it did not start, and for
        the files a turn with side effects changed)."""
        sid, tid, follow = started.session_id, started.task_id, started.follow
        task = started.first or await self._now(started, who)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and follow.answered:
            # What this request answered may not be in the record yet: the task works on,
            # and a question asked after it ends the stream as it comes.
            task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_WORKING))
            task.status.timestamp.GetCurrentTime()
        yield task
        if task.status.state in STREAM_ENDS:
            return
        if started.waiting is not None:  # submitted: it works once its turn opens
            update = await self._until_it_runs(started)
            yield update
            if update.status.state in STREAM_ENDS:
                return
        tools = self.rt.toolbox.tools_for(sid)
        said = time.monotonic()  # when the stream last said something
        while True:
            if follow.overflow:
                raise InvalidRequestError(message="the client read too slowly; subscribe again")
            frame = await follow.next(wait_s=KEEPALIVE_S)
            if frame is None:
                if self.rt.is_busy(sid):
                    continue
                frame = {"type": "idle"}
            kind = frame.get("type")
            if kind == "tool" and frame.get("state") == "running":
                tool = tools.get(str(frame.get("name")))
                started.side_effects |= tool is None or not tool.read_only
                now = time.monotonic()
                if frame.get("agent") or now - said < PROGRESS_EVERY_S:
                    continue
                said = now
                words = f"{frame.get('name')}: {frame.get('input')}"
                note = text_message(
                    words,
                    context_id=sid,
                    task_id=tid,
                    message_id=f"xclaw:{tid}:{frame.get('stepId')}",
                )
                status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
                status.message.CopyFrom(note)
                yield TaskStatusUpdateEvent(task_id=tid, context_id=sid, status=status)
                continue
            end = await self._ending(started, frame, who)
            if end is None:
                continue
            status, artifacts = end
            for artifact in artifacts:
                yield TaskArtifactUpdateEvent(
                    task_id=tid, context_id=sid, artifact=artifact, last_chunk=True
                )
            yield TaskStatusUpdateEvent(task_id=tid, context_id=sid, status=status)
            return

    async def _ending(
        self, started: Started, frame: dict[str, Any], who: Identity
    ) -> tuple[TaskStatus, list[Artifact]] | None:
        """How the task's stream ends with `frame` (None: it does not): its last status and
        the artifacts that go before it."""
        sid, tid = started.session_id, started.task_id
        kind = frame.get("type")
        if kind not in ENDING_FRAMES:
            return None  # (most frames: a step, a delta)
        status = TaskStatus()
        status.timestamp.GetCurrentTime()
        if kind == "reply":
            answer = str(frame.get("content", ""))
            status.state = TaskState.TASK_STATE_COMPLETED
            status.message.CopyFrom(
                text_message(answer, context_id=sid, task_id=tid, message_id=f"xclaw:{tid}:answer")
            )
            artifacts = [
                Artifact(artifact_id=ANSWER_ARTIFACT, name="answer", parts=[Part(text=answer)])
            ]
            if started.side_effects:
                session, _steps, turn = await self._turn(tid, who)
                artifacts += await self._changed_files(turn)
            return status, artifacts
        if kind == "approval_request":
            if frame.get("stepId") in started.follow.answered:
                return None  # asked again after a restart, answered by this very request
            session, steps, turn = await self._turn(tid, who)
            task = await self._task(session, steps, turn, files=False)
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                return None
            return task.status, []
        if kind == "error":
            status.state = TaskState.TASK_STATE_FAILED
            status.message.CopyFrom(
                text_message(
                    self.rt.redact.text(str(frame.get("content", ""))),
                    context_id=sid,
                    task_id=tid,
                    message_id=f"xclaw:{tid}:error",
                )
            )
            return status, []
        if kind == "status" and frame.get("busy") is False and frame.get("awaitingInput"):
            status.state = TaskState.TASK_STATE_CANCELED
            return status, []
        if kind == "idle":  # the run is gone without saying how: the record does
            task = await self._now(started, who)
            return task.status, list(task.artifacts)
        return None

    # --- the methods --------------------------------------------------------------------------
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        who = _who(context)
        answer = await self._command(params, context)
        if answer is not None:
            return answer
        started = await self._start(params, context)
        try:
            if not params.configuration.return_immediately:
                async for _ in self._stream(started, who):
                    pass
            task = await self._now(started, who)
        finally:
            started.follow.close()
        return apply_history_length(task, params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        who = _who(context)
        answer = await self._command(params, context)
        if answer is not None:
            yield answer
            return
        started = await self._start(params, context)
        try:
            async for event in self._stream(started, who):
                yield event
        finally:
            started.follow.close()

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        who = _who(context)
        waiting = await self._waiting(params.id, who)
        if waiting is not None:  # submitted: followed until its turn opens, then on
            follow = Following(self.rt, wanted=_read, session_id=waiting.context_id)
            follow.awaiting = params.id.partition(":")[2]
            follow.start()
            try:
                started = Started(waiting.context_id, waiting.id, follow, first=waiting)
                started.waiting = follow.awaiting
                async for event in self._stream(started, who):
                    yield event
            finally:
                follow.close()
            return
        session, _steps, turn = await self._turn(params.id, who)
        follow = Following(self.rt, wanted=_read, session_id=session.session_id)
        follow.start()
        try:
            await self._going_on(session, turn)
            async for event in self._stream(Started(session.session_id, turn.task_id, follow), who):
                yield event
        finally:
            follow.close()

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        who = _who(context)
        waiting = await self._waiting(params.id, who)
        if waiting is not None:
            return apply_history_length(waiting, params)
        session, steps, turn = await self._turn(params.id, who)
        await self._going_on(session, turn)
        task = await self._task(session, steps, turn)
        return apply_history_length(task, params)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        who = _who(context)
        size = params.page_size or DEFAULT_PAGE
        if not 1 <= size <= MAX_PAGE:
            raise InvalidParamsError(message=f"pageSize must be 1-{MAX_PAGE}")
        try:
            skip = int(params.page_token or "0")
        except ValueError:
            raise InvalidParamsError(message="pageToken is not one this server gave") from None
        if params.context_id:
            found = await asyncio.to_thread(self.gw.store.record.find_session, params.context_id)
            if found is None or await self.gw.access.role(who, params.context_id) is None:
                sessions: list[Session] = []
            else:
                sessions = [found]
        else:
            sessions = await self.gw.access.sessions(who, limit=None)
        page = _Page(skip, size)
        waiting_in = set(await asyncio.to_thread(self.gw.store.record.queued_sessions))
        for session in sessions:
            sid = session.session_id
            # The newest first: the messages waiting in its queue (submitted), then its turns.
            waiting = [] if sid not in waiting_in else await self.rt.queued(sid)
            for entry in reversed(waiting):
                if params.status and params.status != TaskState.TASK_STATE_SUBMITTED:
                    break
                if not page.takes():
                    if page.more:
                        break
                    continue
                task = waiting_task(entry, client_message_id=_client_id(entry.id))
                page.tasks.append(apply_history_length(task, params))
            if page.more:
                break
            steps = await asyncio.to_thread(self.gw.store.record.steps, sid, agent=MAIN_AGENT)
            for turn in reversed(turns_of(steps)):
                if (
                    params.status
                    and state_of(turn, session, busy=self.rt.is_busy(session.session_id))
                    != params.status
                ):
                    continue
                if not page.takes():
                    if page.more:
                        break
                    continue
                task = await self._task(session, steps, turn, files=False)
                page.tasks.append(apply_history_length(task, params))
            if page.more:
                break
        return ListTasksResponse(
            tasks=page.tasks,
            next_page_token=str(skip + len(page.tasks)) if page.more else "",
            page_size=size,
            total_size=page.seen if not page.more else 0,
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        who = _who(context)
        waiting = await self._waiting(params.id, who)
        if waiting is not None:  # taken off the queue: it never runs
            sid = waiting.context_id
            await self._require(who, sid, Need.ACT)
            if await self.rt.unqueue(sid, params.id.partition(":")[2]) is not None:
                waiting.status.state = TaskState.TASK_STATE_CANCELED
                waiting.status.timestamp.GetCurrentTime()
                return waiting
            # (it started meanwhile: canceled as a working task, below)
        session, _steps, turn = await self._turn(params.id, who, Need.ACT)
        sid = session.session_id
        state = state_of(turn, session, busy=self.rt.is_busy(sid))
        if not turn.latest or state in TERMINAL:
            raise TaskNotCancelableError(message=f"task {params.id} is over")
        follow = Following(self.rt, wanted=_read, session_id=sid)
        follow.start()
        try:
            if not self.rt.is_busy(sid):
                await self.rt.resume_if_needed(sid)  # (after a restart: stopped as it goes on)
            if self.rt.cancel(sid):
                deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_S
                while self.rt.is_busy(sid):
                    left = deadline - asyncio.get_running_loop().time()
                    if left <= 0 or await follow.next(wait_s=left) is None:
                        break
            session, steps, turn = await self._turn(params.id, who)
            return await self._task(session, steps, turn)
        finally:
            follow.close()

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(message="this agent has no extended card")


def _client_id(entry_id: str) -> str | None:
    """The A2A client's own id of a waiting message (None: another client's)."""
    return entry_id[len(KEY_PREFIX) :] if entry_id.startswith(KEY_PREFIX) else None


def _agent_named(message: Message) -> str | None:
    """`metadata.agent` of a message: the declared agent (xclaw.yaml's `agents:`) its task
    runs (absent: the one the context runs, xclaw's own for a new one)."""
    if not message.HasField("metadata") or "agent" not in message.metadata.fields:
        return None
    value = message.metadata.fields["agent"]
    name = value.string_value if value.WhichOneof("kind") == "string_value" else ""
    if not 0 < len(name) <= 200:
        raise InvalidParamsError(message="metadata.agent must be the name of a declared agent")
    return name


# `metadata.rollback` of a message: a rollback asked with structure instead of words.
ROLLBACK_FLAGS = {
    "confirm": "--confirm",
    "acceptIrreversible": "--accept-irreversible",
    "retry": "--retry",
    "abandon": "--abandon",
}


def _rollback_asked(message: Message) -> Command | None:
    """`metadata.rollback` — `{"stepId": "s0004"}` (the preview), with `confirm`,
    `acceptIrreversible` or `retry` true, or `{"abandon": true}` — as the `/rollback`
    command it is (read by the same code: xclaw/wire/session_commands.py)."""
    if not message.HasField("metadata") or "rollback" not in message.metadata.fields:
        return None
    value = message.metadata.fields["rollback"]
    if value.WhichOneof("kind") != "struct_value":
        raise InvalidParamsError(message="metadata.rollback must be an object")
    args: list[str] = []
    for key, field in value.struct_value.fields.items():
        kind = field.WhichOneof("kind")
        if key == "stepId" and kind == "string_value" and 0 < len(field.string_value) <= 200:
            args.insert(0, field.string_value)
        elif key in ROLLBACK_FLAGS and kind == "bool_value":
            if field.bool_value:
                args.append(ROLLBACK_FLAGS[key])
        else:
            raise InvalidParamsError(
                message="metadata.rollback: stepId (a step id) and confirm, acceptIrreversible, "
                f"retry or abandon (booleans) only; not {key!r} as given"
            )
    return Command("rollback", tuple(args), " ".join(args))


def _working(sid: str, step_id: str, follow: Following, text: str, message: Message) -> Started:
    """A task a message just opened: working, its history that message (sent as the stream's
    first event before the record is read)."""
    started = Started(sid, step_id, follow)
    started.first = Task(id=step_id, context_id=sid)
    started.first.status.state = TaskState.TASK_STATE_WORKING
    started.first.history.append(
        text_message(
            text,
            context_id=sid,
            task_id=step_id,
            message_id=message.message_id,
            role=Role.ROLE_USER,
        )
    )
    return started
