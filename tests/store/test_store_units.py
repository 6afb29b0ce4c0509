"""Store.write_together: dependent writes as units sharing commits. The contract (order,
all-or-nothing units, stop at the first failure) runs on both backends; how SQLite shares
commits and when it writes on the calling thread is tested against its writer."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.builders import approval, llm, tool, user
from tests.store.conftest import BACKEND_PARAMS, BACKENDS
from tests.store.test_store_writer import FULL, NORMAL, _hold_the_lead, _in_threads, _wait_queued
from xclaw.errors import SessionNotFound, StepNotFound
from xclaw.store.base import Store
from xclaw.store.model import Status, Step, StepStatus
from xclaw.store.sqlite import SQLiteStore


def test_units_run_in_order_and_later_ones_see_earlier_ones(store: Store) -> None:
    sid = store.create_session().session_id
    begun: list[Step] = []

    def begin() -> Step:
        begun.append(store.begin_step(sid, llm()))
        return begun[-1]

    out = store.write_together(
        [
            lambda: store.add_step(sid, user("go")),
            begin,
            lambda: store.complete_step(sid, begun[0].seq, output_data={"text": "hi"}),
            lambda: store.begin_step(sid, tool("ls", parent=begun[0].step_id)),
        ]
    )
    assert [ok for ok, _ in out] == [True] * 4
    assert [s.seq for _, s in out] == [1, 2, 2, 3]
    steps = store.steps(sid)
    assert [(s.display_id, s.status) for s in steps] == [
        ("s0001", StepStatus.COMPLETED),
        ("s0002", StepStatus.COMPLETED),
        ("s0003", StepStatus.RUNNING),
    ]
    assert steps[2].parent_step_id == steps[1].step_id
    assert store.get_session(sid).status is Status.RUNNING


def test_the_first_failing_unit_is_the_last_one_run_and_writes_nothing(store: Store) -> None:
    sid = store.create_session().session_id
    ran: list[str] = []

    def after() -> Step:
        ran.append("after")
        return store.add_step(sid, user("never"))

    out = store.write_together(
        [
            lambda: store.add_step(sid, user("kept")),
            lambda: store.complete_step(sid, 99, output_data="x"),  # no such step
            after,
        ]
    )
    assert len(out) == 2 and out[0][0] and not out[1][0]
    assert isinstance(out[1][1], StepNotFound)
    assert ran == []
    assert [s.input_data for s in store.steps(sid)] == ["kept"]


def test_a_unit_failing_halfway_is_undone_alone(store: Store) -> None:
    sid = store.create_session().session_id

    def two_writes() -> Step:
        store.add_step(sid, user("half"))
        return store.add_step("no-such-session", user("x"))

    out = store.write_together([lambda: store.add_step(sid, user("first")), two_writes])
    assert out[0][0] and not out[1][0] and isinstance(out[1][1], SessionNotFound)
    # The whole unit is undone, and what came before it is written once (PostgreSQL runs the
    # units before a failure again in a new transaction: same rows, same step numbers).
    assert [(s.display_id, s.input_data) for s in store.steps(sid)] == [("s0001", "first")]
    assert out[0][1].display_id == "s0001"


def test_units_told_a_sync_is_coming_share_one_commit(store: Store) -> None:
    sid = store.create_session().session_id
    before = store.commits  # type: ignore[attr-defined]
    out = store.write_together(
        [
            lambda: store.complete_step(sid, store.begin_step(sid, llm()).seq, output_data={}),
            lambda: store.begin_step(sid, tool()),
            lambda: store.add_step(sid, user("after")),
        ],
        durable=True,
    )
    assert all(ok for ok, _ in out)
    assert store.commits - before == 1  # type: ignore[attr-defined]
    assert [s.display_id for s in store.steps(sid)] == ["s0001", "s0002", "s0003"]


def test_wait_false_never_runs_anything_that_needs_a_sync(store: Store) -> None:
    sid = store.create_session().session_id
    out = store.write_together([lambda: store.begin_step(sid, tool())], wait=False)
    assert out == []
    assert (
        store.write_together([lambda: store.add_step(sid, user())], wait=False, durable=True) == []
    )
    assert store.steps(sid) == []


# --- SQLite: shared commits, durability, the calling thread ------------------------------------


def _sync_levels(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The synchronous level of every COMMIT the writer's connection runs."""
    levels: list[int] = []
    writer = store._writer
    real = writer._conn

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                levels.append(real.execute("PRAGMA synchronous").fetchone()[0])
            return real.execute(sql, *args)

    monkeypatch.setattr(writer, "_conn", Spy())
    return levels


def test_units_share_one_commit_and_durable_ones_start_a_full_one(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sqlite_store
    sid = store.create_session().session_id
    levels = _sync_levels(store, monkeypatch)
    before = store.commits
    # Non-durable writes, then a write-ahead row: NORMAL for the first two, FULL for the rest.
    out = store.write_together(
        [
            lambda: store.begin_step(sid, llm()),
            lambda: store.complete_step(sid, 1, output_data={}),
            lambda: store.begin_step(sid, tool()),
            lambda: store.complete_step(sid, 2, output_data="ok"),
        ]
    )
    assert all(ok for ok, _ in out)
    assert levels == [NORMAL, FULL] and store.commits - before == 2
    # Told that a durable write is coming: one FULL commit for everything.
    levels.clear()
    out = store.write_together(
        [lambda: store.begin_step(sid, llm()), lambda: store.begin_step(sid, tool())], durable=True
    )
    assert all(ok for ok, _ in out)
    assert levels == [FULL] and store.commits - before == 3


def test_wait_false_writes_on_the_calling_thread_up_to_the_first_durable_unit(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sqlite_store
    sid = store.create_session().session_id
    levels = _sync_levels(store, monkeypatch)
    threads: list[int] = []
    real_submit = store._writer.submit

    def submit(fn: Any, *, durable: bool) -> Any:
        threads.append(threading.get_ident())
        return real_submit(fn, durable=durable)

    monkeypatch.setattr(store._writer, "submit", submit)
    units = [
        lambda: store.add_step(sid, user()),
        lambda: store.begin_step(sid, llm()),
        lambda: store.begin_step(sid, tool()),  # must be durable: left to the caller
        lambda: store.add_step(sid, user("after")),
    ]
    out = store.write_together(units, wait=False)
    assert len(out) == 2 and all(ok for ok, _ in out)
    assert levels == [NORMAL] and set(threads) == {threading.get_ident()}
    assert [s.display_id for s in store.steps(sid)] == ["s0001", "s0002"]
    # The rest, from a store thread as the recorder does it: the durable unit runs once.
    rest = store.write_together(units[2:])
    assert [s.seq for _, s in rest] == [3, 4] and levels == [NORMAL, FULL]
    # Waiting never changed the busy timeout or the checkpoint setting for good.
    conn = store._writer._conn
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_wait_false_runs_nothing_while_another_thread_writes(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sid = store.create_session().session_id
    holder, release = _hold_the_lead(store)
    try:
        assert store.write_together([lambda: store.add_step(sid, user())], wait=False) == []
    finally:
        release.set()
        holder.join(10)
    assert store.steps(sid) == []


def test_wait_false_does_not_wait_for_another_process(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sid = store.create_session().session_id
    other = sqlite3.connect(store.url, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        assert store.write_together([lambda: store.add_step(sid, user())], wait=False) == []
    finally:
        other.execute("ROLLBACK")
        other.close()
    out = store.write_together([lambda: store.add_step(sid, user())], wait=False)
    assert len(out) == 1 and out[0][0]


def test_units_wait_their_turn_behind_other_threads(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sid = store.create_session().session_id
    holder, release = _hold_the_lead(store)
    result: list[Any] = []
    t = threading.Thread(
        target=lambda: result.append(store.write_together([lambda: store.add_step(sid, user())]))
    )
    t.start()
    t.join(0.2)
    assert t.is_alive()  # queued behind the lead holder
    release.set()
    for th in (holder, t):
        th.join(10)
    assert result and result[0][0][0]
    assert len(store.steps(sid)) == 1


def test_units_of_several_sessions_share_the_leaders_commit(sqlite_store: SQLiteStore) -> None:
    """Group commit across sessions: two runs' units, queued behind a busy writer, are
    written in the next batch's one transaction."""
    store = sqlite_store
    a, b = store.create_session().session_id, store.create_session().session_id
    holder, release = _hold_the_lead(store)
    before = store.commits
    threads, results = _in_threads(
        [
            lambda: store.write_together(
                [lambda: store.begin_step(a, llm()), lambda: store.begin_step(a, tool())]
            ),
            lambda: store.write_together([lambda: store.add_step(b, user())]),
        ]
    )
    _wait_queued(store, 2)
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert all(ok for r in results.values() for ok, _ in r)
    # The holder's own commit, then one NORMAL commit and one FULL commit for both runs
    # (the write-ahead row of `a` needs the sync) — not one or two per run.
    assert store.commits - before <= 3
    assert [s.display_id for s in store.steps(a)] == ["s0001", "s0002"]
    assert len(store.steps(b)) == 1


# --- property: units write exactly what one call after another would -------------------------

unit_op = st.one_of(
    st.tuples(st.just("begin"), st.sampled_from(["llm", "tool", "approval"])),
    st.tuples(st.just("add"), st.just("user")),
    st.tuples(st.just("complete"), st.integers(1, 8)),
    st.tuples(st.just("fail"), st.integers(1, 8)),
    st.tuples(st.just("final"), st.integers(1, 8)),
)
_NEW = {"llm": llm, "tool": tool, "approval": approval, "user": user}


def _unit(store: Store, sid: str, op: tuple[str, Any]) -> Callable[[], Step]:
    kind, arg = op
    if kind == "begin":
        return lambda: store.begin_step(sid, _NEW[arg]())
    if kind == "add":
        return lambda: store.add_step(sid, _NEW[arg]())
    if kind == "complete":
        return lambda: store.complete_step(sid, arg, output_data="ok")
    if kind == "fail":
        return lambda: store.fail_step(sid, arg, error_message="boom")
    return lambda: store.complete_step(sid, arg, output_data="done", session_status=Status.SUCCESS)


def _state(store: Store, sid: str) -> tuple[Any, ...]:
    steps = store.steps(sid)
    by_id = {s.step_id: s.seq for s in steps}
    rows = [
        (s.seq, s.step_type, s.name, s.status, s.error_message, by_id.get(s.parent_step_id or ""))
        for s in steps
    ]
    return store.get_session(sid).status, rows


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def units_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    backend = BACKENDS[request.param](tmp_path_factory.mktemp("units"))
    store = backend.open()
    yield store
    store.close()
    backend.drop()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(unit_op, min_size=1, max_size=12),
    durable=st.booleans(),
    inline_first=st.booleans(),
)
def test_units_write_what_one_call_after_another_writes(
    units_store: Store, ops: list[tuple[str, Any]], durable: bool, inline_first: bool
) -> None:
    store = units_store
    # The model: each write its own call, stopping at the first failure.
    one_by_one = store.create_session().session_id
    expected_outcomes: list[bool] = []
    for op in ops:
        try:
            _unit(store, one_by_one, op)()
            expected_outcomes.append(True)
        except Exception:  # noqa: BLE001 - the failure that ends the run
            expected_outcomes.append(False)
            break
    # The same writes as units, the way the recorder sends them: what can go on the calling
    # thread first (SQLite only), the rest in one call that may wait.
    together = store.create_session().session_id
    units = [_unit(store, together, op) for op in ops]
    out = store.write_together(units, wait=False) if inline_first else []
    if len(out) < len(units) and (not out or out[-1][0]):
        out += store.write_together(units[len(out) :], durable=durable)
    assert [ok for ok, _ in out] == expected_outcomes
    assert _state(store, together) == _state(store, one_by_one)
