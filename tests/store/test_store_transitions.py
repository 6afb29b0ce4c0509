"""The state machine (checked transitions): every allowed move works, every other one raises and
writes nothing; steps move the session as documented."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from tests.store.builders import approval, llm, tool, user
from tests.writes import finish
from xclaw.errors import IllegalTransition
from xclaw.store.base import Store
from xclaw.store.steps.model import (
    TRANSITIONS,
    NewStep,
    SessionEvent,
    Status,
    StepStatus,
    next_status,
)
from xclaw.store.steps.writes import AddStep, BeginStep

# A legal path from Init to each state.
PATHS = {
    Status.INIT: [],
    Status.RUNNING: [Status.RUNNING],
    Status.PAUSED: [Status.RUNNING, Status.PAUSED],
    Status.SUCCESS: [Status.RUNNING, Status.SUCCESS],
    Status.FAILED: [Status.RUNNING, Status.FAILED],
}


def session_in(store: Store, status: Status) -> str:
    sid = store.record.create_session().session_id
    for step in PATHS[status]:
        store.record.transition(sid, step)
    assert store.record.get_session(sid).status is status
    return sid


@pytest.mark.parametrize("current,target", list(itertools.product(Status, Status)))
def test_transition_table(store: Store, current: Status, target: Status) -> None:
    sid = session_in(store, current)
    before = store.record.get_session(sid)
    if target in TRANSITIONS[current]:
        after = store.record.transition(sid, target)
        assert after.status is target
        assert store.record.get_session(sid).status is target
    else:
        with pytest.raises(IllegalTransition) as e:
            store.record.transition(sid, target)
        assert e.value.code == "illegal_transition"
        assert f"{current.value} -> {target.value}" in e.value.message
        assert store.record.get_session(sid) == before  # nothing written


@pytest.mark.parametrize("start", list(Status))
@pytest.mark.parametrize("make", [llm, tool], ids=["llm_call", "tool_call"])
def test_a_running_step_moves_the_session_as_next_status_says(
    store: Store, start: Status, make: Callable[[], NewStep]
) -> None:
    # SQLite takes a Running session's next number in one statement and every other case
    # the general way: from every status, the outcome is the state machine's.
    sid = session_in(store, start)
    first = store.record.write(BeginStep(session_id=sid, step=make()))
    expected = next_status(start, SessionEvent.RUN_STARTED)
    assert store.record.get_session(sid).status is expected
    second = store.record.write(BeginStep(session_id=sid, step=make()))
    assert (first.seq, second.seq) == (1, 2)
    assert store.record.get_session(sid).status is next_status(expected, SessionEvent.RUN_STARTED)
    assert [s.seq for s in store.record.steps(sid)] == [1, 2]


def test_begin_step_runs_the_session(store: Store) -> None:
    sid = store.record.create_session().session_id
    st = store.record.write(BeginStep(session_id=sid, step=llm()))
    assert st.status is StepStatus.RUNNING
    assert store.record.get_session(sid).status is Status.RUNNING


@pytest.mark.parametrize("start", [Status.SUCCESS, Status.FAILED])
def test_new_user_input_reopens_finished_sessions(store: Store, start: Status) -> None:
    sid = session_in(store, start)
    store.record.write(AddStep(session_id=sid, step=user("again")))
    assert store.record.get_session(sid).status is Status.RUNNING


def test_user_input_runs_an_init_session(store: Store) -> None:
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user()))
    assert store.record.get_session(sid).status is Status.RUNNING


def test_other_finished_steps_do_not_move_the_session(store: Store) -> None:
    sid = session_in(store, Status.SUCCESS)
    store.record.write(
        AddStep(session_id=sid, step=tool(), status=StepStatus.FAILED, error_message="denied")
    )
    assert store.record.get_session(sid).status is Status.SUCCESS


def test_approval_pauses_and_its_answer_resumes(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    ask = store.record.write(BeginStep(session_id=sid, step=approval()))
    assert store.record.get_session(sid).status is Status.PAUSED
    store.record.write(finish(sid, ask.seq, output_data={"approved": True}))
    assert store.record.get_session(sid).status is Status.RUNNING


def test_denied_approval_also_resumes(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    ask = store.record.write(BeginStep(session_id=sid, step=approval()))
    store.record.write(finish(sid, ask.seq, error_message="denied by the user"))
    assert store.record.get_session(sid).status is Status.RUNNING


def test_two_pending_approvals_keep_the_session_paused(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    a = store.record.write(BeginStep(session_id=sid, step=approval()))
    b = store.record.write(BeginStep(session_id=sid, step=approval()))
    # a sub-agent's step while an approval is pending does not unpause the session
    store.record.write(BeginStep(session_id=sid, step=llm(agent="s0002")))
    assert store.record.get_session(sid).status is Status.PAUSED
    store.record.write(finish(sid, a.seq, output_data={"approved": True}))
    assert store.record.get_session(sid).status is Status.PAUSED
    store.record.write(finish(sid, b.seq, output_data={"approved": False}))
    assert store.record.get_session(sid).status is Status.RUNNING


@pytest.mark.parametrize("start", [Status.INIT, Status.SUCCESS, Status.FAILED])
def test_approval_from_a_non_running_state_is_illegal_and_writes_nothing(
    store: Store, start: Status
) -> None:
    sid = session_in(store, start)
    before = store.record.get_session(sid)
    with pytest.raises(IllegalTransition):
        store.record.write(BeginStep(session_id=sid, step=approval()))
    assert store.record.steps(sid) == []
    assert store.record.get_session(sid) == before
    # the step counter did not move either: the next step is s0001
    assert store.record.write(BeginStep(session_id=sid, step=llm())).display_id == "s0001"


def test_complete_with_session_status_moves_both_in_one_transaction(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    st = store.record.write(BeginStep(session_id=sid, step=llm()))
    done = store.record.write(
        finish(sid, st.seq, output_data={"text": "answer"}, session_status=Status.SUCCESS)
    )
    assert done.status is StepStatus.COMPLETED
    assert store.record.get_session(sid).status is Status.SUCCESS


def test_fail_with_session_status(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    st = store.record.write(BeginStep(session_id=sid, step=llm()))
    store.record.write(
        finish(sid, st.seq, error_message="max iterations", session_status=Status.FAILED)
    )
    assert store.record.get_session(sid).status is Status.FAILED
    assert store.record.get_step(sid, st.seq).error_message == "max iterations"


def test_illegal_session_status_on_completion_rolls_back_the_step_too(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    ask = store.record.write(BeginStep(session_id=sid, step=approval()))
    other = store.record.write(
        BeginStep(session_id=sid, step=llm())
    )  # stays Paused: an approval is pending
    with pytest.raises(IllegalTransition):  # Paused -> Success is never allowed
        store.record.write(finish(sid, other.seq, output_data={}, session_status=Status.SUCCESS))
    assert store.record.get_step(sid, other.seq).status is StepStatus.RUNNING
    assert store.record.get_session(sid).status is Status.PAUSED
    assert store.record.get_step(sid, ask.seq).status is StepStatus.RUNNING


def test_user_input_clears_awaiting_input_after_rollback(store: Store) -> None:
    sid = session_in(store, Status.RUNNING)
    store.record.write(AddStep(session_id=sid, step=user("one")))
    store.record.write(AddStep(session_id=sid, step=user("two")))
    assert store.record.rollback(sid, "s0002").session.awaiting_input
    assert store.record.get_session(sid).awaiting_input
    store.record.write(BeginStep(session_id=sid, step=llm()))  # not an instruction: still waiting
    assert store.record.get_session(sid).awaiting_input
    store.record.write(AddStep(session_id=sid, step=user("three")))
    assert not store.record.get_session(sid).awaiting_input


@pytest.mark.parametrize("start", [Status.RUNNING, Status.PAUSED])
def test_a_cancelled_run_leaves_the_session_waiting_for_input(store: Store, start: Status) -> None:
    # Cancel moves to Running + awaiting_input (not Failed); the next user input
    # clears the flag.
    sid = session_in(store, start)
    after = store.record.transition(sid, Status.RUNNING, awaiting_input=True)
    assert after.status is Status.RUNNING and after.awaiting_input
    assert store.record.get_session(sid).awaiting_input
    store.record.write(AddStep(session_id=sid, step=user("next")))
    assert not store.record.get_session(sid).awaiting_input


@pytest.mark.parametrize("target", [Status.PAUSED, Status.SUCCESS, Status.FAILED])
def test_awaiting_input_goes_only_with_running(store: Store, target: Status) -> None:
    sid = session_in(store, Status.RUNNING)
    before = store.record.get_session(sid)
    with pytest.raises(ValueError, match="awaiting_input goes with Running"):
        store.record.transition(sid, target, awaiting_input=True)
    assert store.record.get_session(sid) == before
