"""Session leases (one driver): one owner at a time, a fencing token that only grows, fenced
writes, expiry, dead owners, worker presence. Contract tests on both backends."""

from __future__ import annotations

import threading
import time

import pytest

from tests.store.builders import approval, llm, tool, user
from tests.waiting import wait_until
from tests.writes import finish
from xclaw.errors import LeaseLost, SessionNotFound
from xclaw.store.base import Store
from xclaw.store.leases import Lease, new_worker_id
from xclaw.store.steps.model import Status, StepStatus
from xclaw.store.steps.writes import AddStep, BeginStep


def test_one_owner_at_a_time_and_tokens_grow(store: Store) -> None:
    sid = store.record.create_session().session_id
    a = store.leases.acquire_lease(sid, "A", 30)
    assert a is not None and (a.session_id, a.owner, a.token) == (sid, "A", 1)
    assert store.leases.acquire_lease(sid, "B", 30) is None  # A's lease is live
    info = store.leases.lease_info(sid)
    assert info.live and info.owner == "A" and info.token == 1 and 25 < info.expires_in_s <= 30
    again = store.leases.acquire_lease(sid, "A", 30)  # the same owner takes it anew: a new token
    assert again is not None and again.token == 2
    with pytest.raises(SessionNotFound):
        store.leases.acquire_lease("nope", "A", 30)


def test_an_expired_lease_is_taken_over_and_its_writes_are_refused(store: Store) -> None:
    sid = store.record.create_session().session_id
    old = store.leases.acquire_lease(sid, "A", 1.0)
    assert old is not None
    zombie = store.leases.driven(old)
    u = zombie.write(AddStep(session_id=sid, step=user("go")))
    running = zombie.write(BeginStep(session_id=sid, step=tool(parent=u.step_id)))
    wait_until(lambda: not store.leases.lease_info(sid).live, "the lease never expired")
    new = store.leases.acquire_lease(sid, "B", 30)
    assert new is not None and new.token == old.token + 1
    before = store.record.steps(sid)
    # Every write of the old holder is refused, in its own transaction: nothing changes.
    for write in (
        lambda: zombie.write(BeginStep(session_id=sid, step=llm())),
        lambda: zombie.write(AddStep(session_id=sid, step=user())),
        lambda: zombie.write(finish(sid, running.seq, output_data="late")),
        lambda: zombie.write(finish(sid, running.seq, error_message="late")),
        lambda: zombie.transition(sid, Status.SUCCESS),
        lambda: zombie.mark_interrupted(sid),
        lambda: zombie.rollback(sid, 1),
        lambda: store.leases.renew_lease(old, 30),
    ):
        with pytest.raises(LeaseLost) as e:
            write()
        assert e.value.code == "lease_lost" and "B" in e.value.message
    assert (
        store.record.steps(sid) == before and store.record.get_session(sid).status is Status.RUNNING
    )
    assert store.leases.release_lease(old) is False
    # The new holder writes normally.
    driven = store.leases.driven(new)
    assert [s.seq for s in driven.mark_interrupted(sid)] == [running.seq]
    assert driven.write(AddStep(session_id=sid, step=user("again"))).seq == 3


def test_renew_extends_and_release_expires_now(store: Store) -> None:
    sid = store.record.create_session().session_id
    lease = store.leases.acquire_lease(sid, "A", 1.0)
    assert lease is not None
    renewed = store.leases.renew_lease(lease, 3.0)
    assert renewed.token == lease.token and renewed.expires_at > lease.expires_at
    # Past the first expiry by the lease clock, ~2 s before the renewed one.
    wait_until(lambda: store.leases.lease_info(sid).now > lease.expires_at, "the clock stood still")
    assert store.leases.lease_info(sid).live  # renewal kept it alive past the first expiry
    assert store.leases.release_lease(renewed) is True
    info = store.leases.lease_info(sid)
    assert not info.live and info.owner == "A"  # expired, the owner kept on record
    b = store.leases.acquire_lease(sid, "B", 30)
    assert b is not None and b.token == lease.token + 1
    assert [i.session_id for i in store.leases.leases()] == [sid]


def test_a_lease_only_fences_its_own_session(store: Store) -> None:
    one, two = store.record.create_session().session_id, store.record.create_session().session_id
    lease = store.leases.acquire_lease(one, "A", 30)
    assert lease is not None
    with pytest.raises(LeaseLost, match="cannot write session"):
        store.leases.driven(lease).write(AddStep(session_id=two, step=user()))
    assert store.record.steps(two) == []
    # Unleased writes (offline commands, tests) are not fenced.
    store.record.write(AddStep(session_id=one, step=user()))
    assert store.leases.driven(lease).write(BeginStep(session_id=one, step=approval())).seq == 2
    assert store.record.get_session(one).status is Status.PAUSED


def test_a_dead_registered_owner_loses_its_lease_at_once(store_factory) -> None:
    store = store_factory()
    other = store_factory()  # another process's view of the same database
    sid = store.record.create_session().session_id
    worker = new_worker_id()
    other.leases.register_worker(worker, {"port": 1})
    lease = other.leases.acquire_lease(sid, worker, 60)
    assert lease is not None
    assert store.leases.acquire_lease(sid, "B", 60) is None  # alive: wait for expiry
    (seen,) = [w for w in store.leases.workers() if w.worker_id == worker]
    assert seen.alive is True and seen.info == {"port": 1}
    other.close()  # the worker's process is gone: its presence lock goes with it
    # PostgreSQL drops a closed connection's advisory lock when its backend process exits, a
    # moment after the client closed; "at once" means long before the 60 s expiry.
    deadline = time.monotonic() + 10
    info = store.leases.lease_info(sid)
    while info.owner_alive is not False and time.monotonic() < deadline:
        time.sleep(0.02)
        info = store.leases.lease_info(sid)
    assert info.owner_alive is False and not info.live
    taken = store.leases.acquire_lease(sid, "B", 60)
    assert taken is not None and taken.token == lease.token + 1
    assert [w.alive for w in store.leases.workers() if w.worker_id == worker] == [False]
    assert store.leases.forget_worker(worker) is True
    assert [w for w in store.leases.workers() if w.worker_id == worker] == []


def test_an_unregistered_owner_counts_by_expiry_only(store: Store) -> None:
    sid = store.record.create_session().session_id
    assert store.leases.acquire_lease(sid, "never-registered", 60) is not None
    assert store.leases.lease_info(sid).owner_alive is None
    assert store.leases.acquire_lease(sid, "B", 60) is None


def test_unregister_removes_the_worker(store: Store) -> None:
    worker = new_worker_id()
    store.leases.register_worker(worker)
    store.leases.heartbeat(worker)
    assert [w.alive for w in store.leases.workers() if w.worker_id == worker] == [True]
    store.leases.unregister_worker(worker)
    assert [w for w in store.leases.workers() if w.worker_id == worker] == []


def test_many_contenders_one_winner(store_factory) -> None:
    """Threads of several store objects (several workers) race for one session."""
    stores = [store_factory() for _ in range(3)]
    sid = stores[0].record.create_session().session_id
    won: list[Lease] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def contend(i: int) -> None:
        start.wait(10)
        got = stores[i % 3].leases.acquire_lease(sid, f"w{i}", 30)
        if got is not None:
            with lock:
                won.append(got)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1
    assert stores[0].leases.lease_info(sid).owner == won[0].owner


def test_fenced_completion_and_takeover_never_interleave(store_factory) -> None:
    """A holder writing steps while another takes over: every step in the record was written
    under the lease that was current when it committed; nothing after the takeover is A's."""
    a_store, b_store = store_factory(), store_factory()
    sid = a_store.record.create_session().session_id
    a = a_store.leases.acquire_lease(sid, "A", 0.05)
    assert a is not None
    written: list[int] = []
    refused = threading.Event()

    def holder() -> None:
        view = a_store.leases.driven(a)
        while True:
            try:
                st = view.write(BeginStep(session_id=sid, step=tool("a")))
                written.append(st.seq)
                view.write(finish(sid, st.seq, output_data="a"))
            except LeaseLost:
                refused.set()
                return

    t = threading.Thread(target=holder)
    t.start()
    deadline = time.monotonic() + 10
    while not written:  # A writes under its lease
        assert time.monotonic() < deadline and t.is_alive(), "A never wrote"
        time.sleep(0.005)
    b = None
    while b is None:
        b = b_store.leases.acquire_lease(sid, "B", 30)
    b_view = b_store.leases.driven(b)
    b_view.mark_interrupted(sid)
    step = b_view.write(BeginStep(session_id=sid, step=tool("b")))
    assert refused.wait(10)
    t.join(10)
    steps = b_store.record.steps(sid)
    assert steps[-1].seq == step.seq and steps[-1].input_data == {"command": "b"}
    assert all(s.seq < step.seq for s in steps[:-1])
    assert {s.seq for s in steps[:-1]} == set(written)
    assert all(s.status is not StepStatus.RUNNING for s in steps[:-1])


def test_each_step_records_the_worker_that_wrote_it(store: Store, backend) -> None:
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user("unleased")))
    a = store.leases.acquire_lease(sid, "A", 30)
    assert a is not None
    store.leases.driven(a).write(AddStep(session_id=sid, step=user("by A")))
    store.leases.driven(a).write(BeginStep(session_id=sid, step=llm()))
    store.leases.release_lease(a)
    b = store.leases.acquire_lease(sid, "B", 30)
    assert b is not None
    store.leases.driven(b).write(AddStep(session_id=sid, step=user("by B")))
    rows = backend.query("SELECT seq, worker FROM traces WHERE session_id=? ORDER BY seq", (sid,))
    assert rows == [(1, None), (2, "A"), (3, "A"), (4, "B")]


def test_leases_by_status(store: Store) -> None:
    running = store.record.create_session().session_id
    store.record.write(AddStep(session_id=running, step=user()))
    done = store.record.create_session().session_id
    store.record.transition(done, Status.RUNNING)
    store.record.transition(done, Status.SUCCESS)
    never = store.record.create_session().session_id
    store.record.write(AddStep(session_id=never, step=user()))
    for sid in (running, done):
        lease = store.leases.acquire_lease(sid, "A", 30)
        assert lease is not None
    assert {i.session_id for i in store.leases.leases()} == {running, done}
    unfinished = store.leases.leases(statuses=[Status.RUNNING, Status.PAUSED])
    assert [(i.session_id, i.status, i.live) for i in unfinished] == [
        (running, Status.RUNNING, True)
    ]
    assert store.leases.leases(statuses=[]) == []


def _old_sweep_rule(store: Store, grace_ms: int) -> tuple[list[str], set[str]]:
    """What the sweep computed before sweep_targets, from every unfinished session's lease."""
    due, dead, holding = [], set(), set()
    for info in store.leases.leases(statuses=[Status.RUNNING, Status.PAUSED]):
        if info.owner_alive is False:
            dead.add(str(info.owner))
        if info.expires_at is not None and info.expires_at > info.now:
            holding.add(str(info.owner))
        if (
            not info.live
            and info.status is Status.RUNNING
            and not info.awaiting_input
            and info.now - (info.expires_at or 0) >= grace_ms
        ):
            due.append(info.session_id)
    return due, dead - holding


def test_sweep_targets_are_what_the_sweep_acts_on(store_factory) -> None:
    """The sweep's question asked in SQL (a server keeps thousands of sessions waiting for
    their next instruction; loading each one's lease every sweep stalled the event loop):
    same answer as the rule over every lease, for every kind of session and owner."""
    store = store_factory()
    me = new_worker_id()
    store.leases.register_worker(me)

    def session(status: Status, owner: str | None, ttl_s: float, *, waiting: bool = False) -> str:
        sid = store.record.create_session().session_id
        if status is not Status.INIT:
            store.record.transition(sid, Status.RUNNING, awaiting_input=waiting)
        if status in (Status.PAUSED, Status.SUCCESS):
            store.record.transition(sid, status)
        if owner is not None:
            assert store.leases.acquire_lease(sid, owner, ttl_s) is not None
        return sid

    expired = session(Status.RUNNING, me, 0.001)
    waiting = session(Status.RUNNING, me, 0.001, waiting=True)
    live = session(Status.RUNNING, me, 60)
    paused = session(Status.PAUSED, me, 0.001)
    session(Status.SUCCESS, me, 0.001)
    session(Status.RUNNING, None, 0)
    unregistered = session(Status.RUNNING, "never-registered", 0.001)
    # Dead registered owners: one whose leases have all expired (it may go), one still holding
    # an unexpired lease (kept: taken early by its death only), one with finished sessions only.
    gone, holding, finished = (store_factory() for _ in range(3))
    ids = {}
    for name, other in (("gone", gone), ("holding", holding), ("finished", finished)):
        ids[name] = new_worker_id()
        other.leases.register_worker(ids[name])
    gone_sid = session(Status.RUNNING, ids["gone"], 0.001)
    session(Status.PAUSED, ids["holding"], 60)
    session(Status.SUCCESS, ids["finished"], 0.001)
    for other in (gone, holding, finished):
        other.close()
    wait_until(
        lambda: all(w.alive is False for w in store.leases.workers() if w.worker_id != me),
        "the closed stores' workers are dead",
    )
    wait_until(
        lambda: (
            not any(store.leases.lease_info(s).live for s in (expired, waiting, paused, gone_sid))
        ),
        "the 1 ms leases expired",
    )

    now = store.leases.sweep_targets(0)
    assert sorted(i.session_id for i in now.sessions) == sorted([expired, unregistered, gone_sid])
    assert all(i.status is Status.RUNNING and not i.live for i in now.sessions)
    assert now.dead_workers == [ids["gone"]]
    old_due, old_dead = _old_sweep_rule(store, 0)
    assert sorted(old_due) == sorted(i.session_id for i in now.sessions)
    assert old_dead == set(now.dead_workers)
    # Within the grace period nothing is due; the dead worker may go all the same.
    later = store.leases.sweep_targets(3_600_000)
    assert later.sessions == [] and later.dead_workers == [ids["gone"]]
    assert _old_sweep_rule(store, 3_600_000) == ([], {ids["gone"]})
    assert live not in {i.session_id for i in now.sessions}
