"""Store.write_stream: one run's writes (values of store/steps/writes.py), in order, each
all-or-nothing, a failure breaking the stream. The contract runs on both backends; how SQLite's
writer thread shares commits and chooses their sync level (the table, writes.SYNC) is tested
against the writer.

A stream is put to from an event loop (its futures are the loop's): each test runs its puts
in `asyncio.run`, while its own store calls (setting up, reading back) block as a tool would."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.builders import approval, llm, tool, user
from tests.store.conftest import BACKEND_PARAMS, BACKENDS
from tests.store.test_store_writer import _hold_the_writer, _wait_queued
from tests.writes import finish
from xclaw.errors import StepNotFound
from xclaw.store.base import Store
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Completion, Status, Step, StepStatus, StepType
from xclaw.store.steps.writes import (
    SYNC,
    AddStep,
    BeginStep,
    FinishStep,
    Hold,
    Kind,
    Sync,
    Write,
    sync_of,
)

T = TypeVar("T")


async def _outcomes(futures: list[asyncio.Future[Any]]) -> list[tuple[bool, Any]]:
    await asyncio.wait_for(asyncio.wait(futures), 10)
    return [
        (True, f.result()) if f.exception() is None else (False, f.exception()) for f in futures
    ]


def _on_loop(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await fn()

    return asyncio.run(main())


def _put_all(store: Store, writes: list[Write]) -> list[tuple[bool, Any]]:
    """Every write on one stream, none awaited before the last is put."""

    async def put() -> list[tuple[bool, Any]]:
        stream = store.record.write_stream()
        return await _outcomes([stream.put(w) for w in writes])

    return _on_loop(put)


def _done(output: Any = None) -> Completion:
    return Completion(status=StepStatus.COMPLETED, output_data=output)


def test_writes_commit_in_order_and_later_ones_name_earlier_ones(store: Store) -> None:
    sid = store.record.create_session().session_id
    begun = BeginStep(session_id=sid, step=llm())
    out = _put_all(
        store,
        [
            AddStep(session_id=sid, step=user("go")),
            begun,
            FinishStep(session_id=sid, step=begun, done=_done({"text": "hi"})),
            BeginStep(session_id=sid, step=tool("ls"), parent=begun),
        ],
    )
    assert [ok for ok, _ in out] == [True] * 4
    assert [s.seq for _, s in out] == [1, 2, 2, 3]
    steps = store.record.steps(sid)
    assert [(s.display_id, s.status) for s in steps] == [
        ("s0001", StepStatus.COMPLETED),
        ("s0002", StepStatus.COMPLETED),
        ("s0003", StepStatus.RUNNING),
    ]
    assert steps[2].parent_step_id == steps[1].step_id
    assert store.record.get_session(sid).status is Status.RUNNING


def test_a_failing_write_breaks_the_stream_and_writes_nothing(store: Store) -> None:
    sid = store.record.create_session().session_id
    after = AddStep(session_id=sid, step=user("never"))

    async def put() -> tuple[list[tuple[bool, Any]], asyncio.Future[Any]]:
        stream = store.record.write_stream()
        futures = [
            stream.put(AddStep(session_id=sid, step=user("kept"))),
            stream.put(FinishStep(session_id=sid, step=99, done=_done("x"))),
            stream.put(after),
        ]
        out = await _outcomes(futures)
        # Put after the failure is known: refused at once, with the same error.
        late = stream.put(after)
        assert late.done()
        return out, late

    out, late = _on_loop(put)
    assert out[0][0] and not out[1][0] and not out[2][0]
    assert isinstance(out[1][1], StepNotFound) and out[2][1] is out[1][1]
    assert late.exception() is out[1][1] and after.slot.step is None
    assert [s.input_data for s in store.record.steps(sid)] == ["kept"]


def test_a_write_failing_halfway_is_undone_alone(store: Store) -> None:
    """A tool's result stores its images first: the completion failing takes them back."""
    sid = store.record.create_session().session_id
    image = b"\x89PNG not really"
    first = AddStep(session_id=sid, step=user("first"))
    half = FinishStep(
        session_id=sid, step=7, done=_done("x"), told=True, blobs={_hash(image): image}
    )
    out = _put_all(store, [first, half])
    assert out[0][0] and not out[1][0] and isinstance(out[1][1], StepNotFound)
    # The whole write is undone, and what came before it is written once (PostgreSQL runs the
    # writes before a failure again in a new transaction: same rows, same step numbers).
    assert [(s.display_id, s.input_data) for s in store.record.steps(sid)] == [("s0001", "first")]
    assert out[0][1].display_id == "s0001" and first.slot.resolved().display_id == "s0001"
    assert store.snapshots.missing_blobs([_hash(image)]) == {_hash(image)}


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_streams_of_other_runs_go_on_after_one_breaks(store: Store) -> None:
    a, b = store.record.create_session().session_id, store.record.create_session().session_id

    async def put() -> list[tuple[bool, Any]]:
        broken = store.record.write_stream()
        failed = await _outcomes([broken.put(FinishStep(session_id=a, step=9, done=_done("")))])
        fine = store.record.write_stream()
        return failed + await _outcomes([fine.put(AddStep(session_id=b, step=user()))])

    (failed, _), (ok, step) = _on_loop(put)
    assert not failed
    assert ok and step.seq == 1


def test_every_kind_of_write_has_its_row_in_the_table() -> None:
    """writes.SYNC decides every write's commit; each kind names the effect it precedes."""
    assert set(SYNC) == set(Kind)
    assert all(why for _, why in SYNC.values())
    sid = "s"
    running = Step(
        step_id="s:s0001",
        session_id=sid,
        seq=1,
        parent_step_id=None,
        step_type=StepType.TOOL_CALL,
        name="shell",
        status=StepStatus.RUNNING,
    )
    assert sync_of(BeginStep(session_id=sid, step=tool())) is Sync.DURABLE  # write-ahead
    assert sync_of(BeginStep(session_id=sid, step=approval())) is Sync.DURABLE
    assert sync_of(BeginStep(session_id=sid, step=llm())) is Sync.LAZY
    # Under a budget the call waits for its hold: committed, not synced.
    hold = Hold(tokens=1, usd=0.0, owner=None, day="2026-12-06", month="2026-12")
    assert sync_of(BeginStep(session_id=sid, step=llm(), hold=hold)) is Sync.RELAXED
    assert sync_of(AddStep(session_id=sid, step=user())) is Sync.RELAXED
    assert (
        sync_of(FinishStep(session_id=sid, step=running, done=_done(), told=True)) is Sync.DURABLE
    )
    assert sync_of(FinishStep(session_id=sid, step=1, done=_done())) is Sync.LAZY
    final = FinishStep(session_id=sid, step=1, done=_done(), session_status=Status.SUCCESS)
    assert sync_of(final) is Sync.DURABLE


# --- SQLite: the writer thread, shared commits, durability -----------------------------------


def _synced_commits(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For every COMMIT the writer's connection runs, whether the writer synced the WAL after
    it (a durable commit) before running anything else."""
    synced: list[bool] = []
    writer = store.db._writer
    real = writer._conn
    real_sync = writer._sync_wal

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                synced.append(False)
            return real.execute(sql, *args)

    def sync() -> None:
        real_sync()
        synced[-1] = True

    monkeypatch.setattr(writer, "_conn", Spy())
    monkeypatch.setattr(writer, "_sync_wal", sync)
    return synced


def test_queued_units_share_one_commit_synced_if_one_is_durable(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit across runs: units of two streams queued behind a busy writer go in its
    next transaction, one synced commit because one of them is a write-ahead row."""
    store = sqlite_store
    a, b = store.record.create_session().session_id, store.record.create_session().session_id
    holder, release = _hold_the_writer(store)
    synced = _synced_commits(store, monkeypatch)
    before = store.record.commits

    async def put() -> list[tuple[bool, Any]]:
        sa, sb = store.record.write_stream(), store.record.write_stream()
        futures = [
            sa.put(BeginStep(session_id=a, step=llm())),
            sb.put(AddStep(session_id=b, step=user())),
            sa.put(BeginStep(session_id=a, step=tool())),
        ]
        _wait_queued(store, 3)
        release.set()
        holder.join(10)
        return await _outcomes(futures)

    assert all(ok for ok, _ in _on_loop(put))
    assert store.record.commits - before == 2  # the held one, then all three together
    assert synced[-1]
    assert [s.display_id for s in store.record.steps(a)] == ["s0001", "s0002"]


def test_the_table_decides_each_commit_s_sync_level(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write-ahead row's commit is synced, an LLM call's begin's and a message's not: the kind of
    the write decides (writes.SYNC), not whoever puts it."""
    store = sqlite_store
    sid = store.record.create_session().session_id
    synced = _synced_commits(store, monkeypatch)

    async def put() -> None:
        stream = store.record.write_stream()
        assert await stream.put(BeginStep(session_id=sid, step=llm()))
        assert synced == [False]
        assert await stream.put(BeginStep(session_id=sid, step=tool()))
        assert synced == [False, True]
        assert await stream.put(AddStep(session_id=sid, step=user()))
        assert synced == [False, True, False]

    _on_loop(put)


def test_no_write_runs_on_an_event_loop_thread(sqlite_store: SQLiteStore) -> None:
    """Every statement of the write connection made from an event loop — streams, and even a
    blocking store call made on the loop — runs on the writer thread. (A synchronous call from
    another thread that finds the writer idle runs its own transaction.)"""
    store = sqlite_store
    threads: set[threading.Thread] = set()
    store.db._writer._conn.set_trace_callback(lambda _sql: threads.add(threading.current_thread()))
    sid = store.record.create_session().session_id

    async def on_the_loop() -> None:
        store.record.write(
            AddStep(session_id=sid, step=user())
        )  # blocking the loop is wrong, but still not written on it
        stream = store.record.write_stream()
        await stream.put(BeginStep(session_id=sid, step=tool()))
        store.record.transition(sid, Status.SUCCESS)

    threads.clear()
    asyncio.run(on_the_loop())
    assert threads == {store.writer_thread}
    # Off any loop, with the writer idle: the caller's own thread, one transaction.
    threads.clear()
    store.record.write(AddStep(session_id=sid, step=user()))
    assert threads == {threading.current_thread()}


def test_a_caller_finding_the_writer_busy_queues_behind_it(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sid = store.record.create_session().session_id
    holder, release = _hold_the_writer(store)
    done: list[Step] = []
    t = threading.Thread(
        target=lambda: done.append(store.record.write(AddStep(session_id=sid, step=user())))
    )
    t.start()
    _wait_queued(store, 1)
    assert not done
    release.set()
    for th in (holder, t):
        th.join(10)
    assert [s.seq for s in done] == [1]


def test_a_unit_waits_behind_another_process_holding_the_lock(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sid = store.record.create_session().session_id
    other = sqlite3.connect(store.url, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock

    async def put() -> Step:
        try:
            f = store.record.write_stream().put(AddStep(session_id=sid, step=user()))
            await asyncio.sleep(0.1)
            assert not f.done()  # waiting (busy timeout), not failing
        finally:
            other.execute("ROLLBACK")
            other.close()
        return await asyncio.wait_for(f, 10)

    assert _on_loop(put).seq == 1


# --- property: units write exactly what one call after another would -------------------------

unit_op = st.one_of(
    st.tuples(st.just("begin"), st.sampled_from(["llm", "tool", "approval"])),
    st.tuples(st.just("add"), st.just("user")),
    st.tuples(st.just("complete"), st.integers(1, 8)),
    st.tuples(st.just("fail"), st.integers(1, 8)),
    st.tuples(st.just("final"), st.integers(1, 8)),
)
_NEW = {"llm": llm, "tool": tool, "approval": approval, "user": user}


def _call(store: Store, sid: str, op: tuple[str, Any]) -> Callable[[], Step]:
    kind, arg = op
    if kind == "begin":
        return lambda: store.record.write(BeginStep(session_id=sid, step=_NEW[arg]()))
    if kind == "add":
        return lambda: store.record.write(AddStep(session_id=sid, step=_NEW[arg]()))
    if kind == "complete":
        return lambda: store.record.write(finish(sid, arg, output_data="ok"))
    if kind == "fail":
        return lambda: store.record.write(finish(sid, arg, error_message="boom"))
    return lambda: store.record.write(
        finish(sid, arg, output_data="done", session_status=Status.SUCCESS)
    )


def _write(sid: str, op: tuple[str, Any]) -> Write:
    kind, arg = op
    if kind == "begin":
        return BeginStep(session_id=sid, step=_NEW[arg]())
    if kind == "add":
        return AddStep(session_id=sid, step=_NEW[arg]())
    if kind == "complete":
        return FinishStep(session_id=sid, step=arg, done=_done("ok"))
    if kind == "fail":
        failed = Completion(status=StepStatus.FAILED, error_message="boom")
        return FinishStep(session_id=sid, step=arg, done=failed)
    return FinishStep(session_id=sid, step=arg, done=_done("done"), session_status=Status.SUCCESS)


def _state(store: Store, sid: str) -> tuple[Any, ...]:
    steps = store.record.steps(sid)
    by_id = {s.step_id: s.seq for s in steps}
    rows = [
        (s.seq, s.step_type, s.name, s.status, s.error_message, by_id.get(s.parent_step_id or ""))
        for s in steps
    ]
    return store.record.get_session(sid).status, rows


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
@given(ops=st.lists(unit_op, min_size=1, max_size=12))
def test_a_stream_writes_what_one_call_after_another_writes(
    units_store: Store, ops: list[tuple[str, Any]]
) -> None:
    store = units_store
    # The model: each write its own call, stopping at the first failure.
    one_by_one = store.record.create_session().session_id
    expected_outcomes: list[bool] = []
    for op in ops:
        try:
            _call(store, one_by_one, op)()
            expected_outcomes.append(True)
        except Exception:  # noqa: BLE001 - the failure that ends the run
            expected_outcomes.append(False)
            break
    # The same writes put on a stream, the way the recorder puts them: nobody waiting for
    # the first ones, the last one awaited.
    together = store.record.create_session().session_id
    out = _put_all(store, [_write(together, op) for op in ops])
    n = len(expected_outcomes)
    assert [ok for ok, _ in out[:n]] == expected_outcomes
    assert all(not ok for ok, _ in out[n:])  # after a failure: failed with it, unrun
    assert _state(store, together) == _state(store, one_by_one)
