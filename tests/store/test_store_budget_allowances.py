"""A run's allowance on the shared caps (docs/budgets.md, "Allowances"), on both backends,
through the real gate (xclaw/budgets/ledger.py) and store: a run claims a slice of a shared
scope's room in its first hold's transaction and draws its later holds on it with no
counter statement; what it did not use is given back at its end from the rows — also what
a killed run left, by the session's next run — and a counter rebuilt meanwhile counts it.
Near a cap a run claims only what it lacks and gives refunds back at once, so what the
holds count never passes the cap, whichever runs share it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.store.conftest import Backend
from xclaw.budgets.ledger import Gate, Ledger, Limit, Reached
from xclaw.errors import LeaseLost
from xclaw.store.base import Store
from xclaw.store.budgets.sql import FAR, SLICE
from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
from xclaw.store.steps.writes import (
    BeginStep,
    FinishStep,
    Hold,
    Refused,
    ReturnAllowance,
    SetBudget,
)

DAY, MONTH = "2026-12-07", "2026-12"
TD, UD = f"td:{DAY}", f"ud:alice:{DAY}"


class Run:
    """One run of a session as the recorder makes it: each call reserved by the gate, its
    hold written with its step (the claim answered there), settled with its finish."""

    def __init__(self, store: Store, sid: str, limits: tuple[Limit, ...]) -> None:
        self.store, self.sid = store, sid
        self.gate = Gate(Ledger(), limits, owner="alice", day=DAY, month=MONTH)
        self.open: list[tuple[BeginStep, Hold]] = []

    def begin(self, tokens: int) -> Hold | Reached:
        got = self.gate.reserve(tokens, 0.0)
        if isinstance(got, Reached):
            return got
        step = NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={})
        begin = BeginStep(session_id=self.sid, step=step, hold=got)
        written = self.store.record.write(begin)
        if isinstance(written, Refused):
            return self.gate.refused(got, written)
        self.gate.written(got)
        self.open.append((begin, got))
        return got

    def finish(self, cost: int) -> None:
        begin, hold = self.open.pop(0)
        done = Completion(status=StepStatus.COMPLETED, output_data={"text": "ok"})
        spent = self.gate.settle(hold, cost, 0.0)
        self.store.record.write(FinishStep(session_id=self.sid, step=begin, done=done, spent=spent))

    def call(self, tokens: int, cost: int) -> Hold | Reached:
        got = self.begin(tokens)
        if isinstance(got, Hold):
            self.finish(cost)
        return got

    def end(self) -> Any:
        self.gate.returned()
        return self.store.record.write(ReturnAllowance(session_id=self.sid))


def _counter(store: Store, scope: str) -> int | None:
    got = store.budgets.budget_counters([scope])
    return got[scope][0] if got else None


def _held(store: Store, scope: str) -> int:
    return store.budgets.budget_totals([scope])[scope][0]


def _allowances(backend: Backend) -> list[str]:
    rows = backend.query("SELECT scope FROM budget_counters WHERE substr(scope, 1, 2) = 'a:'")
    return sorted(str(r[0]) for r in rows)


def _limits(sid: str, cap: float) -> tuple[Limit, ...]:
    return (Limit("session_tokens", f"s:{sid}", 10**9), Limit("total_daily_tokens", TD, cap))


def test_a_run_claims_a_slice_draws_on_it_and_gives_back_what_it_did_not_use(
    store: Store, backend: Backend
) -> None:
    sid = store.record.create_session(title="t").session_id
    run = Run(store, sid, _limits(sid, 10**9))
    first = run.call(1000, 100)
    assert isinstance(first, Hold) and first.claim is not None
    assert first.claim.granted == (1000 * SLICE, 0.0)
    assert _counter(store, TD) == 1000 * SLICE  # the slice, not the reservation
    assert _allowances(backend) == [f"a:{sid}:0:{TD}"]
    # The next calls draw on the room (the first's refund included): no counter moves.
    for _ in range(6):
        got = run.call(1000, 100)
        assert isinstance(got, Hold) and got.drawn and not got.shared
    assert _counter(store, TD) == 1000 * SLICE
    assert _held(store, TD) == 700
    assert run.end() == 1
    assert _counter(store, TD) == 700 == _held(store, TD)
    assert _allowances(backend) == []
    # A new run claims again.
    again = Run(store, sid, _limits(sid, 10**9))
    assert isinstance(again.call(500, 50), Hold)
    assert _counter(store, TD) == 700 + 500 * SLICE
    again.end()
    assert _counter(store, TD) == 750 == _held(store, TD)


def test_a_killed_runs_allowance_is_counted_until_the_sessions_next_run_gives_it_back(
    store: Store, backend: Backend
) -> None:
    """A kill mid-slice: the run's room stays counted (never less than its holds), a counter
    rebuilt meanwhile counts it, and the session's next run gives it back from the rows —
    its own last call, killed in flight, at its reservation."""
    sid = store.record.create_session(title="t").session_id
    killed = Run(store, sid, _limits(sid, 10**9))
    killed.call(1000, 100)
    killed.call(1000, 300)
    killed.begin(1000)  # in flight when the worker died: never settled, never given back
    assert _held(store, TD) == 1400
    assert _counter(store, TD) == 1000 * SLICE
    # A worker starts (every counter dropped) or an admin changes the caps: the counter is
    # rebuilt from the holds plus the room the killed run did not use.
    store.budgets.drop_budget_counters()
    assert _allowances(backend) == [f"a:{sid}:0:{TD}"]
    other = store.record.create_session(title="o").session_id
    Run(store, other, _limits(other, 10**9)).begin(10)  # its claim makes the counter again
    assert _counter(store, TD) == 1000 * SLICE + 10 * SLICE
    # The session goes on after the kill: its next run claims, draws, gives everything back.
    store.record.mark_interrupted(sid)
    resumed = Run(store, sid, _limits(sid, 10**9))
    resumed.call(1000, 200)
    assert resumed.end() == 2  # its own claim's row and the killed run's
    assert _allowances(backend) == [f"a:{other}:0:{TD}"]
    # The killed call stays at its reservation: 100 + 300 + 1000 + 200, and the other's.
    assert _counter(store, TD) == 1600 + 10 * SLICE
    assert _held(store, TD) == 1610


def test_near_a_cap_runs_claim_what_they_lack_and_never_pass_it_together(
    store_factory: Any, backend: Backend
) -> None:
    """Two sessions (two stores: two workers on one database) share the deployment's daily
    cap; far from it they take slices, near it only what each call lacks, refunds given
    back at once: what the holds count never passes the cap, the counter never counts
    less than the holds, and once both runs gave back, it counts them exactly."""
    cap = 1000 * SLICE * (FAR + 4)  # slices for the first fifth of it
    stores = [store_factory(), store_factory()]
    runs = []
    for s in stores:
        sid = s.record.create_session(title="t").session_id
        runs.append(Run(s, sid, _limits(sid, cap)))
    stopped: dict[int, Reached] = {}
    kinds = set()
    for _ in range(200):
        for i, run in enumerate(runs):
            if i in stopped:
                continue
            got = run.call(1000, 600)
            held, counted = _held(stores[0], TD), _counter(stores[0], TD)
            assert counted is not None and held <= counted <= cap
            if isinstance(got, Reached):
                assert got.cap == "total_daily_tokens" and got.needed == 1000
                assert got.spent + got.needed > got.limit
                stopped[i] = got
            elif got.claim is not None:
                kinds.add("slice" if got.claim.granted == got.claim.slice else "short")
        if len(stopped) == 2:
            break
    assert len(stopped) == 2 and kinds == {"slice", "short"}
    # What the runs claimed and did not use is at most a slice each: the rest was spent.
    assert _held(stores[0], TD) > cap - 2 * 1000 * SLICE - 1000
    for run in runs:
        run.end()
    assert _counter(stores[0], TD) == _held(stores[0], TD)
    assert _allowances(backend) == []


def test_a_cost_past_the_room_is_claimed_and_counted(store: Store) -> None:
    """A call that cost more than its reservation (the prompt estimate is an estimate): the
    room covers it where it can, else the rest is claimed with its settlement — counted
    at once, never left out until the run's end."""
    sid = store.record.create_session(title="t").session_id
    run = Run(store, sid, _limits(sid, 10**9))
    run.call(1000, 1000 * SLICE + 700)  # past the whole slice
    assert _counter(store, TD) == 1000 * SLICE + 700 == _held(store, TD)
    run.end()
    assert _counter(store, TD) == 1000 * SLICE + 700 == _held(store, TD)


def test_a_return_by_a_worker_that_lost_the_session_gives_back_nothing(
    store: Store, backend: Backend
) -> None:
    """Fenced by the run's lease: a worker whose lease was taken cannot give back the room
    the session's new run draws on."""
    sid = store.record.create_session(title="t").session_id
    run = Run(store, sid, _limits(sid, 10**9))
    run.call(1000, 100)
    old = store.leases.acquire_lease(sid, "w1", 30)
    assert old is not None
    store.leases.release_lease(old)  # (as if it had lapsed) another worker takes it
    new = store.leases.acquire_lease(sid, "w2", 30)
    assert new is not None
    with pytest.raises(LeaseLost):
        store.record.write(ReturnAllowance(session_id=sid), lease=old)
    assert _allowances(backend) == [f"a:{sid}:0:{TD}"]
    assert store.record.write(ReturnAllowance(session_id=sid), lease=new) == 1
    assert _counter(store, TD) == 100


def test_an_admins_cap_change_keeps_the_runs_allowances_counted(
    store: Store, backend: Backend
) -> None:
    """A person's caps changed drop their counters; a run's room on them is counted again
    when the counter is rebuilt, not forgotten (else the run would draw on room nobody
    counts)."""
    sid = store.record.create_session(title="t").session_id
    limits = (Limit("user_daily_tokens", UD, 10**9),)
    run = Run(store, sid, limits)
    run.call(1000, 100)
    assert _counter(store, UD) == 1000 * SLICE
    store.record.write(SetBudget(target="user:alice", caps={"user_daily_tokens": 10**9}))
    assert _counter(store, UD) is None
    other = store.record.create_session(title="o").session_id
    Run(store, other, limits).begin(10)
    assert _counter(store, UD) == 1000 * SLICE + 10 * SLICE
    run.end()
    assert _counter(store, UD) == 100 + 10 * SLICE
