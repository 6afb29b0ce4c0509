"""Rollback and fork: by sequence number, ids never reused, links remapped."""

from __future__ import annotations

import pytest

from tests.store.builders import approval, llm, tool, user
from tests.writes import finish
from xclaw.errors import SessionNotFound, StepNotFound
from xclaw.store.base import RollbackResult, Store
from xclaw.store.steps.model import INTERRUPTED, Status, StepStatus
from xclaw.store.steps.writes import AddStep, BeginStep


def conversation(store: Store, sid: str, turns: int = 2) -> None:
    """user -> llm -> tool (child of llm) -> llm, per turn: 4 steps a turn."""
    for i in range(turns):
        u = store.record.write(AddStep(session_id=sid, step=user(f"turn {i}")))
        l1 = store.record.write(BeginStep(session_id=sid, step=llm(parent=u.step_id)))
        store.record.write(finish(sid, l1.seq, output_data={"text": "", "tool_calls": [i]}))
        t = store.record.write(BeginStep(session_id=sid, step=tool(f"cmd {i}", parent=l1.step_id)))
        store.record.write(finish(sid, t.seq, output_data=f"out {i}"))
        l2 = store.record.write(BeginStep(session_id=sid, step=llm(parent=u.step_id)))
        store.record.write(finish(sid, l2.seq, output_data={"text": f"answer {i}"}))


def history(store: Store, sid: str) -> list[tuple]:
    """What a step means, without the ids that differ between a fork and its source."""
    return [
        (
            s.seq,
            s.step_type,
            s.name,
            s.status,
            s.input_data,
            s.output_data,
            s.error_message,
            s.parent_display_id,
            s.agent,
            s.call_id,
            s.start_time,
            s.end_time,
            s.token_usage_prompt,
            s.token_usage_completion,
        )
        for s in store.record.steps(sid)
    ]


# --- rollback --------------------------------------------------------------------------------


def test_rollback_deletes_the_target_and_everything_after(store: Store) -> None:
    sid = store.record.create_session(session_id="r").session_id
    conversation(store, sid, turns=3)  # s0001..s0012
    store.record.transition(sid, Status.SUCCESS)
    keep = history(store, sid)[:4]
    result = store.record.rollback(sid, "s0005")
    assert isinstance(result, RollbackResult)
    assert (result.target_seq, result.deleted) == (5, 8)
    assert result.session.status is Status.RUNNING and result.session.awaiting_input
    assert store.record.get_session(sid) == result.session
    assert history(store, sid) == keep
    with pytest.raises(StepNotFound):
        store.record.get_step(sid, 5)


def test_ids_are_never_reused_after_rollback(store: Store) -> None:
    sid = store.record.create_session().session_id
    for _ in range(10):
        store.record.write(AddStep(session_id=sid, step=user()))
    store.record.rollback(sid, 5)
    assert store.record.write(AddStep(session_id=sid, step=user())).display_id == "s0011"
    store.record.rollback(sid, "s0011")
    assert store.record.write(AddStep(session_id=sid, step=user())).display_id == "s0012"


def test_rollback_orders_by_seq_not_time(store_factory) -> None:
    store = store_factory(clock=lambda: 1_700_000_000_000)  # every step in one millisecond
    sid = store.record.create_session().session_id
    for i in range(6):
        store.record.write(AddStep(session_id=sid, step=user(f"m{i}")))
    assert len({s.start_time for s in store.record.steps(sid)}) == 1
    assert store.record.rollback(sid, 4).deleted == 3
    assert [s.input_data for s in store.record.steps(sid)] == ["m0", "m1", "m2"]
    fork = store.record.fork(sid, 2)
    assert [s.input_data for s in store.record.steps(fork.session_id)] == ["m0", "m1"]


@pytest.mark.parametrize("status", [Status.INIT, Status.PAUSED, Status.SUCCESS, Status.FAILED])
def test_rollback_from_any_state_lands_in_running(store: Store, status: Status) -> None:
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user()))
    store.record.write(AddStep(session_id=sid, step=user()))
    if status is Status.PAUSED:
        store.record.write(BeginStep(session_id=sid, step=approval()))
    elif status is not Status.INIT:
        store.record.transition(sid, status)
    else:  # Init with steps: only possible through an AddStep of a non-user step
        sid = store.record.create_session().session_id
        store.record.write(
            AddStep(session_id=sid, step=tool(), status=StepStatus.FAILED, error_message="x")
        )
        store.record.write(
            AddStep(session_id=sid, step=tool(), status=StepStatus.FAILED, error_message="x")
        )
    assert store.record.get_session(sid).status is status
    result = store.record.rollback(sid, 2)
    assert result.session.status is Status.RUNNING and result.session.awaiting_input


def test_rollback_bad_refs(store: Store) -> None:
    sid = store.record.create_session(session_id="x").session_id
    store.record.create_session(session_id="y")
    store.record.write(AddStep(session_id="y", step=user()))
    store.record.write(AddStep(session_id=sid, step=user()))
    for bad in ("s0002", 2, "y:s0001", "nonsense", 0):
        with pytest.raises(StepNotFound):
            store.record.rollback(sid, bad)
    with pytest.raises(SessionNotFound):
        store.record.rollback("ghost", 1)
    assert len(store.record.steps(sid)) == 1 and not store.record.get_session(sid).awaiting_input


def test_rollback_of_the_first_step_empties_the_session(store: Store) -> None:
    sid = store.record.create_session().session_id
    conversation(store, sid, turns=1)
    assert store.record.rollback(sid, 1).deleted == 4
    assert store.record.steps(sid) == [] and store.record.step_tree(sid) == []


# --- fork ------------------------------------------------------------------------------------


def test_fork_copies_the_prefix_and_leaves_the_source(store: Store) -> None:
    sid = store.record.create_session(
        session_id="web-abc123", title="refactor", metadata={"temperature": 0}
    ).session_id
    conversation(store, sid, turns=2)  # 8 steps
    store.record.transition(sid, Status.SUCCESS)
    source_before = history(store, sid)
    session_before = store.record.get_session(sid)
    fork = store.record.fork(sid, "s0006", title="plan A")
    assert fork.session_id != sid
    assert (fork.title, fork.status, fork.is_forked, fork.parent_session_id) == (
        "plan A",
        Status.INIT,
        True,
        sid,
    )
    assert fork.forked_from_seq == 6 and not fork.awaiting_input
    assert fork.metadata == {"temperature": 0}
    assert store.record.get_session(fork.session_id) == fork
    assert history(store, fork.session_id) == source_before[:6]
    assert history(store, sid) == source_before
    assert store.record.get_session(sid) == session_before
    for s in store.record.steps(fork.session_id):
        assert s.step_id == f"{fork.session_id}:{s.display_id}"
        assert s.parent_step_id is None or s.parent_step_id.startswith(fork.session_id + ":")
    # the fork continues after the copied prefix: its s0005 is the source's s0005
    assert (
        store.record.write(AddStep(session_id=fork.session_id, step=user("other way"))).display_id
        == "s0007"
    )


def test_fork_tree_is_remapped(store: Store) -> None:
    sid = store.record.create_session().session_id
    conversation(store, sid, turns=1)
    fork = store.record.fork(sid, 4)
    tree = store.record.step_tree(fork.session_id)
    assert [n.step.display_id for n in tree] == ["s0001"]
    assert [c.step.display_id for c in tree[0].children] == ["s0002", "s0004"]
    assert [c.step.display_id for c in tree[0].children[0].children] == ["s0003"]
    assert tree[0].children[0].children[0].step.parent_step_id == f"{fork.session_id}:s0002"


def test_default_fork_title(store: Store) -> None:
    named = store.record.create_session(title="log analysis").session_id
    store.record.write(AddStep(session_id=named, step=user()))
    assert store.record.fork(named, 1).title == "fork of log analysis at s0001"
    anon = store.record.create_session(session_id="anon").session_id
    store.record.write(AddStep(session_id=anon, step=user()))
    assert store.record.fork(anon, 1).title == "fork of anon at s0001"


def test_fork_twice_at_one_point(store: Store) -> None:
    sid = store.record.create_session().session_id
    conversation(store, sid, turns=2)
    a = store.record.fork(sid, 5)
    b = store.record.fork(sid, 5)
    assert a.session_id != b.session_id
    assert history(store, a.session_id) == history(store, b.session_id) == history(store, sid)[:5]
    store.record.write(AddStep(session_id=a.session_id, step=user("only in a")))
    assert len(store.record.steps(b.session_id)) == 5


def test_fork_of_a_fork(store: Store) -> None:
    sid = store.record.create_session(title="root").session_id
    conversation(store, sid, turns=2)
    first = store.record.fork(sid, 6)
    store.record.write(
        AddStep(session_id=first.session_id, step=user("branch"))
    )  # s0007 in the fork
    second = store.record.fork(first.session_id, "s0007")
    assert second.parent_session_id == first.session_id and second.forked_from_seq == 7
    assert second.title == f"fork of {first.title} at s0007"
    assert history(store, second.session_id) == history(store, first.session_id)
    assert [s.input_data for s in store.record.steps(second.session_id)][-1] == "branch"
    for s in store.record.steps(second.session_id):
        assert s.step_id.startswith(second.session_id + ":")
        assert s.parent_step_id is None or s.parent_step_id.startswith(second.session_id + ":")


def test_rollback_and_fork_inside_a_fork(store: Store) -> None:
    sid = store.record.create_session().session_id
    conversation(store, sid, turns=3)
    source = history(store, sid)
    fork = store.record.fork(sid, 10).session_id
    assert store.record.rollback(fork, 6).deleted == 5
    assert history(store, fork) == source[:5]
    assert store.record.write(AddStep(session_id=fork, step=user("new"))).display_id == "s0011"
    nested = store.record.fork(fork, "s0011").session_id
    assert [s.display_id for s in store.record.steps(nested)] == [
        "s0001",
        "s0002",
        "s0003",
        "s0004",
        "s0005",
        "s0011",
    ]
    assert store.record.rollback(nested, "s0003").deleted == 4
    assert [s.display_id for s in store.record.steps(nested)] == ["s0001", "s0002"]
    assert history(store, sid) == source  # the original never moved
    assert len(store.record.steps(fork)) == 6


def test_fork_never_inherits_a_run_in_flight(store: Store) -> None:
    sid = store.record.create_session().session_id
    u = store.record.write(AddStep(session_id=sid, step=user()))
    running_tool = store.record.write(
        BeginStep(session_id=sid, step=tool("sleep 10", parent=u.step_id))
    )
    pending = store.record.write(BeginStep(session_id=sid, step=approval(parent=u.step_id)))
    fork = store.record.fork(sid, pending.seq)
    copied = store.record.steps(fork.session_id)
    assert [s.status for s in copied] == [
        StepStatus.COMPLETED,
        StepStatus.FAILED,
        StepStatus.FAILED,
    ]
    assert all(s.error_message == INTERRUPTED and s.end_time is not None for s in copied[1:])
    # the source is untouched: its steps are still running
    assert store.record.get_step(sid, running_tool.seq).status is StepStatus.RUNNING
    assert store.record.get_step(sid, pending.seq).status is StepStatus.RUNNING


def test_fork_bad_refs(store: Store) -> None:
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user()))
    with pytest.raises(StepNotFound):
        store.record.fork(sid, "s0002")
    with pytest.raises(SessionNotFound):
        store.record.fork("ghost", 1)
    assert len(store.record.list_sessions()) == 1


# --- the records of a rollback that undid outside effects (xclaw/runtime/rollbacks.py) -----


def test_rollback_keeps_the_records_of_compensations_and_completes_their_plan(
    store: Store,
) -> None:
    """A plan (`rollback`) and a compensation written after the effects are kept by the
    rewind that follows, which completes the plan in its own transaction; the compensation's
    link to the deleted effect becomes empty. A pending plan is no interrupted step."""
    from xclaw.store.base import PlanDone
    from xclaw.store.steps.model import NewStep, StepType

    sid = store.record.create_session(session_id="u").session_id
    conversation(store, sid, turns=2)  # s0001..s0008; s0007 is the second tool call
    plan = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                step_type=StepType.SYSTEM_ALERT, name="rollback", input_data={"stepId": "s0005"}
            ),
        )
    )
    comp = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                step_type=StepType.SYSTEM_ALERT,
                name="compensation",
                input_data={"effect": "s0007"},
                parent_step_id=f"{sid}:s0007",
            ),
        )
    )
    # A crash here: what a run's start marks leaves the plan pending, the compensation not.
    marked = store.record.mark_interrupted(sid)
    assert [s.display_id for s in marked] == [comp.display_id]
    assert store.record.get_step(sid, plan.seq).status is StepStatus.RUNNING

    result = store.record.rollback(sid, "s0005", plan=PlanDone(plan.seq, {"compensated": []}))
    assert result.deleted == 4  # s0005..s0008, not the records
    kept = {s.display_id: s for s in store.record.steps(sid)}
    assert list(kept) == ["s0001", "s0002", "s0003", "s0004", plan.display_id, comp.display_id]
    assert kept[plan.display_id].status is StepStatus.COMPLETED
    assert kept[plan.display_id].output_data == {"compensated": []}
    assert kept[comp.display_id].parent_step_id is None
    assert kept[comp.display_id].input_data == {"effect": "s0007"}
    # A later rollback keeps them too: the record of what was undone outlives it.
    store.record.rollback(sid, "s0002")
    assert [s.name for s in store.record.steps(sid)] == ["user", "rollback", "compensation"]
