"""Schedules fired by workers (xclaw/schedules/firing.py) on real runtimes and a real
database of each backend, with an injected clock (no test waits for a tick): each tick runs
once across two workers, a fire whose worker died after claiming it is delivered by another
once, a busy session defers it, the catch-up policies after a downtime, forks of a template,
and the creator's rights asked at each fire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.store.builders import user
from tests.store.conftest import BACKEND_PARAMS, BACKENDS, Backend
from xclaw.config.settings import Settings
from xclaw.llm.scripted import ScriptedModel
from xclaw.people.teams import ShareRole, UserRole
from xclaw.runtime.runtime import Runtime
from xclaw.schedules.firing import CLAIM_MS, Scheduler
from xclaw.schedules.making import new_schedule
from xclaw.schedules.spec import Kind, fire_id
from xclaw.store import open_store
from xclaw.store.base import Store
from xclaw.store.steps.model import StepType
from xclaw.store.steps.writes import AddSchedule, AddStep, ClaimTicks


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


class Worker:
    """A runtime with its cluster and its scheduler, as `xclaw serve` wires them."""

    def __init__(self, backend: Backend, tmp: Path, script: Path, clock: Clock) -> None:
        settings = Settings(
            home=tmp, database=backend.url, workspace_root=tmp / "ws", approval={"mode": "yolo"}
        )
        self.store: Store = open_store(backend.url)
        self.runtime = Runtime(self.store, settings, model=ScriptedModel(script))
        self.cluster = self.runtime.new_cluster()
        self.scheduler = Scheduler(
            self.store,  # type: ignore[arg-type]
            self.store.teams,
            self.runtime,
            self.runtime.worker_id,
            clock=clock,
            grace_ms=5_000,
        )

    async def close(self) -> None:
        await self.runtime.shutdown()
        self.store.close()


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    b = BACKENDS[request.param](tmp_path)
    yield b
    b.drop()


@pytest.fixture
async def workers(backend: Backend, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    made: list[Worker] = []

    async def make(
        clock: Clock, turns: list[dict[str, Any]] | None = None, script_name: str = "script.json"
    ) -> Worker:
        """`script_name`: its scripted model's file, whose path is the model's name (a session
        is driven only with the model it runs with: xclaw/runtime/agreement.py)."""
        script = tmp_path / script_name
        script.write_text(json.dumps({"turns": turns or [{"text": "done"}] * 50}))
        w = Worker(backend, tmp_path, script, clock)
        await w.cluster.start()
        made.append(w)
        return w

    yield make
    for w in made:
        await w.close()


def add(store: Store, *, every: str = "2s", now: int = 0, **kw: Any) -> str:
    s = new_schedule(
        kind=Kind(kw.pop("kind", "every")),
        when=kw.pop("when", every),
        tz="UTC",
        session_id=kw.pop("session_id", None),
        fork_of=kw.pop("fork_of", None),
        message=kw.pop("message", "check the build"),
        catch_up=kw.pop("catch_up", "skip"),
        created_by=kw.pop("created_by", None),
        now_ms=now,
    )
    return str(store.schedules.write(AddSchedule(schedule=s)).schedule_id)


def messages(store: Store, sid: str) -> list[str | None]:
    """The message ids of the session's user messages, in order."""
    out = []
    for s in store.record.steps(sid):
        if s.step_type is StepType.USER_INPUT:
            out.append((s.output_data or {}).get("messageId"))
    return out


async def idle(*ws: Worker) -> None:
    for _ in range(500):
        if not any(w.runtime.driven_sessions() for w in ws):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a run did not end")


async def session(store: Store) -> str:
    sid = store.record.create_session(title="target").session_id
    return sid


async def test_each_tick_runs_once_across_two_workers(workers: Any) -> None:
    clock = Clock(0)
    a, b = await workers(clock), await workers(clock)
    sid = await session(a.store)
    sch = add(a.store, session_id=sid)
    assert (await a.scheduler.check()).claimed == 0  # nothing due at 0
    clock.ms = 2_000
    got_a, got_b = await asyncio.gather(a.scheduler.check(), b.scheduler.check())
    assert got_a.claimed + got_b.claimed == 1
    assert got_a.delivered + got_b.delivered == 1
    await idle(a, b)
    clock.ms = 4_100
    await b.scheduler.check()
    await a.scheduler.check()
    await idle(a, b)
    assert messages(a.store, sid) == [fire_id(sch, 2_000), fire_id(sch, 4_000)]
    st = a.store.schedules
    assert st.get_schedule(sch).fired == 2
    assert {f.state for f in st.fires_of(sch)} == {"delivered"}


async def test_a_fire_whose_worker_died_is_delivered_once_by_another(workers: Any) -> None:
    clock = Clock(2_000)
    a, b = await workers(clock), await workers(clock)
    sid = await session(a.store)
    sch = add(a.store, session_id=sid)
    st = a.store.schedules
    # Worker "dead" claimed the tick and died before delivering it.
    s = st.get_schedule(sch)
    [due] = st.due_schedules(2_000)
    from xclaw.store.schedules.sql import NewFire

    fire = NewFire(
        fire_id=fire_id(sch, 2_000), source="schedule", source_id=sch, session_id=sid,
        message=s.message, created_by=None, tick=2_000,
    )  # fmt: skip
    assert st.write(
        ClaimTicks(
            schedule_id=sch, expected=due.next_fire or 0, next_fire=10**9, fires=(fire,),
            skipped=0, worker_id="dead", claimed_until=2_000 + CLAIM_MS,
        )
    )  # fmt: skip
    assert (await b.scheduler.check()).delivered == 0  # its claim still holds
    clock.ms = 2_000 + CLAIM_MS
    assert (await b.scheduler.check()).delivered == 1
    await idle(a, b)
    # A second dead worker: it had sent the message before dying (the session holds it).
    fire2 = NewFire(
        fire_id=fire_id(sch, 4_000), source="schedule", source_id=sch, session_id=sid,
        message=s.message, created_by=None, tick=4_000,
    )  # fmt: skip
    st.write(
        ClaimTicks(
            schedule_id=sch, expected=10**9, next_fire=2 * 10**9, fires=(fire2,),
            skipped=0, worker_id="dead2", claimed_until=clock.ms,
        )
    )  # fmt: skip
    await a.runtime.send(sid, s.message, message_id=fire2.fire_id)
    await idle(a, b)
    assert (await b.scheduler.check()).delivered == 1  # found recorded: not run again
    await idle(a, b)
    assert messages(a.store, sid) == [fire_id(sch, 2_000), fire_id(sch, 4_000)]
    got = st.get_fire(fire2.fire_id)
    assert got is not None and got.state == "delivered" and got.seq is not None


async def test_a_busy_session_defers_the_fire_to_a_later_check(workers: Any) -> None:
    clock = Clock(0)
    a = await workers(clock, [{"text": "slow", "sleep": 1.0}, {"text": "done"}])
    sid = await session(a.store)
    sch = add(a.store, session_id=sid)
    await a.runtime.send(sid, "a long task")  # a run in flight
    clock.ms = 2_000
    got = await a.scheduler.check()
    assert (got.claimed, got.deferred, got.delivered) == (1, 1, 0)
    f = a.store.schedules.get_fire(fire_id(sch, 2_000))
    assert f is not None and f.state == "pending" and f.deferrals == 1
    assert f.note is not None and "deferred" in f.note
    await idle(a)
    clock.ms = 2_000 + 1_000  # its retry time
    assert (await a.scheduler.check()).delivered == 1
    await idle(a)
    assert messages(a.store, sid) == [None, fire_id(sch, 2_000)]


@pytest.mark.parametrize(
    ("policy", "fired"),
    [("skip", []), ("once", [600_000]), ("all", [60_000 * k for k in range(1, 11)])],
)
async def test_catch_up_after_a_downtime(workers: Any, policy: str, fired: list[int]) -> None:
    clock = Clock(0)
    a = await workers(clock)
    sid = await session(a.store)
    sch = add(a.store, session_id=sid, catch_up=policy, every="1m")
    clock.ms = 600_000 + 5_001  # ten ticks missed, the last one past the grace
    got = await a.scheduler.check()
    for _ in range(len(fired)):  # `all`: one after the other, each deferred while busy
        await idle(a)
        clock.ms += 1_000
        await a.scheduler.check()
    await idle(a)
    assert got.claimed == len(fired)
    assert messages(a.store, sid) == [fire_id(sch, t) for t in fired]
    s = a.store.schedules.get_schedule(sch)
    assert (s.fired, s.skipped) == (len(fired), 10 - len(fired))
    assert s.next_fire == 660_000


async def test_a_tick_just_late_fires_under_skip(workers: Any) -> None:
    clock = Clock(0)
    a = await workers(clock)
    sid = await session(a.store)
    sch = add(a.store, session_id=sid)
    clock.ms = 6_500  # three ticks due, the last within the grace: it fires, two skipped
    assert (await a.scheduler.check()).delivered == 1
    await idle(a)
    assert messages(a.store, sid) == [fire_id(sch, 6_000)]
    assert a.store.schedules.get_schedule(sch).skipped == 2


async def test_each_fire_forks_the_template_once(workers: Any) -> None:
    clock = Clock(0)
    a, b = await workers(clock), await workers(clock)
    tpl = await session(a.store)
    a.store.record.write(AddStep(session_id=tpl, step=user("you are the nightly checker")))
    sch = add(a.store, fork_of=tpl)
    clock.ms = 2_000
    await a.scheduler.check()
    await idle(a, b)
    f = a.store.schedules.get_fire(fire_id(sch, 2_000))
    assert f is not None and f.state == "delivered"
    fork = a.store.record.get_session(f.session_id)
    assert fork.parent_session_id == tpl
    assert messages(a.store, fork.session_id) == [None, fire_id(sch, 2_000)]
    # Delivered again (a retry after a kill): the same fork, the message not run again.
    assert (await b.scheduler.deliver(f)).delivered == 1
    await idle(a, b)
    assert messages(a.store, fork.session_id) == [None, fire_id(sch, 2_000)]
    clock.ms = 4_000
    await b.scheduler.check()
    await idle(a, b)
    f2 = a.store.schedules.get_fire(fire_id(sch, 4_000))
    assert f2 is not None and f2.session_id != f.session_id
    assert len([s for s in a.store.record.list_sessions() if s.parent_session_id == tpl]) == 2
    assert messages(a.store, tpl) == [None]  # the template itself untouched


async def test_the_creators_rights_are_asked_at_each_fire(workers: Any) -> None:
    clock = Clock(0)
    a = await workers(clock)
    teams = a.store.teams
    teams.add_user("bob", UserRole.MEMBER, None)
    sid = await session(a.store)
    teams.share_session(sid, "bob", ShareRole.COLLABORATOR, by=None)
    sch = add(a.store, session_id=sid, created_by="bob")
    clock.ms = 2_000
    assert (await a.scheduler.check()).delivered == 1
    await idle(a)
    step = [s for s in a.store.record.steps(sid) if s.step_type is StepType.USER_INPUT][-1]
    assert step.output_data["by"]["user"] == "bob"  # who made it, on the message
    teams.share_session(sid, "bob", ShareRole.VIEWER, by=None)  # may read only now
    clock.ms = 4_000
    assert (await a.scheduler.check()).refused == 1
    f = a.store.schedules.get_fire(fire_id(sch, 4_000))
    assert f is not None and f.state == "refused" and "viewer" in (f.note or "")
    teams.remove_user("bob")
    clock.ms = 6_000
    assert (await a.scheduler.check()).refused == 1
    f = a.store.schedules.get_fire(fire_id(sch, 6_000))
    assert f is not None and "gone" in (f.note or "")
    assert messages(a.store, sid) == [fire_id(sch, 2_000)]


async def test_a_worker_that_may_not_drive_the_session_leaves_the_fire_to_one_that_may(
    workers: Any,
) -> None:
    clock = Clock(0)
    a = await workers(clock)
    b = await workers(clock, script_name="other.json")  # another model: may not drive it
    sid = await session(a.store)
    await a.runtime.send(sid, "hello")  # the session now runs with a's model
    await idle(a, b)
    sch = add(a.store, session_id=sid)
    clock.ms = 2_000
    got = await b.scheduler.check()
    assert (got.claimed, got.deferred, got.delivered, got.refused) == (1, 1, 0, 0)
    f = a.store.schedules.get_fire(fire_id(sch, 2_000))
    assert f is not None and f.state == "pending" and "deferred" in (f.note or "")
    assert (await a.scheduler.check()).delivered == 0  # held for a while: not retried at once
    clock.ms = 2_000 + CLAIM_MS
    assert (await a.scheduler.check()).delivered >= 1
    await idle(a, b)
    assert messages(a.store, sid)[1] == fire_id(sch, 2_000)


async def test_a_fire_on_a_busy_session_follows_its_input_policy(workers: Any) -> None:
    """`queue` (the session's own policy): the fire waits in the session's queue and runs
    after the run in flight, once, however often it is delivered."""
    clock = Clock(0)
    a = await workers(clock, [{"text": "slow", "sleep": 1.0}, {"text": "done"}, {"text": "ok"}])
    b = await workers(clock, [{"text": "slow", "sleep": 1.0}, {"text": "done"}, {"text": "ok"}])
    sid = await session(a.store)
    await a.runtime.set_busy_policy(sid, "queue")
    sch = add(a.store, session_id=sid)
    await a.runtime.send(sid, "a long task")  # a run in flight
    clock.ms = 2_000
    got = await a.scheduler.check()
    assert (got.claimed, got.delivered, got.deferred) == (1, 1, 0)
    f = a.store.schedules.get_fire(fire_id(sch, 2_000))
    assert f is not None and f.state == "delivered" and "queued (queue)" in (f.note or "")
    assert [q.id for q in await a.runtime.queued(sid)] == [fire_id(sch, 2_000)]
    # Delivered again (a retry after a kill, by another worker): still queued once.
    assert (await b.scheduler.deliver(f)).delivered == 1
    assert [q.id for q in await a.runtime.queued(sid)] == [fire_id(sch, 2_000)]
    await idle(a, b)
    for _ in range(300):  # the queued message runs after the long task
        if fire_id(sch, 2_000) in messages(a.store, sid) and not await a.runtime.queued(sid):
            break
        await asyncio.sleep(0.02)
    await idle(a, b)
    assert messages(a.store, sid) == [None, fire_id(sch, 2_000)]
