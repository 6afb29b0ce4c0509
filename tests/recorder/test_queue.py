"""The recorder's ordered write queue on a real SQLite store: order kept, writes batched into
one hop and one commit, non-durable writes written on the loop when the writer is free, a
failure stops everything queued after it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.store.builders import llm, tool, user
from xclaw.errors import StepNotFound
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.queue import COALESCE_S, WriteQueue, step_id_of
from xclaw.store.model import NewStep, Step, StepStatus, StepType
from xclaw.store.sqlite import SQLiteStore


class CountingCaller(StoreCaller):
    """The real caller (a store thread per call), counting hops and the threads they ran on."""

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store)
        self.hops = 0
        self.threads: set[int] = set()

    async def __call__(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.hops += 1

        def run() -> Any:
            self.threads.add(threading.get_ident())
            return fn(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(None, run)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SQLiteStore(tmp_path / "q.db")
    yield s
    s.close()


async def test_a_run_of_writes_keeps_its_order_and_takes_one_hop_and_one_commit(
    store: SQLiteStore,
) -> None:
    sid = store.create_session().session_id
    caller = CountingCaller(store)
    q = WriteQueue(caller)
    frames: list[str] = []
    before = store.commits
    first = q.submit(lambda: store.add_step(sid, user()), lambda s: frames.append(s.display_id))
    # Refers to the first, which is written in the same batch.
    second = q.submit(
        lambda: store.begin_step(sid, llm(parent=step_id_of(first))),
        lambda s: frames.append(s.display_id),
    )
    third = await q.write(
        lambda: store.begin_step(sid, tool(parent=step_id_of(second)))
    )  # write-ahead
    assert third.display_id == "s0003"
    assert (await second.future).parent_step_id == (await first.future).step_id
    assert caller.hops == 1 and threading.get_ident() not in caller.threads
    assert store.commits - before == 1  # one durable commit for the whole run of writes
    await asyncio.sleep(0)
    assert frames == ["s0001", "s0002"]
    assert [s.status for s in store.steps(sid)] == [
        StepStatus.COMPLETED,
        StepStatus.RUNNING,
        StepStatus.RUNNING,
    ]


async def test_unawaited_writes_go_out_within_the_coalescing_delay_on_the_loop(
    store: SQLiteStore,
) -> None:
    sid = store.create_session().session_id
    caller = CountingCaller(store)
    q = WriteQueue(caller)
    written = q.submit(lambda: store.add_step(sid, user()))
    q.submit(lambda: store.begin_step(sid, llm()))
    assert not written.future.done()
    await asyncio.sleep(COALESCE_S * 5)
    assert written.future.done() and written.future.result().display_id == "s0001"
    # The writer was free and nothing needed a sync: written on the loop, no hop.
    assert caller.hops == 0
    assert len(store.steps(sid)) == 2


async def test_a_busy_writer_sends_the_writes_to_a_store_thread(store: SQLiteStore) -> None:
    sid = store.create_session().session_id
    caller = CountingCaller(store)
    q = WriteQueue(caller)
    holding, release = threading.Event(), threading.Event()

    def slow(conn: Any) -> None:
        holding.set()
        release.wait(10)

    holder = threading.Thread(target=store._writer.submit, args=(slow,), kwargs={"durable": False})
    holder.start()
    assert holding.wait(10)
    pending = q.submit(lambda: store.add_step(sid, user()))
    await asyncio.sleep(COALESCE_S * 5)  # the loop is not blocked by the other writer
    assert not pending.future.done()
    release.set()
    step = await pending.future
    holder.join(10)
    assert step.display_id == "s0001" and caller.hops == 1


async def test_a_failed_write_fails_everything_after_it(store: SQLiteStore) -> None:
    sid = store.create_session().session_id
    q = WriteQueue(CountingCaller(store))
    q.submit(lambda: store.add_step(sid, user()))
    bad = q.submit(lambda: store.complete_step(sid, 42, output_data="x"))  # no step 42
    after = q.submit(lambda: store.add_step(sid, user("never")))
    with pytest.raises(StepNotFound):
        await after.future
    with pytest.raises(StepNotFound):
        await bad.future
    with pytest.raises(StepNotFound):
        await q.write(lambda: store.add_step(sid, user("never either")))  # the queue stays broken
    assert [s.input_data for s in store.steps(sid)] == ["hello"]


async def test_settle_writes_what_is_queued_at_once(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xclaw.recorder import queue

    monkeypatch.setattr(queue, "COALESCE_S", 60.0)  # a timer that would never fire in time
    sid = store.create_session().session_id
    q = WriteQueue(CountingCaller(store))
    q.submit(lambda: store.add_step(sid, user()))
    await asyncio.wait_for(q.settle(), timeout=10)  # written now, not when the timer fires
    assert len(store.steps(sid)) == 1


async def test_a_unit_is_written_once_even_when_its_batch_is_split(store: SQLiteStore) -> None:
    """Non-durable writes on the loop, then a durable one from a store thread: each row once."""
    sid = store.create_session().session_id
    caller = CountingCaller(store)
    q = WriteQueue(caller)
    q.submit(lambda: store.add_step(sid, user()))
    step = await q.write(
        lambda: store.add_step(
            sid, NewStep(StepType.SYSTEM_ALERT, "note", {}), status=StepStatus.COMPLETED
        )
    )
    assert step.display_id == "s0002"
    assert [s.display_id for s in store.steps(sid)] == ["s0001", "s0002"]


def test_pending_refuses_to_be_used_before_it_is_written() -> None:
    from xclaw.recorder.queue import Pending

    loop = asyncio.new_event_loop()
    try:
        p = Pending(
            lambda: Step("s:1", "s", 1, None, StepType.LLM_CALL, "m", StepStatus.RUNNING),
            loop.create_future(),
        )
        with pytest.raises(RuntimeError, match="before it was committed"):
            p.resolved()
        assert p.run().seq == 1 and p.resolved().seq == 1
    finally:
        loop.close()
