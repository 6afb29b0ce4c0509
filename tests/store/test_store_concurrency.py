"""Many writers at once: threads x sessions, readers beside the writer, another process on
the same database. No errors (never "database is locked"), every row present, and (SQLite)
group commit. Every test runs on both backends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from tests.store.builders import approval, llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.errors import IllegalTransition
from xclaw.store.base import Store
from xclaw.store.steps.model import Status, StepStatus
from xclaw.store.steps.writes import AddStep, BeginStep, Sync

THREADS, SESSIONS_PER_THREAD, STEPS = 12, 3, 25


def _run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            target(i)
        except Exception as e:  # noqa: BLE001 - collected and asserted on below
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def test_many_threads_many_sessions(store: Store, backend: Backend) -> None:
    sids = [
        [store.record.create_session().session_id for _ in range(SESSIONS_PER_THREAD)]
        for _ in range(THREADS)
    ]
    commits_before = store.record.commits  # type: ignore[attr-defined]

    def work(i: int) -> None:
        for k in range(STEPS):
            for sid in sids[i]:
                st = store.record.write(BeginStep(session_id=sid, step=tool(f"{i}-{k}")))
                store.record.write(finish(sid, st.seq, output_data={"k": k}))
                assert (
                    store.record.get_step(sid, st.seq).status is StepStatus.COMPLETED
                )  # read-your-write

    assert _run_threads(work, THREADS) == []
    for i, row in enumerate(sids):
        for sid in row:
            steps = store.record.steps(sid)
            assert [s.seq for s in steps] == list(range(1, STEPS + 1))
            assert [s.input_data["command"] for s in steps] == [f"{i}-{k}" for k in range(STEPS)]
            assert all(s.status is StepStatus.COMPLETED for s in steps)
    writes = THREADS * SESSIONS_PER_THREAD * STEPS * 2
    if backend.name == "sqlite":  # PostgreSQL groups WAL flushes itself, out of sight
        assert store.record.commits - commits_before < writes  # type: ignore[attr-defined]


def test_a_failing_operation_in_a_shared_commit_fails_alone(store: Store) -> None:
    good = [store.record.create_session().session_id for _ in range(8)]
    bad = store.record.create_session().session_id  # Init: an approval here is illegal
    outcomes: dict[str, list[object]] = {"ok": [], "illegal": []}

    def work(i: int) -> None:
        for _ in range(20):
            if i == 0:
                try:
                    store.record.write(BeginStep(session_id=bad, step=approval()))
                except IllegalTransition:
                    outcomes["illegal"].append(1)
            else:
                store.record.write(AddStep(session_id=good[i - 1], step=user()))
                outcomes["ok"].append(1)

    assert _run_threads(work, 9) == []
    assert len(outcomes["illegal"]) == 20 and len(outcomes["ok"]) == 160
    assert store.record.steps(bad) == [] and store.record.get_session(bad).status is Status.INIT
    assert all(len(store.record.steps(sid)) == 20 for sid in good)


def test_readers_are_not_blocked_by_a_long_write(store: Store, backend: Backend) -> None:
    sid = store.record.create_session().session_id
    for _ in range(3):
        store.record.write(AddStep(session_id=sid, step=user()))
    holding = threading.Event()
    release = threading.Event()
    mark = "?" if backend.name == "sqlite" else "%s"

    def slow(conn) -> None:  # a write transaction that stays open
        conn.execute(f"UPDATE sessions SET title='slow' WHERE session_id={mark}", (sid,))
        holding.set()
        release.wait(10)

    if backend.name == "sqlite":

        def write():
            return store.db._writer.submit(slow, Sync.RELAXED)  # type: ignore[attr-defined]
    else:

        def write():
            return store.db._pool.run(slow, Sync.RELAXED)  # type: ignore[attr-defined]

    t = threading.Thread(target=write)
    t.start()
    assert holding.wait(10)
    started = time.monotonic()
    assert len(store.record.steps(sid)) == 3  # the last commit, not the open transaction
    assert store.record.get_session(sid).title == ""
    assert time.monotonic() - started < 5  # not blocked by the open write (10 s)
    release.set()
    t.join(10)
    assert store.record.get_session(sid).title == "slow"


CHILD = textwrap.dedent(
    """
    import sys
    from xclaw.store import open_store
    from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
    from xclaw.store.steps.writes import BeginStep, FinishStep
    store = open_store(sys.argv[1])
    sid = store.record.create_session(session_id="child").session_id
    done = Completion(status=StepStatus.COMPLETED, output_data="x" * 500)
    for k in range(int(sys.argv[2])):
        st = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"k": k})))
        store.record.write(FinishStep(session_id=sid, step=st.seq, done=done))
    store.close()
    print("done", flush=True)
    """
)


def test_another_process_writing_the_same_database(store_factory, backend: Backend) -> None:
    store = store_factory()
    sids = [store.record.create_session().session_id for _ in range(4)]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, backend.url, "150"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def work(i: int) -> None:
        for _ in range(40):
            u = store.record.write(AddStep(session_id=sids[i], step=user()))
            st = store.record.write(BeginStep(session_id=sids[i], step=llm(parent=u.step_id)))
            store.record.write(finish(sids[i], st.seq, output_data={}))

    assert _run_threads(work, 4) == []
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert "locked" not in err and out.strip() == "done"
    assert len(store.record.steps("child")) == 150
    assert all(len(store.record.steps(sid)) == 80 for sid in sids)


def test_cli_rollback_while_a_server_writes(store_factory, backend: Backend) -> None:
    """The documented use: `xclaw rollback` from a shell while `xclaw serve` runs."""
    store = store_factory()
    target = store.record.create_session(session_id="target").session_id
    for _ in range(30):
        store.record.write(AddStep(session_id=target, step=user()))
    busy = [store.record.create_session().session_id for _ in range(3)]
    stop = threading.Event()

    def work(i: int) -> None:
        while not stop.is_set():
            st = store.record.write(BeginStep(session_id=busy[i], step=tool()))
            store.record.write(finish(busy[i], st.seq, output_data="ok"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        for ref in ("s0025", "s0020", "s0010"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "xclaw",
                    "rollback",
                    "target",
                    ref,
                    "--yes",
                    "--db",
                    backend.url,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert "locked" not in done.stderr
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert [s.seq for s in store.record.steps(target)] == list(range(1, 10))
    assert store.record.get_session(target).awaiting_input
