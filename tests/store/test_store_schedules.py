"""Schedules, webhooks and fires in the store (store/schedules/sql.py), on both backends:
written only as write values (`store.record.write`), a tick claimed by one of two claims, a delivery
id recorded once, a fire taken by one worker at a time, pause/resume/remove, and a fork made
under a given id."""

from __future__ import annotations

import pytest

from tests.store.builders import user
from tests.store.conftest import Backend, StoreFactory
from xclaw.errors import SessionNotFound, StoreError, UnknownSchedule
from xclaw.schedules.making import new_hook, new_schedule
from xclaw.schedules.spec import Kind
from xclaw.store.base import Store
from xclaw.store.schedules.sql import NewFire
from xclaw.store.steps.writes import (
    SYNC,
    AddHook,
    AddSchedule,
    AddStep,
    ChangeSchedule,
    ClaimTicks,
    RecordDelivery,
    SettleFire,
    Sync,
    TakeFire,
    kind_of,
)
from xclaw.store.steps.writes import (
    Kind as WriteKind,
)


def every(store: Store, sid: str, period: str = "30m", **kw: object) -> str:
    s = new_schedule(
        kind=Kind.EVERY,
        when=period,
        tz="UTC",
        session_id=sid,
        fork_of=None,
        message="check the build",
        catch_up=str(kw.get("catch_up", "skip")),
        created_by=None,
        now_ms=0,
    )
    made = store.schedules.write(AddSchedule(schedule=s))
    return str(made.schedule_id)


def fire(sched: str, tick: int, sid: str) -> NewFire:
    return NewFire(
        fire_id=f"schedule.{sched}.{tick}",
        source="schedule",
        source_id=sched,
        session_id=sid,
        message="check the build",
        created_by=None,
        tick=tick,
    )


def test_a_schedule_is_recorded_and_due_at_its_tick(store: Store) -> None:
    sid = store.record.create_session(title="s").session_id
    sch = every(store, sid)
    st = store.schedules
    got = st.get_schedule(sch)
    assert (got.session_id, got.kind, got.spec, got.next_fire) == (
        sid,
        "every",
        "1800000",
        1_800_000,
    )
    assert got.created_by is None and not got.paused and got.seed
    assert st.due_schedules(1_799_999) == []
    assert [s.schedule_id for s in st.due_schedules(1_800_000)] == [sch]
    assert st.next_due() == 1_800_000
    with pytest.raises(SessionNotFound):
        every(store, "no-such-session")
    with pytest.raises(UnknownSchedule):
        st.get_schedule("nope")


def test_of_two_claims_of_one_tick_one_wins(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()  # two workers' stores on one database
    sid = a.record.create_session(title="s").session_id
    sch = every(a, sid)
    claim = dict(schedule_id=sch, expected=1_800_000, next_fire=3_600_000, skipped=0)
    won = a.schedules.write(
        ClaimTicks(**claim, fires=(fire(sch, 1_800_000, sid),), worker_id="A", claimed_until=9)
    )
    lost = b.schedules.write(
        ClaimTicks(**claim, fires=(fire(sch, 1_800_000, sid),), worker_id="B", claimed_until=9)
    )
    assert (won, lost) == (True, False)
    st = b.schedules
    got = st.get_schedule(sch)
    assert (got.next_fire, got.last_fire, got.fired) == (3_600_000, 1_800_000, 1)
    [f] = st.fires_of(sch)
    assert (f.state, f.worker_id, f.tick, f.session_id) == ("pending", "A", 1_800_000, sid)


def test_a_pending_fire_is_taken_by_one_worker_once_its_claim_runs_out(store: Store) -> None:
    sid = store.record.create_session(title="s").session_id
    sch = every(store, sid)
    st = store.schedules
    f = fire(sch, 1_800_000, sid)
    st.write(
        ClaimTicks(
            schedule_id=sch, expected=1_800_000, next_fire=3_600_000, skipped=0,
            fires=(f,), worker_id="A", claimed_until=2_000,
        )
    )  # fmt: skip
    assert st.pending_fires(1_999) == []  # A holds it
    assert [p.fire_id for p in st.pending_fires(2_000)] == [f.fire_id]
    take = dict(fire_id=f.fire_id, now=2_000, claimed_until=20_000)
    assert st.write(TakeFire(worker_id="B", **take)) is True
    assert st.write(TakeFire(worker_id="C", **take)) is False
    assert st.write(
        SettleFire(fire_id=f.fire_id, state="pending", note="busy", deferred=True, retry_at=5)
    )
    got = st.get_fire(f.fire_id)
    assert got is not None and (got.state, got.deferrals, got.note) == ("pending", 1, "busy")
    assert st.write(SettleFire(fire_id=f.fire_id, state="delivered", seq=3))
    got = st.get_fire(f.fire_id)
    assert got is not None and (got.state, got.seq) == ("delivered", 3)
    # Settled once: a late settle of another worker changes nothing.
    assert st.write(SettleFire(fire_id=f.fire_id, state="refused", note="x")) is False
    assert st.pending_fires(10**12) == []


def test_pause_resume_remove(store: Store) -> None:
    sid = store.record.create_session(title="s").session_id
    sch = every(store, sid)
    st = store.schedules
    st.write(ChangeSchedule(schedule_id=sch, paused=True))
    assert st.get_schedule(sch).paused and st.due_schedules(10**12) == []
    # A paused schedule's tick cannot be claimed by a worker that read it before the pause.
    claim = ClaimTicks(
        schedule_id=sch, expected=1_800_000, next_fire=3_600_000, skipped=0, fires=(),
        worker_id="A", claimed_until=0,
    )  # fmt: skip
    assert st.write(claim) is False
    st.write(ChangeSchedule(schedule_id=sch, paused=False))
    assert [s.schedule_id for s in st.due_schedules(10**12)] == [sch]
    st.write(ChangeSchedule(schedule_id=sch, remove=True))
    assert st.schedules() == []
    with pytest.raises(UnknownSchedule):
        st.write(ChangeSchedule(schedule_id=sch, remove=True))


def test_a_session_deleted_takes_its_schedules_and_hooks(store: Store) -> None:
    sid = store.record.create_session(title="s").session_id
    every(store, sid)
    st = store.schedules
    st.write(
        AddHook(hook=new_hook(name="ci", session_id=sid, template="t", created_by=None, now_ms=0))
    )
    store.record.delete_session(sid)
    assert st.schedules() == [] and st.hooks() == []


def test_a_delivery_id_is_recorded_once(store: Store) -> None:
    sid = store.record.create_session(title="s").session_id
    st = store.schedules
    hook = new_hook(name="ci", session_id=sid, template="build {status}", created_by=None, now_ms=0)
    st.write(AddHook(hook=hook))
    with pytest.raises(StoreError, match="already"):
        st.write(AddHook(hook=hook))
    got = st.get_hook("ci")
    assert got is not None and got.secret == hook.secret and "secret" not in got.to_json()
    f = NewFire(
        fire_id="hook.ci.d1", source="hook", source_id="ci", session_id=sid,
        message="build ok", created_by=None,
    )  # fmt: skip
    assert st.write(RecordDelivery(fire=f, worker_id="A", claimed_until=0)) is True
    assert st.write(RecordDelivery(fire=f, worker_id="B", claimed_until=0)) is False
    assert [x.fire_id for x in st.fires_of("ci")] == ["hook.ci.d1"]


def test_every_schedule_write_has_its_row_of_sync(store: Store) -> None:
    assert SYNC[WriteKind.TICK_CLAIMED][0] is Sync.DURABLE
    assert kind_of(ChangeSchedule(schedule_id="x", paused=True)) is WriteKind.SCHEDULE_CHANGED
    assert kind_of(SettleFire(fire_id="x", state="delivered")) is WriteKind.FIRE_SETTLED


def test_a_fork_under_a_given_id(store: Store, backend: Backend) -> None:
    sid = store.record.create_session(title="template").session_id
    store.record.write(AddStep(session_id=sid, step=user("hello")))
    made = store.record.fork(sid, 1, new_session_id="fixed0123")
    assert made.session_id == "fixed0123" and made.parent_session_id == sid
    with pytest.raises(Exception):  # noqa: B017 - the id is taken: the backend's own error
        store.record.fork(sid, 1, new_session_id="fixed0123")
    assert [s.seq for s in store.record.steps("fixed0123")] == [1]
