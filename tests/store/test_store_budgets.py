"""Budgets in the record (migration `budgets`), on both backends: a hold written with its
LLM call's `running` step in one transaction and settled with its finish, counted once; the
caps and grants an admin sets; a session stopped for a budget and let go on."""

from __future__ import annotations

import pytest

from tests.store.conftest import Backend
from xclaw.errors import LeaseLost
from xclaw.store.base import Store
from xclaw.store.steps.model import BUDGET_KEY, Completion, NewStep, Status, StepStatus, StepType
from xclaw.store.steps.writes import (
    BeginStep,
    BudgetStop,
    FinishStep,
    Hold,
    Refused,
    SetBudget,
    Shared,
    Spent,
)


def _hold(tokens: int, owner: str | None = "alice") -> Hold:
    return Hold(tokens=tokens, usd=tokens / 1e6, owner=owner, day="2026-12-06", month="2026-12")


def _call(store: Store, sid: str, tokens: int) -> BeginStep:
    begin = BeginStep(
        session_id=sid,
        step=NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={}),
        hold=_hold(tokens),
    )
    store.record.write(begin)
    return begin


def test_a_hold_is_written_with_its_step_and_settled_with_its_finish_once(store: Store) -> None:
    sid = store.record.create_session(title="t").session_id
    b = store.budgets
    first = _call(store, sid, 500)
    _call(store, sid, 300)
    step = first.slot.resolved()
    assert step.status is StepStatus.RUNNING
    assert b.budget_holds(sid) == [(step.seq, 500, 0, False), (step.seq + 1, 300, 0, False)]
    # Until settled, a hold counts its reservation.
    assert b.budget_totals(
        [f"s:{sid}", "ud:alice:2026-12-06", "um:alice:2026-12", "tm:2026-12", "td:2026-12-07"]
    ) == {
        f"s:{sid}": (800, pytest.approx(0.0008)),
        "ud:alice:2026-12-06": (800, pytest.approx(0.0008)),
        "um:alice:2026-12": (800, pytest.approx(0.0008)),
        "tm:2026-12": (800, pytest.approx(0.0008)),
        "td:2026-12-07": (0, 0.0),
    }
    assert b.budget_totals(["um:bob:2026-12", "tm:2026-11"]) == {
        "um:bob:2026-12": (0, 0.0),
        "tm:2026-11": (0, 0.0),
    }
    done = Completion(status=StepStatus.COMPLETED, output_data={"text": "ok"})
    store.record.write(
        FinishStep(session_id=sid, step=first, done=done, spent=Spent(tokens=120, usd=0.5))
    )
    assert b.budget_holds(sid)[0] == (step.seq, 500, 120, True)
    assert b.budget_totals([f"s:{sid}"]) == {f"s:{sid}": (420, pytest.approx(0.5003))}
    # A settlement applied twice counts once: the step is finished already (refused, the
    # whole write rolled back) and a hold settles only while unsettled.
    with pytest.raises(Exception, match=r"running"):
        store.record.write(
            FinishStep(session_id=sid, step=first, done=done, spent=Spent(tokens=1, usd=0))
        )
    assert b.budget_holds(sid)[0] == (step.seq, 500, 120, True)
    # A call interrupted (its process killed) keeps its reservation counted.
    store.record.mark_interrupted(sid)
    assert b.budget_holds(sid)[1] == (step.seq + 1, 300, 0, False)
    assert b.budget_totals([f"s:{sid}"])[f"s:{sid}"][0] == 420
    # Spend outlives a rollback of the steps that made it.
    store.record.rollback(sid, step.seq)
    assert b.budget_totals([f"s:{sid}"])[f"s:{sid}"][0] == 420


def test_a_hold_whose_step_is_refused_is_not_written(store: Store) -> None:
    """Fenced out (another worker drives the session): neither the step nor its hold."""
    sid = store.record.create_session(title="t").session_id
    lease = store.leases.acquire_lease(sid, "w1", 30)
    assert lease is not None
    store.leases.release_lease(lease)
    assert store.leases.acquire_lease(sid, "w2", 30) is not None
    begin = BeginStep(
        session_id=sid,
        step=NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={}),
        hold=_hold(100),
    )
    with pytest.raises(LeaseLost):
        store.record.write(begin, lease=lease)
    assert store.budgets.budget_holds(sid) == []
    assert store.record.steps(sid) == []


def test_caps_and_grants_are_set_per_target(store: Store) -> None:
    b = store.budgets
    assert b.budget_rows() == {}
    row = store.record.write(SetBudget(target="session:abc", caps={"session_tokens": 1000}))
    assert row.caps == {"session_tokens": 1000} and row.granted_tokens == 0
    store.record.write(SetBudget(target="session:abc", grant_tokens=500, grant_usd=0.25))
    store.record.write(SetBudget(target="session:abc", grant_tokens=100))
    store.record.write(SetBudget(target="total", caps={"total_daily_usd": 20.0}))
    store.record.write(SetBudget(target="total", caps={"total_daily_usd": None}))  # no cap
    rows = b.budget_rows()
    assert rows["session:abc"].caps == {"session_tokens": 1000}
    assert (rows["session:abc"].granted_tokens, rows["session:abc"].granted_usd) == (600, 0.25)
    assert rows["total"].caps == {"total_daily_usd": None}
    assert set(b.budget_rows(["total", "user:x"])) == {"total"}


def test_a_session_stops_for_a_budget_and_goes_on(store: Store) -> None:
    sid = store.record.create_session(title="t").session_id
    store.record.transition(sid, Status.RUNNING)
    detail = {"cap": "session_tokens", "unit": "tokens", "limit": 10, "spent": 8, "left": 2}
    assert store.record.write(BudgetStop(session_id=sid, detail=detail)) is True
    s = store.record.get_session(sid)
    assert s.awaiting_input and s.metadata[BUDGET_KEY] == detail
    assert s.state_key == "budget" and "spent 8 tokens of 10 tokens" in s.state_text
    assert store.record.write(BudgetStop(session_id=sid, detail=None)) is True
    s = store.record.get_session(sid)
    assert not s.awaiting_input and BUDGET_KEY not in s.metadata
    assert s.state_key == "interrupted"  # resumable: the next reconnect or sweep goes on
    assert store.record.write(BudgetStop(session_id=sid, detail=None)) is False  # nothing waited


def test_a_shared_cap_is_checked_on_its_counter_in_the_holds_transaction(store: Store) -> None:
    """A person's cap: the hold counted on the scope's counter (rebuilt from the holds when
    missing) and checked there, in the transaction that writes it; one with no room is
    refused whole — no step, no hold, the counter as it was."""
    sid = store.record.create_session(title="t").session_id
    b = store.budgets
    day = "ud:alice:2026-12-06"
    cap = Shared("user_daily_tokens", day, "tokens", 1000)

    def counted() -> int | None:
        got = b.budget_counters([day])
        return got[day][0] if got else None

    def call(tokens: int) -> tuple[BeginStep, object]:
        begin = BeginStep(
            session_id=sid,
            step=NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={}),
            hold=Hold(
                tokens=tokens,
                usd=0.0,
                owner="alice",
                day="2026-12-06",
                month="2026-12",
                shared=(cap,),
            ),
        )
        return begin, store.record.write(begin)

    _call(store, sid, 300)  # before the cap was set: no counter moved
    assert counted() is None
    first, got = call(400)
    assert not isinstance(got, Refused)
    assert counted() == 700  # rebuilt (300), then this one
    _, refused = call(400)
    assert refused == Refused("user_daily_tokens", "tokens", 1000, 700, 400)
    assert [h[1] for h in b.budget_holds(sid)] == [300, 400]  # nothing of it written
    assert len(store.record.steps(sid)) == 2
    assert counted() == 700
    done = Completion(status=StepStatus.COMPLETED, output_data={"text": "ok"})
    spent = Spent(tokens=100, usd=0.0, held_tokens=400, shared=(day,))
    store.record.write(FinishStep(session_id=sid, step=first, done=done, spent=spent))
    assert counted() == 400  # from its reservation to its cost
    _, third = call(600)
    assert not isinstance(third, Refused)
    assert counted() == 1000 == b.budget_totals([day])[day][0]
    # The person's caps change: the counters are rebuilt from the holds when next needed.
    store.record.write(SetBudget(target="user:alice", caps={"user_daily_tokens": 5000}))
    assert counted() is None
    cap = Shared("user_daily_tokens", day, "tokens", 5000)
    _, fourth = call(50)
    assert not isinstance(fourth, Refused)
    assert counted() == 1050 == b.budget_totals([day])[day][0]


def test_holds_ride_in_their_steps_rows_and_outlive_them(store: Store) -> None:
    """A hold is its step's row (no row of its own); a rollback or a deletion keeps it
    counted as it stood (the trigger keeps it), and a fork copies the steps, never their
    holds: spend counted once."""
    sid = store.record.create_session(title="t").session_id
    b = store.budgets
    settled, in_flight = _call(store, sid, 500), _call(store, sid, 300)
    done = Completion(status=StepStatus.COMPLETED, output_data={"text": "ok"})
    store.record.write(
        FinishStep(session_id=sid, step=settled, done=done, spent=Spent(tokens=120, usd=0.5))
    )
    first, second = settled.slot.resolved().seq, in_flight.slot.resolved().seq
    fork = store.record.fork(sid, second).session_id
    assert b.budget_holds(fork) == []
    assert b.budget_totals([f"s:{fork}"])[f"s:{fork}"] == (0, 0.0)
    store.record.mark_interrupted(sid)
    store.record.rollback(sid, first)
    assert store.record.steps(sid) == []
    assert b.budget_holds(sid) == [(first, 500, 120, True), (second, 300, 0, False)]
    day = "ud:alice:2026-12-06"
    counted = {f"s:{sid}": (420, pytest.approx(0.5003)), day: (420, pytest.approx(0.5003))}
    assert b.budget_totals([f"s:{sid}", day]) == counted
    # A session deleted (its steps with it, by the cascade): its spend stays counted.
    third = _call(store, sid, 200)
    store.record.delete_session(sid)
    assert b.budget_holds(sid) == [
        (first, 500, 120, True),
        (second, 300, 0, False),
        (third.slot.resolved().seq, 200, 0, False),
    ]
    assert b.budget_totals([f"s:{sid}", day])[day][0] == 620


def test_the_counters_of_ended_periods_go_when_a_new_periods_counter_is_made(
    store: Store, backend: Backend
) -> None:
    """The first hold of a new day (its counters made) deletes the counters of the days and
    months that ended, a person's and the deployment's; the current ones stay, and a
    person's name holding ':' is read by its period. A counter deleted that a hold still
    wants (a worker whose clock is behind) is rebuilt from the holds, exactly."""
    sid = store.record.create_session(title="t").session_id
    b = store.budgets

    def call(day: str, *shared: Shared) -> object:
        begin = BeginStep(
            session_id=sid,
            step=NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={}),
            hold=Hold(tokens=10, usd=0.0, owner="a:b", day=day, month=day[:7], shared=shared),
        )
        return store.record.write(begin)

    def caps(day: str) -> tuple[Shared, ...]:
        return (
            Shared("user_daily_tokens", f"ud:a:b:{day}", "tokens", 10**6),
            Shared("user_monthly_tokens", f"um:a:b:{day[:7]}", "tokens", 10**6),
            Shared("total_daily_tokens", f"td:{day}", "tokens", 10**6),
            Shared("total_monthly_tokens", f"tm:{day[:7]}", "tokens", 10**6),
        )

    for day in ("2026-11-29", "2026-11-30", "2026-12-01"):
        call(day, *caps(day))
        call(day, *caps(day))  # the same period again: its counters were there
    kept = sorted(r[0] for r in backend.query("SELECT scope FROM budget_counters"))
    assert kept == [
        "td:2026-12-01",
        "tm:2026-12",
        "ud:a:b:2026-12-01",
        "um:a:b:2026-12",
    ]
    # A worker still in yesterday: its counter is made again from the holds (20 so far).
    call("2026-11-30", *caps("2026-11-30")[:1])
    assert b.budget_counters(["ud:a:b:2026-11-30"]) == {"ud:a:b:2026-11-30": (30, 0.0)}
    assert b.budget_totals(["td:2026-12-01", "tm:2026-11"]) == {
        "td:2026-12-01": (20, 0.0),
        "tm:2026-11": (50, 0.0),  # the holds are all kept: what `budget show` sums
    }
