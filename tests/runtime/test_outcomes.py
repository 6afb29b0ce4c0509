"""The outcome table: each way a run can end, written to a real SQLite record of a run that
was waiting for an approval with a tool call in flight — the session's status after, what the
waiting approval and the running call record, and the frames the clients are told."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from xclaw.errors import (
    Cancelled,
    DiskFull,
    LeaseLost,
    LimitsExceeded,
    LLMError,
    StoreError,
)
from xclaw.recorder.caller import StoreCaller
from xclaw.runtime.outcomes import CANCEL_NOTICE, OUTCOMES, Event, end_with, outcome_of
from xclaw.store import open_store
from xclaw.store.base import RecordReader, StepWriter, Store
from xclaw.store.steps.model import INTERRUPTED, NewStep, Status, StepStatus, StepType
from xclaw.store.steps.writes import AddStep, BeginStep


@dataclass
class FakeRun:
    """What writing an outcome works with (outcomes.Ending), on a real store."""

    sid: str
    db: StoreCaller[StepWriter]
    reader: StoreCaller[RecordReader]
    worker_id: str = "w1"
    lost: str | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    lost_why: list[str] = field(default_factory=list)

    def emit(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)

    def lose_lease(self, why: str) -> None:
        self.lost_why.append(why)
        self.lost = why


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(str(tmp_path / "xclaw.db"))
    yield s
    s.close()


def waiting_run(store: Store) -> FakeRun:
    """A session Paused on an approval, a tool call of the same turn still running."""
    sid = store.record.create_session().session_id
    store.record.write(
        AddStep(
            session_id=sid,
            step=NewStep(step_type=StepType.USER_INPUT, name="user", input_data="go"),
        )
    )
    tool = NewStep(step_type=StepType.TOOL_CALL, name="shell", input_data={}, call_id="c0")
    store.record.write(BeginStep(session_id=sid, step=tool))
    ask = NewStep(step_type=StepType.SYSTEM_ALERT, name="approval", input_data={}, call_id="c1")
    store.record.write(BeginStep(session_id=sid, step=ask))
    assert store.record.get_session(sid).status is Status.PAUSED
    return FakeRun(sid, StoreCaller(store.record), StoreCaller(store.record))


FAILED = {"type": "status", "status": "Failed"}


def error(content: str, code: str) -> dict[str, Any]:
    return {"type": "error", "content": content, "code": code}


@dataclass
class Row:
    error: BaseException
    handled: bool  # False: raised again
    status: Status
    awaiting_input: bool = False
    answered_by: str | None = None  # the waiting approval's `by` kind; None: still waiting
    frames: list[dict[str, Any]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


STOPPED_STATUS = {
    "type": "status",
    "status": "Running",
    "awaitingInput": True,
    "busy": False,
    "state": "waiting",
    "stateText": "Waiting for your instruction",
}

ROWS = {
    "stopped by the user": Row(
        Cancelled(),
        True,
        Status.RUNNING,
        awaiting_input=True,
        answered_by="cancel",
        frames=[STOPPED_STATUS, {"type": "notice", "content": CANCEL_NOTICE}],
    ),
    "max_iterations": Row(
        LimitsExceeded("stopped after 3 iterations"),
        True,
        Status.FAILED,
        answered_by="run_ended",
        frames=[FAILED, error("stopped after 3 iterations", "max_iterations")],
    ),
    "llm_error": Row(
        LLMError("429 rate limited"),
        True,
        Status.FAILED,
        answered_by="run_ended",
        frames=[FAILED, error("LLM call failed: 429 rate limited", "llm_error")],
    ),
    "lease lost": Row(
        LeaseLost("fencing token 3 is stale"),
        True,
        Status.PAUSED,
        lost=["fencing token 3 is stale"],
    ),
    "a full disk: its own code": Row(
        DiskFull("database or disk is full"),
        True,
        Status.FAILED,
        answered_by="run_ended",
        frames=[FAILED, error("database or disk is full", "disk_full")],
    ),
    "store_error": Row(
        StoreError("the record refused a write"),
        True,
        Status.FAILED,
        answered_by="run_ended",
        frames=[FAILED, error("the record refused a write", "store_error")],
    ),
    "shutdown: nothing written, raised again": Row(asyncio.CancelledError(), False, Status.PAUSED),
    "internal_error": Row(
        KeyError("x"),
        True,
        Status.FAILED,
        answered_by="run_ended",
        frames=[FAILED, error("internal error: KeyError: 'x'", "internal_error")],
    ),
    "not an outcome: raised again": Row(KeyboardInterrupt(), False, Status.PAUSED),
}


@pytest.mark.parametrize("name", list(ROWS))
async def test_each_outcome_writes_its_event_and_says_it(name: str, store: Store) -> None:
    row = ROWS[name]
    run = waiting_run(store)
    assert await end_with(row.error, run) is row.handled
    session = store.record.get_session(run.sid)
    assert (session.status, session.awaiting_input) == (row.status, row.awaiting_input)
    steps = {s.call_id: s for s in store.record.steps(run.sid) if s.call_id}
    approval, call = steps["c1"], steps["c0"]
    if row.answered_by is None:  # nothing written: both still running, for the next start
        assert approval.status is call.status is StepStatus.RUNNING
    else:
        assert call.error_message == INTERRUPTED  # kept, marked (nothing lost)
        assert approval.output_data["approved"] is False
        assert approval.output_data["by"]["kind"] == row.answered_by
    assert run.frames == row.frames
    assert run.lost_why == row.lost


async def test_a_shutdown_after_the_lease_was_lost_ends_quietly(store: Store) -> None:
    """The run was cancelled because another worker took the session: nothing to write,
    nothing to raise."""
    run = waiting_run(store)
    run.lost = "taken over"
    assert await end_with(asyncio.CancelledError(), run) is True
    assert run.frames == [] and store.record.get_session(run.sid).status is Status.PAUSED


def test_every_row_is_reachable() -> None:
    """First match wins: a row after one for its base class would never be used."""
    for i, row in enumerate(OUTCOMES):
        earlier = [r.ended_by for r in OUTCOMES[:i]]
        assert not any(issubclass(row.ended_by, e) for e in earlier), row
    assert outcome_of(DiskFull("x")) is outcome_of(StoreError("x"))
    assert {row.event for row in OUTCOMES} == set(Event)


async def test_an_outcome_meets_a_lease_taken_meanwhile_and_writes_nothing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Another worker took the session while the run ended: its writes are refused whole,
    the clients are told nothing by this worker (the new driver speaks), it is logged."""
    run = waiting_run(store)
    stale = store.leases.acquire_lease(run.sid, "w1", 0.05)
    assert stale is not None
    for _ in range(3000):  # until it expired by the store's own clock
        if not store.leases.lease_info(run.sid).live:
            break
        await asyncio.sleep(0.01)
    assert store.leases.acquire_lease(run.sid, "w2", 30) is not None
    run.db = StoreCaller(store.leases.driven(stale))
    for e in (Cancelled(), LLMError("boom")):
        assert await end_with(e, run) is True
        assert run.frames == [] and store.record.get_session(run.sid).status is Status.PAUSED
    assert sum("event=lease_lost" in r.getMessage() for r in caplog.records) == 2


async def test_a_store_error_and_a_crash_are_logged_with_the_session(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    run = waiting_run(store)
    await end_with(DiskFull("database or disk is full"), run)
    try:
        raise KeyError("x")
    except KeyError as e:
        await end_with(e, run)
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert (f"event=store_error session={run.sid} error='database or disk is full'", False) in lines
    assert (f"run of session {run.sid} crashed", True) in lines
