"""A step's number: the session's next_seq, taken in the step's own transaction, whatever else
wrote the database since. SQLite's store guesses the number from the last step it wrote for
the session and lets the UPDATE that takes it check the guess (store/sqlite/store.py
`_next_seqs`, leases.take_known_seq): these are the cases where the guess is wrong. Contract
tests on both backends; a kill between steps (a guess lost with its process) is
test_store_crash.py's."""

from __future__ import annotations

import pytest

from tests.store.builders import llm, tool, user
from tests.store.conftest import Backend
from xclaw.errors import StepNotFound
from xclaw.store.base import Store
from xclaw.store.steps.writes import AddStep, BeginStep


def _running(store: Store, session_id: str | None = None) -> str:
    """A Running session: created, its first message (s0001) written."""
    sid = store.record.create_session(session_id=session_id).session_id
    store.record.write(AddStep(session_id=sid, step=user("go")))
    return sid


def _numbers(store: Store, sid: str) -> list[int]:
    return [s.seq for s in store.record.steps(sid)]


def _next_seq(backend: Backend, sid: str) -> int:
    return int(backend.query("SELECT next_seq FROM sessions WHERE session_id=?", (sid,))[0][0])


def test_steps_another_store_numbered_are_not_numbered_again(store_factory, backend) -> None:
    mine, other = store_factory(), store_factory()
    sid = _running(mine)
    assert mine.record.write(BeginStep(session_id=sid, step=llm())).seq == 2
    # Another store (another process's, on SQLite) on the same database takes 3 and 4.
    assert [other.record.write(BeginStep(session_id=sid, step=tool())).seq for _ in "ab"] == [3, 4]
    # This store last took 2: it must not take 3 again, nor leave a gap.
    assert mine.record.write(BeginStep(session_id=sid, step=tool())).seq == 5
    assert mine.record.write(BeginStep(session_id=sid, step=tool())).seq == 6
    assert _numbers(mine, sid) == [1, 2, 3, 4, 5, 6]
    assert _next_seq(backend, sid) == 7


def test_a_step_whose_transaction_failed_leaves_no_gap(store: Store, backend: Backend) -> None:
    sid = _running(store)
    assert store.record.write(BeginStep(session_id=sid, step=llm())).seq == 2
    # Its number is taken, then the missing parent rolls the whole write back.
    with pytest.raises(StepNotFound):
        store.record.write(BeginStep(session_id=sid, step=tool(parent="s0099")))
    assert _next_seq(backend, sid) == 3
    assert store.record.write(BeginStep(session_id=sid, step=tool(parent="s0002"))).seq == 3
    assert store.record.write(BeginStep(session_id=sid, step=tool(parent="s0002"))).seq == 4
    assert _numbers(store, sid) == [1, 2, 3, 4]


def test_a_session_deleted_and_made_again_numbers_from_one(store: Store) -> None:
    sid = _running(store, "again")
    for _ in range(3):
        store.record.write(BeginStep(session_id=sid, step=tool()))
    store.record.delete_session(sid)
    assert store.record.create_session(session_id="again").session_id == sid
    # A finished step that leaves the status as it is: numbered as the session says (1),
    # not after the deleted session's last step.
    assert store.record.write(AddStep(session_id=sid, step=llm())).seq == 1
    assert _numbers(store, sid) == [1]


def test_numbers_are_not_reused_after_a_rollback(store: Store, backend: Backend) -> None:
    sid = _running(store)
    for _ in range(4):
        store.record.write(BeginStep(session_id=sid, step=tool()))
    store.record.rollback(sid, 3)  # steps 3.. gone; their numbers stay used
    assert _next_seq(backend, sid) == 6
    store.record.write(AddStep(session_id=sid, step=user("again")))
    assert store.record.write(BeginStep(session_id=sid, step=tool())).seq == 7
    assert _numbers(store, sid) == [1, 2, 6, 7]
