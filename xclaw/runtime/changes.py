"""[runtime] Changes this server did not make, told to the clients it serves (docs/protocol.md,
"Changes made outside the server").

`xclaw rollback` or `xclaw gc` from the command line — or a rollback through another server
on the same database — is written with a row of the change log (xclaw/store/steps/changes.py) in
its own transaction. Every server reads the log twice a second (a handful of rows at most)
and, for a session with sockets attached here, sends what an online rollback sends: the
`[rollback]` notice, `rolledback`, the new `history` and `status`; a deletion, a notice. A
change this process made itself is skipped: its clients were told already.

The log is read a window back in time, not by id: PostgreSQL may commit a later id first.
A change committed more than WINDOW_MS after it was stamped (or by a host whose clock is that
far off) is missed here; the clients see it on their next reconnect, as after any gap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from xclaw.errors import SessionNotFound
from xclaw.recorder.caller import StoreCaller
from xclaw.runtime.subscribers import Broadcast
from xclaw.store.base import LeaseStore, RecordReader
from xclaw.store.steps.changes import ORIGIN, SessionChange
from xclaw.store.steps.model import Session
from xclaw.store.steps.rows import now_ms
from xclaw.wire.build import for_session, notice_frame, rollback_notice, rolledback_frame
from xclaw.wire.shapes import FrameJson, HistoryJson, StatusJson

log = logging.getLogger("xclaw.changes")

POLL_S = 0.5
WINDOW_MS = 30_000


class ChangeReader(Protocol):
    """The roles the watch takes: the sessions, and the change log (a part of the lease
    store: what workers tell each other)."""

    @property
    def record(self) -> RecordReader: ...

    @property
    def leases(self) -> LeaseStore: ...


@dataclass(frozen=True, slots=True)
class ChangeParts:
    """What the watch over outside changes works with (wired by the runtime's assembly)."""

    db: StoreCaller[ChangeReader]  # the change log and the sessions
    broadcast: Broadcast
    history: Callable[[str], HistoryJson]  # a session's history frame (on a worker thread)
    status: Callable[[Session], StatusJson]  # its state in words, for its clients here


class ChangeWatcher:
    def __init__(self, parts: ChangeParts, *, poll_s: float = POLL_S) -> None:
        self.parts = parts
        self.poll_s = poll_s
        self._seen: dict[int, int] = {}  # change id -> its time, while inside the window

    async def start(self) -> None:
        """What the log holds already happened before this server started: not news."""
        for change in await self._read():
            self._seen[change.id] = change.created_at

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.poll()
            except Exception as e:  # noqa: BLE001 - the database is away: try later
                log.warning("event=changes_poll_failed error=%r", str(e)[:200])

    async def _read(self) -> list[SessionChange]:
        db = self.parts.db
        return await db(db.store.leases.changes_since, now_ms() - WINDOW_MS)

    async def poll(self) -> list[SessionChange]:
        """Tell the clients here of each change not seen yet; returns those changes."""
        since = now_ms() - WINDOW_MS
        fresh = [c for c in await self._read() if c.id not in self._seen]
        for change in fresh:
            self._seen[change.id] = change.created_at
        self._seen = {i: at for i, at in self._seen.items() if at >= since}
        for change in fresh:
            if change.origin != ORIGIN and self.parts.broadcast.watched(change.session_id):
                log.info(
                    "event=outside_change session=%s kind=%s origin=%s",
                    change.session_id,
                    change.kind,
                    change.origin,
                )
                await self._tell(change)
        return fresh

    async def _tell(self, change: SessionChange) -> None:
        sid, p = change.session_id, self.parts
        frames: list[FrameJson]
        if change.kind == "rollback":
            step = str(change.detail.get("stepId", "?"))
            deleted = change.detail.get("deleted")
            deleted = deleted if isinstance(deleted, int) else 0
            try:
                session = await p.db(p.db.store.record.get_session, sid)
                history = await p.db(p.history, sid)
            except SessionNotFound:
                return  # deleted since: its own entry says so
            if p.broadcast.peers is not None:
                p.broadcast.peers.forget(sid)  # approvals it remembered were rolled back
            frames = [
                notice_frame(rollback_notice(step, by=change.origin)),
                rolledback_frame(step, deleted),
                history,
                p.status(session),
            ]
        elif change.kind == "delete":
            frames = [
                notice_frame(
                    f"[deleted] this session was deleted outside this server (by "
                    f"{change.origin}); its record is gone — a new message starts it afresh"
                )
            ]
        else:
            return
        for frame in frames:
            p.broadcast.deliver(sid, for_session(frame, sid))
