"""[gateway] One session's frames followed by a protocol adapter (AG-UI, A2A): subscribed before the
request acts, queued without blocking the runtime, and the approvals asked since noted, so
an answer given after a restart can wait until its approval is asked again.

The adapters translate what comes out (xclaw/agui/translate.py, xclaw/a2a/handler.py); this
is only the plumbing both need, the same way: subscribe first, then act, then read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from xclaw.errors import XclawError
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.people.teams import Actor
from xclaw.wire.shapes import Frame

# A client that stops reading is cut off (it comes back and is served from the record).
MAX_QUEUED_FRAMES = 10_000
# An answer sent after a restart waits this long for its approval to be asked again.
ANSWER_WAIT_S = 30.0


class Following:
    """Frames of one session, from `start` on, until `close`."""

    def __init__(
        self,
        runtime: GatewayRuntime,
        session_id: str,
        wanted: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """`wanted`: the frames the adapter reads (None: all); the others are not queued, so
        its task is not woken for them."""
        self.rt = runtime
        self.sid = session_id
        self.wanted = wanted
        # A deque and one future to wake the reader, not an asyncio.Queue read through
        # wait_for: that made a task and a timer per frame, which cost more than the frame
        # (bench/README.md, the adapters).
        self.queue: deque[dict[str, Any]] = deque()
        self._wake: asyncio.Future[None] | None = None
        self.overflow = False
        self.answered: set[str] = set()  # approvals answered through this follower
        # The main agent's user_input steps written since (their step ids): the message a
        # request sent is the first (xclaw/a2a: its task).
        self.messages: list[str] = []
        self._message = asyncio.Event()
        self._asked: dict[str, asyncio.Event] = {}
        self._unsubscribe: Callable[[], None] | None = None
        # The message id of a message kept in the session's queue (a run was in flight):
        # until the step that records it comes, the frames are the run's before it, and
        # are dropped.
        self.awaiting: str | None = None

    def start(self) -> None:
        self._unsubscribe = self.rt.subscribe(self.sid, self._sink)

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _sink(self, sent: Frame) -> None:
        """The runtime's sink: never blocks (the queue is read by the adapter)."""
        # Every frame is a dict the builders made (xclaw/wire/build.py), never mutated after
        # it is sent: read here as one without a copy per frame.
        frame = cast("dict[str, Any]", sent)
        kind = frame.get("type")
        if self.awaiting is not None:
            step = frame.get("step") if kind == "step" else None
            out = step.get("output") if isinstance(step, dict) else None
            if not isinstance(out, dict) or out.get("messageId") != self.awaiting:
                return  # of the run before the awaited message
            self.awaiting = None
        if kind == "approval_request":
            self._asked.setdefault(str(frame.get("stepId")), asyncio.Event()).set()
        elif kind == "step":
            step = frame.get("step")
            if (
                isinstance(step, dict)
                and step.get("type") == "user_input"
                and step.get("agent") == "main"
                and step.get("status") == "completed"
            ):
                self.messages.append(str(step.get("stepId")))
                self._message.set()
        if self.wanted is not None and not self.wanted(frame):
            return
        if len(self.queue) >= MAX_QUEUED_FRAMES:
            self.overflow = True
            return
        self.queue.append(frame)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def next(self, *, wait_s: float) -> dict[str, Any] | None:
        """The next frame, or None after `wait_s` seconds of silence."""
        if not self.queue:
            loop = asyncio.get_running_loop()
            wake = self._wake = loop.create_future()
            timer = loop.call_later(wait_s, _timeout, wake)
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None
            if not self.queue:
                return None
        return self.queue.popleft()

    def ready(self) -> list[dict[str, Any]]:
        """The frames queued now (without waiting): an adapter writes them in one go."""
        out = list(self.queue)
        self.queue.clear()
        return out

    async def sent_message(self, *, wait_s: float) -> str | None:
        """The step id of the first user_input step written since the start (the message a
        request just sent), once its frame came; None after `wait_s`."""
        if not self.messages:
            try:
                await asyncio.wait_for(self._message.wait(), wait_s)
            except TimeoutError:
                return None
        return self.messages[0]

    def answer_now(self, ref: str, approve: bool, actor: Actor) -> bool:
        try:
            self.rt.answer_approval(self.sid, ref, approve, actor.by())
        except XclawError:
            return False
        self.answered.add(ref)
        return True

    async def answer(self, ref: str, approve: bool, actor: Actor) -> bool:
        """Answer the approval `ref` (a step the record holds waiting); one not asked since a
        restart is asked again first (the run resumes). False: it was not asked in time."""
        if self.answer_now(ref, approve, actor):
            return True
        asked = self._asked.setdefault(ref, asyncio.Event())
        if not self.rt.is_busy(self.sid) and not await self.rt.resume_if_needed(self.sid):
            return False
        try:
            await asyncio.wait_for(asked.wait(), ANSWER_WAIT_S)
        except TimeoutError:
            return False
        return self.answer_now(ref, approve, actor)


def _timeout(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)
