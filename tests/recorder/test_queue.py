"""The recorder's ordered write queue: order kept, one thread hop per batch, a failure stops
everything queued after it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.queue import WriteQueue, step_id_of
from xclaw.store.model import Step, StepStatus, StepType


class CountingCaller(StoreCaller):
    def __init__(self) -> None:
        super().__init__(store=None)  # type: ignore[arg-type]
        self.hops = 0
        self.threads: set[int] = set()

    async def __call__(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.hops += 1

        def run() -> Any:
            self.threads.add(threading.get_ident())
            return fn(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(None, run)


def step(seq: int, parent: str | None = None) -> Step:
    return Step(f"s:{seq}", "s", seq, parent, StepType.LLM_CALL, "m", StepStatus.RUNNING)


async def test_queued_writes_keep_their_order_and_share_one_hop() -> None:
    caller = CountingCaller()
    q = WriteQueue(caller)
    order: list[int] = []
    frames: list[int] = []
    first = q.submit(lambda: (order.append(1), step(1))[1], lambda s: frames.append(s.seq))
    # The second write refers to the first, which commits in the same batch.
    second = q.submit(lambda: (order.append(2), step(2, step_id_of(first)))[1], lambda s: frames.append(s.seq))
    third = await q.write(lambda: (order.append(3), step(3))[1])
    assert order == [1, 2, 3] and third.seq == 3
    assert (await second.future).parent_step_id == "s:1"
    assert caller.hops == 1 and threading.get_ident() not in caller.threads
    await asyncio.sleep(0)
    assert frames == [1, 2]


async def test_a_failed_write_fails_everything_after_it() -> None:
    q = WriteQueue(CountingCaller())

    def boom() -> Step:
        raise RuntimeError("lease lost")

    q.submit(lambda: step(1))
    bad = q.submit(boom)
    after = q.submit(lambda: step(3))
    with pytest.raises(RuntimeError, match="lease lost"):
        await after.future
    with pytest.raises(RuntimeError):
        await bad.future
    with pytest.raises(RuntimeError, match="lease lost"):
        await q.write(lambda: step(4))  # the queue stays broken: nothing out of order


async def test_settle_waits_for_unawaited_writes() -> None:
    q = WriteQueue(CountingCaller())
    done: list[int] = []
    q.submit(lambda: (done.append(1), step(1))[1])
    await q.settle()
    assert done == [1]
