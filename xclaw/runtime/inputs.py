"""[runtime] Input while a run is busy (xclaw/wire/busy.py; docs/protocol.md, "Input while a run is
busy"): the messages a session keeps waiting, and the hand-over from a run to the next of them.

The queue is in the record (xclaw/store/queue/sql.py): a message is written there before its
sender is told (`queued`), and leaves it in the transaction that records it as its turn's
`user_input` step (`OpenTurn.dequeue`), so a kill or a takeover at any moment leaves it waiting
or recorded, never both, never neither; its id is the message id that step records, so a
resend is queued once and a message that ran is never queued again.

Who starts the next one: the worker whose run ends (`Runs._turn` hands over before it lets go
of the session: no new message slips ahead meanwhile), and, for what a kill or another worker
left waiting, the sweep and an attaching client (`kick`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from xclaw.errors import MessageRecorded, SessionBusy, SessionNotFound, XclawError
from xclaw.people.teams import Actor
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime.runs import Runs
from xclaw.runtime.subscribers import Broadcast
from xclaw.runtime.turn_start import TurnStarts, resumable
from xclaw.store.base import Record
from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import Session, Step
from xclaw.store.steps.rows import new_session_id
from xclaw.store.steps.writes import QueueInput, Unqueue
from xclaw.wire.build import error_frame, queue_frame
from xclaw.wire.busy import BusyPolicy

log = logging.getLogger("xclaw.runtime")


@dataclass(frozen=True, slots=True)
class InputParts:
    """What the waiting messages work with, wired once by the runtime's assembly."""

    record: Record  # the queue is in the record
    db: StoreCaller[Record]
    runs: Runs
    starts: TurnStarts
    broadcast: Broadcast
    redact: Redactor
    busy: Callable[[str], bool]  # a run in flight, here or elsewhere
    cancel: Callable[[str], bool]  # Stop, here or on the worker that drives it
    resume: Callable[[str], Awaitable[bool]]
    # The other workers told a message waits (the one that drives the session starts it).
    announce: Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Submitted:
    """What became of a message: recorded as `step` (its run started, or — `duplicate` —
    a resend of a message recorded before), or kept in the session's queue (`queued`;
    `duplicate`: a resend of one kept before)."""

    step: Step | None = None
    queued: QueuedInput | None = None
    duplicate: bool = False


def new_entry_id() -> str:
    """An id for a waiting message whose sender gave none (a terminal client, the page):
    the message id its turn records."""
    return "q-" + new_session_id()


class Inbox:
    """A run's steering messages (xclaw/recorder/recorder.py `SteerInbox`): asked at each
    tool boundary, read only when this worker knows messages wait for the session."""

    def __init__(self, inputs: Inputs, session_id: str) -> None:
        self.inputs = inputs
        self.session_id = session_id

    async def take(self) -> list[QueuedInput]:
        p, sid = self.inputs.parts, self.session_id
        if sid not in p.runs.queued:
            return []
        out = []
        for entry in await self.inputs.waiting(sid):
            if entry.mode != "steer":
                continue
            if await p.db(p.record.message_step, sid, entry.id) is not None:
                # Recorded where it was delivered, then a kill: only its entry was left.
                await p.db(p.record.write, Unqueue(session_id=sid, id=entry.id))
                continue
            out.append(entry)
        return out

    def delivered(self) -> None:
        task = asyncio.get_running_loop().create_task(self.inputs.tell(self.session_id))
        self.inputs.telling.add(task)
        task.add_done_callback(self.inputs.telling.discard)


class Inputs:
    def __init__(self, parts: InputParts) -> None:
        self.parts = parts
        self._starting: set[str] = set()  # sessions whose next message is being started
        self.telling: set[asyncio.Task[None]] = set()

    def inbox(self, session_id: str) -> Inbox:
        """What a run of the session asks for steering messages at each tool boundary."""
        return Inbox(self, session_id)

    async def waiting(self, session_id: str) -> list[QueuedInput]:
        """The session's waiting messages, in the order they run."""
        p = self.parts
        return await p.db(p.record.queued, session_id)

    async def keep(
        self,
        session_id: str,
        text: str,
        mode: BusyPolicy,
        *,
        message_id: str | None,
        actor: Actor | None,
        agent: str | None,
    ) -> tuple[QueuedInput, bool]:
        """The message written to the session's queue (durably, before the sender hears of
        it), every client told; then, for `interrupt`, the run stopped as Stop stops it.
        (entry, False) for a resend of an id queued before. MessageRecorded when the id
        ran already."""
        p = self.parts
        entry, added = await p.db(
            p.record.write,
            QueueInput(
                session_id=session_id,
                id=message_id or new_entry_id(),
                mode=mode,
                content=p.redact.text(text),
                sent_by=None if actor is None else actor.recorded(),
                agent=agent,
            ),
        )
        p.runs.queued.add(session_id)
        if added:
            await p.announce(session_id)  # the run may be another worker's
            await self.tell(session_id)
            if mode == "interrupt":
                p.cancel(session_id)
        await self.kick(session_id)  # the run may have ended meanwhile
        return entry, added

    async def drop(self, session_id: str, entry_id: str) -> QueuedInput | None:
        """A waiting message cancelled (None: it was not waiting), every client told."""
        p = self.parts
        gone = await p.db(p.record.write, Unqueue(session_id=session_id, id=entry_id))
        if gone is not None:
            await self.tell(session_id)
        return gone  # type: ignore[no-any-return]

    async def tell(self, session_id: str, entries: list[QueuedInput] | None = None) -> None:
        """Every client of the session, here and elsewhere, gets its queue as it is."""
        p = self.parts
        if entries is None:
            entries = await self.waiting(session_id)
        if not entries:
            p.runs.queued.discard(session_id)
        p.broadcast.emit(session_id, queue_frame([e.to_json() for e in entries]))

    def queued_elsewhere(self, session_id: str, driver: bool) -> None:
        """Another worker kept a message for the session (xclaw/runtime/cluster.py): a run
        here goes on to it when it ends; addressed to this worker as the session's driver
        whose run ended already (its hand-over found nothing), it starts now."""
        p = self.parts
        p.runs.queued.add(session_id)
        if driver and not p.runs.stopping:
            task = asyncio.get_running_loop().create_task(self.kick(session_id))
            self.telling.add(task)
            task.add_done_callback(self.telling.discard)

    async def after_run(self, session_id: str) -> None:
        """A run of the session ended here: the first waiting message starts."""
        await self.kick(session_id)

    async def kick(self, session_id: str) -> None:
        """Start the first waiting message, if the session is idle and has one. A
        session left with interrupted work resumes first (its end hands over)."""
        p = self.parts
        if session_id in self._starting:
            return
        self._starting.add(session_id)
        try:
            while not p.runs.stopping:
                handing_over = session_id in p.runs.handing_over
                if p.busy(session_id) and not handing_over:
                    return
                try:
                    entries, session = await self._read(session_id, handing_over)
                except SessionNotFound:
                    return
                if not entries:
                    p.runs.queued.discard(session_id)
                    return
                p.runs.queued.add(session_id)
                if session is None:
                    try:
                        session = await p.db(p.record.get_session, session_id)
                    except SessionNotFound:
                        return
                if resumable(session):
                    await p.resume(session_id)
                    return
                if not await self._start(entries[0], session):
                    return
        finally:
            self._starting.discard(session_id)

    async def _read(
        self, session_id: str, handing_over: bool
    ) -> tuple[list[QueuedInput], Session | None]:
        """The waiting messages and, when a run hands over to them (it knew some wait), the
        session too, both asked at once: the hand-over waits for one round trip, not two
        (bench/README.md, "Queued messages"). Otherwise the session is read only if a
        message waits (None here)."""
        p = self.parts
        if not handing_over:
            return await self.waiting(session_id), None
        entries, session = await asyncio.gather(
            self.waiting(session_id), p.db(p.record.get_session, session_id)
        )
        return entries, session

    async def _start(self, entry: QueuedInput, session: Session) -> bool:
        """True: go on with the next (this one ran before, or cannot run: dropped)."""
        p, sid = self.parts, entry.session_id
        try:
            _, again = await p.starts.message(
                sid,
                entry.content,
                create=False,
                message_id=entry.id,
                agent=entry.agent,
                queued=entry,
                session=session,
            )
        except (SessionBusy, MessageRecorded):
            return False  # another start won: its run's end hands over
        except XclawError as e:  # it cannot run here (its agent, the model): said, dropped
            log.warning("event=queued_refused session=%s id=%s code=%s", sid, entry.id, e.code)
            p.broadcast.emit(sid, error_frame(f"a queued message cannot run: {e.message}", e.code))
            await p.db(p.record.write, Unqueue(session_id=sid, id=entry.id))
            await self.tell(sid)
            return True
        if again:  # it was recorded (and run) before: only its entry was left
            await p.db(p.record.write, Unqueue(session_id=sid, id=entry.id))
            await self.tell(sid)
            return True
        await self.tell(sid)
        return False
