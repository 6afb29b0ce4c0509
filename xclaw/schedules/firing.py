"""[schedules] Firing schedules and delivering fires: each worker's check (docs/schedules.md).

Every worker of a database runs `Scheduler.run`: at each check it claims the due ticks of the
schedules (store/schedules/sql.py: one worker wins each tick), then delivers the fires it
claimed and the pending ones no worker holds (a worker killed after its claim, a fire
deferred because its session was busy). A delivery sends the fire's message with the fire's
id as its message id (`Target.send`), so whoever delivers it, however often, the session
runs it once; a fork of a template is made under an id derived from the tick, so a retried
fire finds the fork it made.

The rights are the creator's, asked at each fire: acting on the session (collaborator or
owner, docs/teams.md), or reading the template (the fork is then theirs). A user removed, or
whose part was taken away, gets nothing done: the fire is refused, with the reason kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from xclaw.errors import ConfigMismatch, SessionBusy, SessionNotFound, XclawError
from xclaw.people.teams import SERVER_TOKEN, Actor, Identity, Need, allows
from xclaw.runtime.inputs import Submitted
from xclaw.schedules.spec import (
    CatchUp,
    Kind,
    When,
    chosen_ticks,
    fire_id,
    fork_session_id,
    no_step_to_fork,
)
from xclaw.store.base import RecordReader, ScheduleStore, TeamStore
from xclaw.store.schedules.sql import Fire, NewFire, Schedule
from xclaw.store.steps.model import Session
from xclaw.store.steps.writes import ClaimTicks, SettleFire, TakeFire

log = logging.getLogger("xclaw.schedules")

# How long a worker holds a fire it claimed before another may deliver it (it died).
CLAIM_MS = 15_000
# A fire deferred (its session busy) is tried again after this long.
RETRY_MS = 1_000


class Target(Protocol):
    """What firing needs of the runtime (xclaw/runtime/runtime.py `Runtime`)."""

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        actor: Actor | None = None,
        message_id: str | None = None,
    ) -> Submitted:
        """A message, and what it does while the session's run is busy: the session's
        input policy (`input.busy`, docs/configuration.md)."""
        ...

    async def fork(
        self,
        session_id: str,
        step_ref: str,
        title: str | None = None,
        *,
        new_session_id: str | None = None,
    ) -> Session: ...


class Reads(Protocol):
    """The roles firing takes of the store: schedules (and their writes), sessions' steps."""

    @property
    def schedules(self) -> ScheduleStore: ...

    @property
    def record(self) -> RecordReader: ...


@dataclass
class Checked:
    """What one check did (for tests and the log)."""

    claimed: int = 0
    delivered: int = 0
    deferred: int = 0
    refused: int = 0


class Scheduler:
    """One worker's schedule checks and deliveries. `clock`: milliseconds since the epoch
    (injected by tests); `grace_ms`: how late a tick may be and still be on time (catch-up,
    xclaw/schedules/spec.py `chosen_ticks`); `poll_s`: the longest sleep between checks."""

    def __init__(
        self,
        store: Reads,
        teams: TeamStore | None,
        target: Target,
        worker_id: str,
        *,
        clock: Callable[[], int] | None = None,
        grace_ms: int = 60_000,
        poll_s: float = 1.0,
    ) -> None:
        self.store = store
        self.teams = teams
        self.target = target
        self.worker_id = worker_id
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.grace_ms = grace_ms
        self.poll_s = poll_s
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()

    async def _db(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kw)

    # --- the loop ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="xclaw-schedules")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def wake(self) -> None:
        """Check now (a schedule was added or a delivery recorded here)."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                await self.check()
                nxt = await self._db(self.store.schedules.next_due)
            except Exception:  # a database away for a moment: the next check tries again
                log.exception("event=schedule_check_failed worker=%s", self.worker_id)
                nxt = None
            wait = self.poll_s
            if nxt is not None:
                wait = min(wait, max(0.0, (nxt - self.clock()) / 1000))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.01))

    async def check(self) -> Checked:
        """Claim the due ticks, then deliver every pending fire nobody holds (older ones:
        deferred, or their worker died) and then those just claimed, in tick order. A fire
        of a session a fire of this check found busy waits too, so its fires keep their
        order. One check at a time per worker."""
        async with self._lock:
            done = Checked()
            now = self.clock()
            claimed: list[Fire] = []
            for schedule in await self._db(self.store.schedules.due_schedules, now):
                claimed += await self._claim(schedule, now)
            done.claimed = len(claimed)
            busy: set[str] = set()
            for pending in await self._db(self.store.schedules.pending_fires, self.clock()):
                took = await self._db(
                    self.store.schedules.write,
                    TakeFire(
                        fire_id=pending.fire_id,
                        worker_id=self.worker_id,
                        now=self.clock(),
                        claimed_until=self.clock() + CLAIM_MS,
                    ),
                )
                if took:
                    await self._deliver(pending, done, busy)
            for fire in claimed:
                await self._deliver(fire, done, busy)
            return done

    async def _claim(self, s: Schedule, now: int) -> list[Fire]:
        assert s.next_fire is not None
        when = When(Kind(s.kind), s.spec, s.tz, s.anchor)
        ticks, extra = when.due(s.next_fire, now)
        chosen, skipped = chosen_ticks(CatchUp(s.catch_up), ticks, extra, now, self.grace_ms)
        new = tuple(
            NewFire(
                fire_id=fire_id(s.schedule_id, t),
                source="schedule",
                source_id=s.schedule_id,
                session_id=s.session_id or fork_session_id(s.seed, t),
                message=s.message,
                created_by=s.created_by,
                tick=t,
                fork_of=s.fork_of,
            )
            for t in chosen
        )
        until = now + CLAIM_MS
        claimed = await self._db(
            self.store.schedules.write,
            ClaimTicks(
                schedule_id=s.schedule_id,
                expected=s.next_fire,
                next_fire=when.next_after(now),
                fires=new,
                skipped=skipped,
                worker_id=self.worker_id,
                claimed_until=until,
            ),
        )
        if not claimed:
            return []
        if skipped:
            log.info(
                "event=schedule_ticks_skipped schedule=%s skipped=%d catch_up=%s",
                s.schedule_id,
                skipped,
                s.catch_up,
            )
        return [pending_fire(f, self.worker_id, until, now) for f in new]

    # --- delivering a fire ------------------------------------------------------------------
    async def deliver(self, fire: Fire) -> Checked:
        """Deliver one fire this worker holds (a webhook's, just recorded)."""
        done = Checked()
        async with self._lock:
            await self._deliver(fire, done, set())
        return done

    async def _deliver(self, fire: Fire, done: Checked, busy: set[str]) -> None:
        try:
            if fire.session_id in busy:
                raise SessionBusy("an earlier fire of this session is waiting")
            done_as = await self._send(fire)
        except ConfigMismatch as e:
            # This worker may not drive the session (another model chain, approval mode or
            # sandbox): left for a worker that may, tried again here after a while.
            done.deferred += 1
            await self._settle(
                fire, "pending", note=f"deferred: {e}", deferred=True,
                retry_at=self.clock() + CLAIM_MS,
            )  # fmt: skip
            return
        except SessionBusy as e:
            busy.add(fire.session_id)
            # A run is in flight: the fire waits for the next check (counted, with why).
            done.deferred += 1
            await self._settle(
                fire, "pending", note=f"deferred: {e}", deferred=True,
                retry_at=self.clock() + RETRY_MS,
            )  # fmt: skip
            return
        except (XclawError, ValueError) as e:
            done.refused += 1
            log.warning("event=fire_refused fire=%s why=%s", fire.fire_id, e)
            await self._settle(fire, "refused", note=str(e))
            return
        done.delivered += 1
        if done_as.step is not None:
            await self._settle(fire, "delivered", seq=done_as.step.seq)
            return
        # Kept in the session's queue by its input policy: it runs there, in its turn, as
        # the message with this fire's id (never twice: the queue keeps an id once).
        mode = done_as.queued.mode if done_as.queued is not None else "queue"
        await self._settle(fire, "delivered", note=f"queued ({mode}): the session was busy")

    async def _settle(
        self,
        fire: Fire,
        state: str,
        *,
        note: str | None = None,
        seq: int | None = None,
        deferred: bool = False,
        retry_at: int = 0,
    ) -> None:
        await self._db(
            self.store.schedules.write,
            SettleFire(
                fire_id=fire.fire_id,
                state=state,
                note=note,
                seq=seq,
                deferred=deferred,
                retry_at=retry_at,
            ),
        )

    async def _send(self, fire: Fire) -> Submitted:
        who = await self._identity(fire.created_by)
        sid = fire.session_id
        if fire.fork_of is not None:
            await self._fork(fire, who)
        else:
            await self._require(who, sid, Need.ACT)
        return await self.target.submit(
            sid, fire.message, actor=Actor(who, via=fire.source), message_id=fire.fire_id
        )

    async def _fork(self, fire: Fire, who: Identity) -> None:
        """The fire's own fork of the template, made once (a retry finds it)."""
        assert fire.fork_of is not None
        if await self._db(self.store.record.find_session, fire.session_id) is not None:
            return
        await self._require(who, fire.fork_of, Need.READ)
        latest = await self._db(self.store.record.latest_steps, fire.fork_of, 1)
        if not latest:
            raise XclawError(no_step_to_fork(fire.fork_of))
        try:
            await self.target.fork(
                fire.fork_of, f"s{latest[-1].seq:04d}", None, new_session_id=fire.session_id
            )
        except Exception:
            if await self._db(self.store.record.find_session, fire.session_id) is None:
                raise
            return  # made by another worker a moment ago
        if who.user is not None and self.teams is not None:
            await self._db(self.teams.claim_session, fire.session_id, who.user)

    async def _identity(self, user: str | None) -> Identity:
        if user is None:
            return SERVER_TOKEN
        found = None if self.teams is None else await self._db(self.teams.get_user, user)
        if found is None:
            raise XclawError(f"the user {user!r} who made it is gone")
        return Identity(user, found.role)

    async def _require(self, who: Identity, session_id: str, need: Need) -> None:
        if who.admin:
            if await self._db(self.store.record.find_session, session_id) is None:
                raise SessionNotFound(session_id)
            return
        assert who.user is not None and self.teams is not None
        role = await self._db(self.teams.session_role, session_id, who.user)
        if role is None:
            raise SessionNotFound(session_id)
        if not allows(role, need):
            raise XclawError(f"{who.user} is a {role.value} of session {session_id}: not enough")


def pending_fire(f: NewFire, worker_id: str, until: int, now: int) -> Fire:
    """The row a claim wrote, without reading it back."""
    return Fire(
        f.fire_id, f.source, f.source_id, f.tick, f.session_id, f.fork_of, f.message,
        f.created_by, "pending", None, 0, None, worker_id, until, now, now,
    )  # fmt: skip
