"""[tools] A remote A2A agent as `a2a_call` talks to it (`a2a-sdk`'s client): send a message and
follow its task to the end — through a dropped stream or the remote's restart, by asking
about the task, never by sending again — and find a task again by the message that made it.

A call's ids are chosen before anything is sent and derived from what the record holds (the
session and the tool call's id), so a process that died mid-call finds its task again
(`call_ids`): the message id is the idempotency key, and a call without a context of its own
gets a fresh context that holds only its task.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from xclaw.tools.a2a_settings import RemoteAgent

# A task stops being followed in these states: over, or waiting for someone.
ENDS = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
# What a remote that does not answer (down, restarting) costs between two tries.
RETRY_S = (0.2, 0.5, 1.0, 2.0, 3.0)
# A task's history read back when it is looked for by its message (its first messages).
HISTORY = 20
RemoteErrors = (A2AError, httpx.HTTPError, OSError, ValueError)


class RemoteUnreachable(Exception):
    """The remote agent did not answer in time; `task_id` when its task is known."""

    def __init__(self, message: str, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


@dataclass(frozen=True, slots=True)
class CallIds:
    message_id: str  # the idempotency key
    context_id: str  # the call's own context, unless it continues one


def call_ids(session_id: str, call_id: str) -> CallIds:
    """The ids of the call `call_id` of session `session_id`: the same every time they are
    computed, so after a crash the call finds its task again by them."""
    digest = hashlib.sha256(f"{session_id}\0{call_id}".encode()).hexdigest()[:40]
    return CallIds(message_id=f"xclaw-{digest}", context_id=f"xclaw-{digest}-ctx")


def _state(event: StreamResponse) -> tuple[str | None, int | None]:
    if event.HasField("task"):
        return event.task.id, event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.task_id, event.status_update.status.state
    if event.HasField("artifact_update"):
        return event.artifact_update.task_id, None
    return None, None


class RemoteAgentClient:
    """One remote agent, for the length of one call (`async with`)."""

    def __init__(self, name: str, config: RemoteAgent) -> None:
        self.name = name
        self.config = config
        headers = dict(config.headers)
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._http = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(30.0, read=None), follow_redirects=False
        )
        self._client: Client | None = None

    async def __aenter__(self) -> RemoteAgentClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self._http.aclose()

    async def client(self) -> Client:
        if self._client is None:
            response = await self._http.get(self.config.card_url)
            response.raise_for_status()
            card = ParseDict(response.json(), AgentCard(), ignore_unknown_fields=True)
            config = ClientConfig(httpx_client=self._http, streaming=True)
            self._client = ClientFactory(config).create(card)
        return self._client

    async def _retrying(self, what: Any, deadline: float) -> Any:
        """`what()` until it answers, or the deadline passes (RemoteUnreachable)."""
        tries = 0
        while True:
            try:
                return await what()
            except RemoteErrors as e:
                if _refused(e):
                    raise
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RemoteUnreachable(f"{self.name} does not answer: {_said(e)}") from e
                await asyncio.sleep(min(RETRY_S[min(tries, len(RETRY_S) - 1)], left))
                tries += 1

    async def get(self, task_id: str, deadline: float) -> Task:
        async def ask() -> Task:
            client = await self.client()
            task: Task = await client.get_task(GetTaskRequest(id=task_id))
            return task

        found: Task = await self._retrying(ask, deadline)
        return found

    async def find(self, context_id: str, message_id: str, deadline: float) -> Task | None:
        """The task the message `message_id` made in `context_id`, if the remote has one."""

        async def ask() -> Task | None:
            client = await self.client()
            page = await client.list_tasks(
                ListTasksRequest(context_id=context_id, history_length=HISTORY, page_size=100)
            )
            for task in page.tasks:
                if any(m.message_id == message_id for m in task.history):
                    return task
            return None

        found: Task | None = await self._retrying(ask, deadline)
        return found

    async def follow(self, task_id: str, deadline: float) -> Task:
        """The task once it ends or waits for someone (or when the deadline passes), through
        dropped streams and the remote's restarts: it is asked about, never sent again."""
        while True:
            task = await self.get(task_id, deadline)
            if task.status.state in ENDS or time.monotonic() >= deadline:
                return task
            try:
                client = await self.client()
                stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
                await asyncio.wait_for(_until_end(stream), max(0.1, deadline - time.monotonic()))
            except (TimeoutError, *RemoteErrors):
                pass  # asked again above, until the deadline

    async def send(self, message: Message, deadline: float) -> Task:
        """Send `message` once and follow its task to the end (or to the deadline)."""
        task_id: str | None = None
        client = await self._retrying(self.client, deadline)  # nothing is sent before this
        try:
            stream = client.send_message(SendMessageRequest(message=message))
            async for event in _bounded(stream, deadline):
                found, state = _state(event)
                task_id = task_id or found
                if event.HasField("message"):  # answered with a message, no task
                    answered = Task(context_id=message.context_id)
                    answered.status.state = TaskState.TASK_STATE_COMPLETED
                    answered.status.message.CopyFrom(event.message)
                    return answered
                if state in ENDS:
                    break
        except RemoteErrors as e:
            if _refused(e):
                raise
            if task_id is None:
                # Sent, perhaps: the task is looked for by the message that made it.
                found_task = await self.find(message.context_id, message.message_id, deadline)
                if found_task is None:
                    raise RemoteUnreachable(
                        f"{self.name} did not answer ({_said(e)}), and has no task for the message"
                    ) from e
                task_id = found_task.id
        except TimeoutError:
            pass
        if task_id is None:
            raise RemoteUnreachable(f"{self.name} answered with no task")
        return await self.follow(task_id, deadline)


async def _until_end(stream: AsyncIterator[StreamResponse]) -> None:
    async for event in stream:
        _, state = _state(event)
        if state in ENDS:
            return


async def _bounded(
    stream: AsyncIterator[StreamResponse], deadline: float
) -> AsyncIterator[StreamResponse]:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            event = await asyncio.wait_for(anext(stream), left)
        except StopAsyncIteration:
            return
        yield event


def _refused(e: BaseException) -> bool:
    """An answer, not a silence: the remote refused the request (a JSON-RPC error, an HTTP
    4xx): asking again would get the same."""
    if isinstance(e, httpx.HTTPStatusError):
        return 400 <= e.response.status_code < 500
    if isinstance(e, A2AError):
        from a2a.client.errors import A2AClientError

        return not isinstance(e, A2AClientError)
    return isinstance(e, ValueError)


def _said(e: BaseException) -> str:
    return str(getattr(e, "message", None) or e) or type(e).__name__
