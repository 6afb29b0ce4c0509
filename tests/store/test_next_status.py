"""The session status rule as a pure function (checked transitions): `next_status(current,
event)` against a table written out here, every pair, and against the old direct moves
(`check_transition`), so an illegal pair raises exactly what a direct move raised."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xclaw.errors import IllegalTransition
from xclaw.store.steps.model import (
    TRANSITIONS,
    SessionEvent,
    Status,
    check_transition,
    event_for_target,
    next_status,
    waiting_after,
)

# The table below reads as the states' initials (I is Init, never a loop index).
I, R, P, S, F = Status.INIT, Status.RUNNING, Status.PAUSED, Status.SUCCESS, Status.FAILED  # noqa: E741
E = SessionEvent
EVERY = {s: R for s in Status}

# The specification, one row per event: current -> next. A missing current is illegal.
EXPECTED: dict[SessionEvent, dict[Status, Status]] = {
    E.RUN_STARTED: EVERY,
    E.STEP_BESIDE_APPROVAL: {I: R, R: R, P: P, S: R, F: R},
    E.APPROVAL_ASKED: {R: P, P: P},
    E.APPROVAL_ANSWERED: {I: I, R: R, P: R, S: S, F: F},
    E.RUN_SUCCEEDED: {R: S},
    E.RUN_FAILED: {I: F, R: F, P: F},
    E.RUN_CANCELLED: EVERY,
    E.ROLLED_BACK: EVERY,
}
# The status an illegal pair names in its error, as a direct move there would.
AIM = {E.APPROVAL_ASKED: P, E.RUN_SUCCEEDED: S, E.RUN_FAILED: F}


def test_every_event_is_specified() -> None:
    assert set(EXPECTED) == set(SessionEvent)


@pytest.mark.parametrize("current,event", list(itertools.product(Status, SessionEvent)))
def test_table(current: Status, event: SessionEvent) -> None:
    if current in EXPECTED[event]:
        assert next_status(current, event) is EXPECTED[event][current]
    else:
        with pytest.raises(IllegalTransition) as e:
            next_status(current, event)
        assert e.value.code == "illegal_transition"
        assert f"{current.value} -> {AIM[event].value}" in e.value.message


@given(st.sampled_from(Status), st.sampled_from(SessionEvent))
def test_an_illegal_pair_raises_what_check_transition_raises(
    current: Status, event: SessionEvent
) -> None:
    try:
        target = next_status(current, event)
    except IllegalTransition as e:
        with pytest.raises(IllegalTransition) as old:
            check_transition(current, AIM[event])
        assert (e.current, e.target, e.message) == (
            old.value.current,
            old.value.target,
            old.value.message,
        )
    else:
        # Either a move the state machine allows, or the status kept (no move at all).
        assert target is current or target in TRANSITIONS[current]


@given(st.sampled_from(Status), st.sampled_from(Status))
def test_a_direct_move_is_the_old_checked_transition(current: Status, target: Status) -> None:
    """Store.transition(session, target) names an event; the outcome is the old table's."""
    if target in TRANSITIONS[current]:
        assert next_status(current, event_for_target(current, target)) is target
    else:
        with pytest.raises(IllegalTransition) as old:
            check_transition(current, target)
        with pytest.raises(IllegalTransition) as new:
            next_status(current, event_for_target(current, target))
        assert new.value.message == old.value.message


@given(st.lists(st.sampled_from(SessionEvent), max_size=30))
def test_any_run_of_events_stays_on_the_state_machine(events: list[SessionEvent]) -> None:
    status = Status.INIT
    for event in events:
        try:
            after = next_status(status, event)
        except IllegalTransition:
            continue  # refused: the store writes nothing, the status stays
        assert after is status or after in TRANSITIONS[status]
        status = after
    assert status is not Status.INIT or all(
        e in (E.APPROVAL_ANSWERED, E.APPROVAL_ASKED, E.RUN_SUCCEEDED) for e in events
    )


def test_waiting_for_the_next_instruction() -> None:
    assert waiting_after(E.RUN_CANCELLED, instruction=False) is True
    assert waiting_after(E.ROLLED_BACK, instruction=False) is True
    assert waiting_after(E.RUN_STARTED, instruction=True) is False  # the instruction came
    assert waiting_after(E.RUN_STARTED, instruction=False) is None  # unchanged
    assert waiting_after(None, instruction=False) is None
