"""The single writer (SQLite): group commit, per-operation savepoints, per-commit durability,
close. The durability policy and close are contract tests run on both backends."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.store.builders import approval, llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.errors import StoreError
from xclaw.store.base import Store
from xclaw.store.leases import Lease
from xclaw.store.sqlite import writer as sqlite_writer
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Status
from xclaw.store.steps.writes import AddStep, BeginStep, Sync

NORMAL = 1  # PRAGMA synchronous: every commit's level (durable ones are synced after it)


def _hold_the_writer(store: SQLiteStore) -> tuple[threading.Thread, threading.Event]:
    """Start a write that keeps the write connection (its transaction open) until released."""
    holding, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> None:
        holding.set()
        release.wait(10)

    t = threading.Thread(target=store.db._writer.submit, args=(slow, Sync.RELAXED))
    t.start()
    assert holding.wait(10)
    return t, release


def _in_threads(calls: list[Callable[[], Any]]) -> tuple[list[threading.Thread], dict]:
    results: dict[int, Any] = {}

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as e:  # noqa: BLE001 - the result under test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    return threads, results


def _wait_queued(store: SQLiteStore, n: int) -> None:
    for _ in range(1000):
        with store.db._writer._cond:
            if len(store.db._writer._queue) >= n:
                return
        threading.Event().wait(0.005)
    raise AssertionError("operations were not queued")


def test_queued_operations_share_one_commit_and_fail_alone(sqlite_store: SQLiteStore) -> None:
    store = sqlite_store
    sids = [store.record.create_session().session_id for _ in range(5)]
    init = store.record.create_session().session_id
    holder, release = _hold_the_writer(store)
    calls: list[Callable[[], Any]] = [
        lambda s=s: store.record.write(AddStep(session_id=s, step=user())) for s in sids
    ]
    calls.append(
        lambda: store.record.write(BeginStep(session_id=init, step=approval()))
    )  # illegal from Init
    threads, results = _in_threads(calls)
    _wait_queued(store, len(calls))
    before = store.record.commits
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert store.record.commits - before == 2  # the held one, then all queued ones together
    assert all(results[i].seq == 1 for i in range(5))
    assert type(results[5]).__name__ == "IllegalTransition"
    assert all(len(store.record.steps(s)) == 1 for s in sids)
    assert store.record.steps(init) == [] and store.record.get_session(init).status is Status.INIT


def _statements(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store.db._writer._conn.set_trace_callback(seen.append)
    return seen


def test_busy_time_counts_every_transaction_while_it_runs(sqlite_store: SQLiteStore) -> None:
    """writer_busy_s (GET /api/health's writerBusyMs): the time the writer spent running
    transactions, so a benchmark can tell a saturated writer from an idle one."""
    store = sqlite_store
    before = store.record.writer_busy_s
    outer = time.monotonic()
    holder, release = _hold_the_writer(store)
    inner = time.monotonic()  # the transaction is open by now
    while time.monotonic() - inner < 0.05:  # it stays open this long at least
        time.sleep(0.005)
    assert store.record.writer_busy_s == before  # counted when it ends, not while it runs
    release.set()
    holder.join(10)
    assert 0.05 <= store.record.writer_busy_s - before <= time.monotonic() - outer
    store.record.create_session()
    assert store.record.writer_busy_s > before + 0.05  # every later transaction adds to it


def test_the_writer_waits_for_another_process_s_lock_itself_in_short_pauses(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the write lock (another worker's commit, a CLI rollback): the
    writer's BEGIN IMMEDIATE gets SQLITE_BUSY at once (busy_timeout 0, so not SQLite's busy
    handler, which sleeps 1, 2, 5, 10 ... ms) and tries again itself, 0.1 ms apart at first,
    never more than 5 ms (jittered); the write goes through once the lock is free."""
    store = sqlite_store
    sid = store.record.create_session().session_id
    other = sqlite3.connect(store.url, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    pauses: list[float] = []

    def sleep(s: float) -> None:  # on the writer's thread, between its tries
        pauses.append(s)
        if len(pauses) == 12:
            other.execute("ROLLBACK")  # the other process is done
        time.sleep(s)

    monkeypatch.setattr(
        sqlite_writer,
        "time",
        SimpleNamespace(sleep=sleep, monotonic=time.monotonic, perf_counter=time.perf_counter),
    )
    started = time.monotonic()
    try:
        step = store.record.write(AddStep(session_id=sid, step=user()))
    finally:
        other.close()
    assert step.seq == 1 and len(pauses) == 12  # one immediate try per pause, none waited in SQLite
    assert time.monotonic() - started < 5  # not one 10 s busy timeout
    first, top = sqlite_writer.WRITE_LOCK_FIRST_PAUSE_S, sqlite_writer.WRITE_LOCK_MAX_PAUSE_S
    for i, pause in enumerate(pauses):
        expected = min(first * 2**i, top)
        assert 0.5 * expected <= pause <= 1.5 * expected, (i, pause)
    assert max(pauses) <= 1.5 * top == 1.5 * 0.005 and pauses[0] <= 1.5 * 0.0001


def test_a_batch_without_failures_uses_no_savepoints(sqlite_store: SQLiteStore) -> None:
    """The first attempt runs every unit straight in the transaction."""
    store = sqlite_store
    sids = [store.record.create_session().session_id for _ in range(3)]
    holder, release = _hold_the_writer(store)
    threads, results = _in_threads(
        [lambda s=s: store.record.write(AddStep(session_id=s, step=user())) for s in sids]
    )
    _wait_queued(store, 3)
    seen = _statements(store)
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert all(results[i].seq == 1 for i in range(3))
    assert not [q for q in seen if q.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK"))]


def test_a_unit_failing_halfway_is_undone_alone(sqlite_store: SQLiteStore) -> None:
    """A unit that fails after writing: the batch runs again with a savepoint per unit, so
    its statements are undone and the other units of the batch commit."""
    store = sqlite_store
    sid, other = (
        store.record.create_session(title="t").session_id,
        store.record.create_session().session_id,
    )

    def unit(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE sessions SET title='half' WHERE session_id=?", (sid,))
        raise ValueError("refused after its first statement")

    holder, release = _hold_the_writer(store)
    threads, results = _in_threads(
        [
            lambda: store.db._writer.submit(unit, Sync.RELAXED),
            lambda: store.record.write(AddStep(session_id=other, step=user())),
        ]
    )
    _wait_queued(store, 2)
    seen = _statements(store)
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert isinstance(results[0], ValueError) and results[1].seq == 1
    assert store.record.get_session(sid).title == "t"  # nothing of the failed unit is left
    assert any(q.startswith("SAVEPOINT") for q in seen)  # the second, careful attempt


def test_a_store_call_from_inside_a_write_is_refused(sqlite_store: SQLiteStore) -> None:
    """A unit is a transaction body: it writes through its connection. One that calls the
    store again (a transaction inside a transaction) fails alone, in words."""
    store = sqlite_store
    sid = store.record.create_session().session_id
    holder, release = _hold_the_writer(store)
    threads, results = _in_threads(
        [
            lambda: store.db._writer.submit(
                lambda _c: store.record.write(AddStep(session_id=sid, step=user())), Sync.RELAXED
            ),
            lambda: store.record.write(AddStep(session_id=sid, step=user("kept"))),
        ]
    )
    _wait_queued(store, 2)
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert isinstance(results[0], RuntimeError) and "inside a write" in str(results[0])
    assert [s.input_data for s in store.record.steps(sid)] == ["kept"]


def _trace_syncs(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, trace: list[Any]) -> None:
    """Every sync of the WAL the writer makes goes in `trace` as "sync", once it is done."""
    writer = store.db._writer
    real = writer._sync_wal

    def spy() -> None:
        real()
        trace.append("sync")

    monkeypatch.setattr(writer, "_sync_wal", spy)


def test_a_batch_with_one_durable_operation_is_synced_before_any_outcome(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every commit is NORMAL (no `PRAGMA synchronous` switch around it); a transaction
    holding one durable unit is made durable by a sync of the WAL file, done before any of
    its units' callers hears of it; a relaxed one is not synced."""
    store = sqlite_store
    writer = store.db._writer
    trace: list[Any] = []
    _trace_syncs(store, monkeypatch, trace)

    def probe(conn: sqlite3.Connection) -> int:
        return conn.execute("PRAGMA synchronous").fetchone()[0]

    syncs = writer.syncs
    assert writer.submit(probe, Sync.RELAXED) == NORMAL
    assert writer.syncs == syncs and trace == []
    assert writer.submit(probe, Sync.DURABLE) == NORMAL
    assert writer.syncs == syncs + 1 and trace == ["sync"]
    holder, release = _hold_the_writer(store)
    trace.clear()

    def told(i: int, sync: Sync) -> Callable[[], int]:
        def call() -> int:
            value = writer.submit(probe, sync)
            trace.append(i)
            return value

        return call

    threads, results = _in_threads([told(0, Sync.RELAXED), told(1, Sync.DURABLE)])
    _wait_queued(store, 2)
    release.set()
    for t in [holder, *threads]:
        t.join(10)
    assert results == {0: NORMAL, 1: NORMAL}
    # One sync for the batch, before either caller heard of its commit.
    assert trace[0] == "sync" and sorted(trace[1:]) == [0, 1]
    assert writer.syncs == syncs + 2


def test_a_failed_sync_fails_every_unit_of_its_batch_in_words(
    sqlite_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk refusing the sync (EIO): the commit is made, but nobody is told it is durable —
    every unit of the batch gets a StoreError saying so; the writer goes on."""
    store = sqlite_store
    sid = store.record.create_session().session_id

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(sqlite_writer, "_datasync", broken)
    with pytest.raises(StoreError, match="the disk did not confirm it"):
        store.record.write(BeginStep(session_id=sid, step=tool()))
    monkeypatch.undo()
    assert store.record.write(BeginStep(session_id=sid, step=tool())).seq == 2


def test_durability_policy_per_operation(store: Store, backend: Backend, monkeypatch) -> None:
    """docs/storage.md, docs/postgres.md: what is on disk before the call returns."""
    seen: list[bool] = []
    # SQLite: the writer's synchronous level; PostgreSQL: the transaction's synchronous_commit
    owner = store.db._writer if backend.name == "sqlite" else store.db._pool  # type: ignore[attr-defined]
    name = "submit" if backend.name == "sqlite" else "run"
    real = getattr(owner, name)

    def spy(fn, sync: Sync, **kw):
        seen.append(sync is Sync.DURABLE)
        return real(fn, sync, **kw)

    monkeypatch.setattr(owner, name, spy)

    def durable(call: Callable[[], Any]) -> bool:
        seen.clear()
        call()
        (flag,) = seen
        return flag

    assert durable(lambda: store.record.create_session(session_id="d"))
    assert not durable(lambda: store.record.write(AddStep(session_id="d", step=user())))
    assert not durable(lambda: store.record.write(BeginStep(session_id="d", step=llm())))
    assert not durable(lambda: store.record.write(finish("d", 2, output_data={})))
    assert durable(
        lambda: store.record.write(BeginStep(session_id="d", step=tool()))
    )  # write-ahead
    assert not durable(lambda: store.record.write(finish("d", 3, output_data="ok")))
    assert durable(lambda: store.record.write(BeginStep(session_id="d", step=approval())))  # Paused
    assert not durable(lambda: store.record.write(finish("d", 4, output_data={"approved": True})))
    assert not durable(lambda: store.record.write(BeginStep(session_id="d", step=llm())))
    assert durable(
        lambda: store.record.write(finish("d", 5, output_data={}, session_status=Status.SUCCESS))
    )
    assert durable(lambda: store.record.transition("d", Status.RUNNING)) is False
    assert durable(lambda: store.record.transition("d", Status.FAILED))
    assert durable(lambda: store.record.mark_interrupted("d"))
    assert durable(lambda: store.leases.acquire_lease("d", "w", 30))  # a takeover
    lease = store.leases.lease_info("d")
    lease = Lease("d", "w", lease.token, lease.expires_at or 0)
    assert not durable(lambda: store.leases.renew_lease(lease, 30))
    assert not durable(lambda: store.leases.release_lease(lease))
    assert not durable(lambda: store.leases.heartbeat("w"))
    assert durable(lambda: store.record.fork("d", 2))
    assert durable(lambda: store.record.rollback("d", 2))
    assert not durable(lambda: store.record.update_session("d", title="x"))
    assert durable(lambda: store.record.delete_session("d"))


def test_close_refuses_more_and_keeps_what_was_written(store_factory) -> None:
    store = store_factory()
    sid = store.record.create_session().session_id
    store.record.write(AddStep(session_id=sid, step=user()))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.record.write(AddStep(session_id=sid, step=user()))
    with pytest.raises(StoreError, match="closed"):
        store.record.steps(sid)
    store.close()  # idempotent
    assert len(store_factory().record.steps(sid)) == 1


def test_close_drains_the_queue_and_refuses_more(sqlite_path) -> None:
    store = SQLiteStore(sqlite_path)
    sid = store.record.create_session().session_id
    holder, release = _hold_the_writer(store)
    threads, results = _in_threads(
        [lambda: store.record.write(AddStep(session_id=sid, step=user())) for _ in range(5)]
    )
    _wait_queued(store, 5)
    closer = threading.Thread(target=store.close)
    closer.start()
    release.set()
    for t in [holder, *threads, closer]:
        t.join(10)
    assert sorted(r.seq for r in results.values()) == [1, 2, 3, 4, 5]
    with pytest.raises(StoreError, match="closed"):
        store.record.write(AddStep(session_id=sid, step=user()))
    with pytest.raises(StoreError, match="closed"):
        store.record.steps(sid)
    store.close()  # idempotent
    with SQLiteStore(sqlite_path) as again:
        assert len(again.record.steps(sid)) == 5


def test_every_caller_is_served_under_contention(sqlite_store: SQLiteStore) -> None:
    """Callers writing in a tight loop all get through: the writer serves the queue in order."""
    store = sqlite_store
    sid = store.record.create_session().session_id
    stop = threading.Event()
    counts = [0, 0, 0, 0]

    def loop(i: int) -> None:
        while not stop.is_set():
            store.record.write(AddStep(session_id=sid, step=user()))
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    threading.Event().wait(0.5)
    stop.set()
    for t in threads:
        t.join(10)
    assert all(c > 0 for c in counts), counts
    assert len(store.record.steps(sid)) == sum(counts)


_POWER_LOSS_CHILD = """
import os, signal, sys
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import AddStep, BeginStep

store = SQLiteStore(sys.argv[1])
sid = store.record.create_session(session_id="powerloss").session_id  # durable
def message(text):  # relaxed: in the page cache, synced by the next durable commit
    store.record.write(AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", text)))
message("carried")
store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {})))  # durable
message("unsynced")
os.kill(os.getpid(), signal.SIGKILL)  # the power goes the moment the last call returned
"""


def test_a_durable_write_is_on_disk_when_its_call_returns(tmp_path: Path) -> None:
    """With a file layer that forgets every write not yet synced (bench/powerloss_shim.c, as
    the torture campaign uses): what a durable write's call returned survives a power loss
    at that very moment, with the relaxed write before it, which its sync carried; the
    relaxed write after it, never synced, is lost."""
    from bench.torture import build_shim

    shim = build_shim(tmp_path)
    assert shim is not None, "a C compiler (cc) builds the power-loss layer"
    home = tmp_path / "disk"
    home.mkdir()
    db = home / "xclaw.db"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "LD_PRELOAD": str(shim)}
    env["POWERLOSS_DIR"] = str(home)
    child = subprocess.run(
        [sys.executable, "-c", _POWER_LOSS_CHILD, str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    for f in list(home.iterdir()):  # the power loss: every file as it was last synced
        if f.name.endswith(".synced") or not f.name.startswith("xclaw.db"):
            continue
        synced = f.with_name(f.name + ".synced")
        if f.name.endswith("-shm") or not synced.exists():
            f.unlink()
        else:
            os.replace(synced, f)
    with SQLiteStore(db) as store:
        steps = store.record.steps("powerloss")
    assert [(s.step_type.value, s.input_data) for s in steps] == [
        ("user_input", "carried"),
        ("tool_call", {}),
    ]
