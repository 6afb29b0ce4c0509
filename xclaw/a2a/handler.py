"""The A2A methods (`a2a-sdk`'s RequestHandler, served by its JSON-RPC dispatcher) over xclaw
sessions (docs/a2a.md): SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask,
SubscribeToTask. Push notifications and the extended card are not offered.

Built on the gateway's seams only — GatewayRuntime, the Store, the access checks the HTTP API
makes (xclaw/gateway/access.py) — and answered from the record (xclaw/a2a/tasks.py): after
a restart GetTask shows a task where the record has it, and SubscribeToTask (or GetTask)
lets interrupted work go on, as a client attaching does. Another person's task or context
answers as one nobody has.

A message is recorded write-ahead by its `messageId` (xclaw/gateway/message_ids.py): the
same message sent again — a caller that crashed, or `a2a_call` settling a call — gets the
task it made, and never runs twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

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
    STREAM_ENDS,
    TERMINAL,
    Turn,
    answer_artifact,
    state_of,
    task_of,
    text_message,
    turns_of,
)
from xclaw.errors import Forbidden, SessionNotFound, XclawError
from xclaw.gateway.context import Gateway
from xclaw.gateway.following import Following
from xclaw.gateway.identity import SignedIn
from xclaw.gateway.message_ids import message_ids, message_step, with_intent, without
from xclaw.protocol import MAX_FRAME_BYTES
from xclaw.store.model import MAIN_AGENT, Session, Status, Step
from xclaw.store.rows import check_session_id
from xclaw.teams import Actor, Identity, Need

log = logging.getLogger("xclaw.a2a")

KEY_PREFIX = "a2a:"
KEEPALIVE_S = 15.0
MAX_PAGE = 100
DEFAULT_PAGE = 50
CANCEL_WAIT_S = 15.0
MAX_CACHED_FILES = 1_000
YES = frozenset({"approve", "approved", "yes", "y", "ok", "allow", "allowed"})
NO = frozenset({"deny", "denied", "no", "n", "reject", "rejected", "refuse"})


@dataclass
class Started:
    """A task a message started or answered, its frames followed since before it acted."""

    session_id: str
    task_id: str
    follow: Following


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
        session = await asyncio.to_thread(self.gw.store.find_session, sid)
        if session is None:
            raise TaskNotFoundError
        await self._require(who, sid, need)
        steps = await asyncio.to_thread(self.gw.store.steps, sid, agent=MAIN_AGENT)
        turn = next((t for t in turns_of(steps) if t.task_id == task_id), None)
        if turn is None:
            raise TaskNotFoundError
        return session, steps, turn

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
        ids = message_ids(session.metadata, KEY_PREFIX, steps)
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
        """What the (finished) turn changed in the workspace; read once, then kept."""
        cached = self._files.get(turn.task_id)
        if cached is not None and not turn.latest:
            return cached
        from xclaw.workspace.snapshots import SnapshotConfig

        rt = self.rt
        config = SnapshotConfig.from_settings(rt.settings.sandbox)
        workspace = rt.toolbox.workspace(turn.message.session_id)
        try:
            found = await asyncio.to_thread(changed_files, self.gw.store, turn, workspace, config)
        except (OSError, XclawError) as e:
            log.warning("event=a2a_files_unread task=%s error=%r", turn.task_id, str(e))
            return []
        self._files[turn.task_id] = found
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
        follow = Following(self.rt, sid)
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
        sid = message.context_id or (await rt.peek(None))[0].session_id
        try:
            check_session_id(sid)
        except ValueError as e:
            raise InvalidParamsError(message=f"contextId: {e}") from None
        session = await asyncio.to_thread(store.find_session, sid)
        if session is not None:
            try:
                await self.gw.access.require(who, sid, Need.ACT)
            except SessionNotFound:
                raise InvalidParamsError(message=f"no context {sid!r}") from None
            except Forbidden as e:
                raise InvalidRequestError(message=e.message) from None
        key = KEY_PREFIX + message.message_id
        follow = Following(rt, sid)
        follow.start()
        try:
            steps: list[Step] = []
            if session is not None:
                steps = await asyncio.to_thread(store.steps, sid, agent=MAIN_AGENT)
                sent = message_step(session.metadata, key, steps)
                if sent is not None:  # the same message again: the task it made
                    return Started(sid, sent.step_id, follow)
                if rt.is_busy(sid):
                    raise InvalidRequestError(
                        message=f"a task of context {sid} is working; wait for it (or cancel "
                        "it) before the next message"
                    )
            meta = with_intent({} if session is None else session.metadata, key, steps)
            if session is None:
                await asyncio.to_thread(store.create_session, session_id=sid, metadata=meta)
                if who.user is not None and self.gw.teams is not None:
                    await asyncio.to_thread(self.gw.teams.claim_session, sid, who.user)
            else:
                await asyncio.to_thread(store.update_session, sid, metadata=meta)
            try:
                await rt.send(sid, text, actor=actor)
            except XclawError as e:
                now = await asyncio.to_thread(store.get_session, sid)
                await asyncio.to_thread(
                    store.update_session, sid, metadata=without(now.metadata, key)
                )
                raise InvalidRequestError(message=rt.redact.text(e.message)) from None
            now = await asyncio.to_thread(store.get_session, sid)
            steps = await asyncio.to_thread(store.steps, sid, agent=MAIN_AGENT)
            step = message_step(now.metadata, key, steps)
            if step is None:  # (its step is written before send returns)
                raise InvalidRequestError(message="the message was not recorded")
            return Started(sid, step.step_id, follow)
        except BaseException:
            follow.close()
            raise

    # --- following a task -------------------------------------------------------------------
    async def _now(self, started: Started, who: Identity) -> Task:
        session, steps, turn = await self._turn(started.task_id, who)
        return await self._task(session, steps, turn, answered=started.follow.answered)

    async def _stream(self, started: Started, who: Identity) -> AsyncIterator[Event]:
        """The task, then its updates until it ends or waits for someone."""
        sid, tid, follow = started.session_id, started.task_id, started.follow
        task = await self._now(started, who)
        yield task
        if task.status.state in STREAM_ENDS:
            return
        while True:
            if follow.overflow:
                raise InvalidRequestError(message="the client read too slowly; subscribe again")
            frame = await follow.next(wait_s=KEEPALIVE_S)
            if frame is None:
                if self.rt.is_busy(sid):
                    continue
                frame = {"type": "idle"}
            kind = frame.get("type")
            if kind == "tool" and frame.get("state") == "running" and not frame.get("agent"):
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
            if kind == "approval_request" and frame.get("stepId") in follow.answered:
                continue  # asked again after a restart, answered by this very request
            if kind not in ("approval_request", "reply", "error", "status", "idle"):
                continue
            if kind == "status" and not (frame.get("busy") is False and frame.get("awaitingInput")):
                continue
            task = await self._now(started, who)
            if task.status.state not in STREAM_ENDS and kind != "idle":
                continue
            for artifact in task.artifacts:
                yield TaskArtifactUpdateEvent(
                    task_id=tid, context_id=sid, artifact=artifact, last_chunk=True
                )
            yield TaskStatusUpdateEvent(task_id=tid, context_id=sid, status=task.status)
            return

    # --- the methods --------------------------------------------------------------------------
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        who = _who(context)
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
        session, _steps, turn = await self._turn(params.id, who)
        follow = Following(self.rt, session.session_id)
        follow.start()
        try:
            await self._going_on(session, turn)
            async for event in self._stream(Started(session.session_id, turn.task_id, follow), who):
                yield event
        finally:
            follow.close()

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        who = _who(context)
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
            found = await asyncio.to_thread(self.gw.store.find_session, params.context_id)
            if found is None or await self.gw.access.role(who, params.context_id) is None:
                sessions: list[Session] = []
            else:
                sessions = [found]
        else:
            sessions = await self.gw.access.sessions(who, limit=None)
        tasks: list[Task] = []
        seen = 0
        more = False
        for session in sessions:
            steps = await asyncio.to_thread(
                self.gw.store.steps, session.session_id, agent=MAIN_AGENT
            )
            for turn in reversed(turns_of(steps)):
                if (
                    params.status
                    and state_of(turn, session, busy=self.rt.is_busy(session.session_id))
                    != params.status
                ):
                    continue
                seen += 1
                if seen <= skip:
                    continue
                if len(tasks) == size:
                    more = True
                    break
                task = await self._task(session, steps, turn, files=False)
                tasks.append(apply_history_length(task, params))
            if more:
                break
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=str(skip + len(tasks)) if more else "",
            page_size=size,
            total_size=seen if not more else 0,
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        who = _who(context)
        session, _steps, turn = await self._turn(params.id, who, Need.ACT)
        sid = session.session_id
        state = state_of(turn, session, busy=self.rt.is_busy(sid))
        if not turn.latest or state in TERMINAL:
            raise TaskNotCancelableError(message=f"task {params.id} is over")
        follow = Following(self.rt, sid)
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
