"""[runtime] How a run ends when it does not answer: one table from what ended it to the session
event written and what the clients are told. Adding an outcome is adding a row to OUTCOMES.

The events: stopped by the user (the session waits, Running, for the next instruction; the
record is not Failed), Failed (with an error frame naming a code of docs/protocol.md), the lease
lost (another worker drives the session now: nothing written), a shutdown (nothing written here:
`Runtime.shutdown` marks what was running interrupted, to be resumed after the restart).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from xclaw.budgets.words import words
from xclaw.errors import (
    BlobStoreUnavailable,
    BudgetReached,
    Cancelled,
    HookDenied,
    LeaseLost,
    LimitsExceeded,
    LLMError,
    StoreError,
    XclawError,
)
from xclaw.people.answered_by import CANCEL, RUN_ENDED, AnsweredBy, answer_output
from xclaw.recorder.caller import StoreCaller
from xclaw.store.base import RecordReader, StepWriter
from xclaw.store.steps.model import Status
from xclaw.store.steps.writes import BudgetStop
from xclaw.wire.build import error_frame, notice_frame, state_frame, status_frame
from xclaw.wire.shapes import ErrorJson, FrameJson

log = logging.getLogger("xclaw.runtime")

CANCEL_NOTICE = "[cancel] run stopped; the session waits for your next instruction"
WAITING_NOTICE = (
    "[store] the session waits for the object store; it goes on where it stopped once the "
    "store answers (reconnect, or send a message)"
)
# What an approval still waiting records when the run ends without its answer.
CANCELLED = answer_output(False, AnsweredBy(CANCEL))
ENDED = answer_output(False, AnsweredBy(RUN_ENDED))


class Event(Enum):
    STOPPED = "stopped by the user"  # Running, awaiting input; waiting approvals: `cancel`
    # As STOPPED, said with an error frame: a declared agent's hook stopped the turn.
    HELD = "stopped by a hook"
    FAILED = "failed"  # Failed, and an error frame; waiting approvals: `run ended`
    LEASE_LOST = "lease lost"  # nothing written: another worker drives the session now
    SHUTDOWN = "shutdown"  # nothing written here; the shutdown goes on (re-raised)
    # Running, not awaiting input (a client's reconnect or the sweep resumes it); an error
    # frame says why: the object store holding the files did not answer (nothing lost).
    WAITING = "waiting for a store"
    # Running, awaiting input, `metadata.budget` (state `budget`, not Failed): a model call
    # would have gone past a cap and was not made; a grant or a raised cap resumes it.
    BUDGET = "waiting for a budget"


@dataclass(frozen=True)
class Outcome:
    """One row: a run ended by `ended_by` (or a subclass) writes `event`."""

    ended_by: type[BaseException]
    event: Event
    code: str | None = None  # FAILED: the error frame's code (None: the error's own)
    text: str = "{message}"  # FAILED: the error frame's text ({message}, {kind}, {error})
    log: str | None = None  # logged at ERROR, with %(session)s and %(message)s
    traceback: bool = False  # the log line carries the traceback

    def error_frame(self, e: BaseException) -> ErrorJson:
        """The error frame a FAILED outcome sends (redacted whole as it is sent)."""
        code = self.code or (e.code if isinstance(e, XclawError) else "internal_error")
        return error_frame(self.text.format(**_fields(e)), code)


# First match wins: a row names a class before its base classes (Exception last).
OUTCOMES: tuple[Outcome, ...] = (
    Outcome(Cancelled, Event.STOPPED),
    Outcome(HookDenied, Event.HELD),  # hook_denied: the session waits, not Failed
    Outcome(BudgetReached, Event.BUDGET),  # budget: the session waits, not Failed
    Outcome(LimitsExceeded, Event.FAILED),  # max_iterations
    Outcome(LLMError, Event.FAILED, text="LLM call failed: {message}"),  # llm_error
    Outcome(LeaseLost, Event.LEASE_LOST),  # a write was refused: another worker drives it
    # The object store is down or slow: the session waits for it, it is not Failed.
    Outcome(
        BlobStoreUnavailable,
        Event.WAITING,
        text="{message}",
        log="event=blob_store_unavailable session=%(session)s error=%(message)r",
    ),
    # e.g. the disk is full: the record refused a write, whole (its code: disk_full, ...)
    Outcome(
        StoreError, Event.FAILED, log="event=store_error session=%(session)s error=%(message)r"
    ),
    Outcome(asyncio.CancelledError, Event.SHUTDOWN),
    Outcome(
        Exception,
        Event.FAILED,
        code="internal_error",
        text="internal error: {kind}: {error}",
        log="run of session %(session)s crashed",
        traceback=True,
    ),
)


def outcome_of(e: BaseException) -> Outcome | None:
    """The row for `e`; None: not a run's outcome (it goes on up, e.g. KeyboardInterrupt)."""
    return next((row for row in OUTCOMES if isinstance(e, row.ended_by)), None)


class Ending(Protocol):
    """What writing an outcome works with: the turn's drive (xclaw/runtime/drive.py)."""

    sid: str
    worker_id: str

    @property
    def db(self) -> StoreCaller[StepWriter]:
        """The run's writes: each carries its lease (one driver)."""
        ...

    @property
    def reader(self) -> StoreCaller[RecordReader]:
        """Reads, which need no lease."""
        ...

    @property
    def lost(self) -> str | None:
        """Why the run's lease was lost, once it was."""
        ...

    def emit(self, frame: FrameJson) -> None:
        """To every client of the session, redacted whole."""
        ...

    def lose_lease(self, why: str) -> None:
        """Another worker took the session: the run stops at once, its clients are told."""
        ...


async def end_with(e: BaseException, run: Ending) -> bool:
    """Write and say the outcome `e` ended the run with; False: it is to be raised again."""
    row = outcome_of(e)
    if row is None:
        return False
    if row.log is not None:
        fields = {"session": run.sid, "message": _fields(e)["message"]}
        log.error(row.log, fields, exc_info=e if row.traceback else None)
    if row.event is Event.STOPPED:
        await _stop(run)
    elif row.event is Event.HELD:
        await _stop(run, said=row.error_frame(e))
    elif row.event is Event.FAILED:
        await _fail(run, row.error_frame(e))
    elif row.event is Event.LEASE_LOST:
        run.lose_lease(_fields(e)["message"])
    elif row.event is Event.WAITING:
        await _wait(run, row.error_frame(e))
    elif row.event is Event.BUDGET:
        assert isinstance(e, BudgetReached)
        await _budget(run, e)
    elif row.event is Event.SHUTDOWN:
        # Stopped because the lease was lost: nothing more to write. Else a shutdown: what
        # was running stays `running` and is marked interrupted by it.
        return run.lost is not None
    return True


async def _stop(run: Ending, said: ErrorJson | None = None) -> None:
    """Stopped by the user (or, `said`, by a hook): the session waits for the next
    instruction (not Failed)."""
    db = run.db
    try:
        await db(
            db.store.mark_interrupted, run.sid, keep_approvals=False, approval_output=CANCELLED
        )
        session = await db(db.store.transition, run.sid, Status.RUNNING, awaiting_input=True)
    except LeaseLost as e:
        _lost_meanwhile(run, e)
        return
    run.emit(state_frame(session, busy=False))
    run.emit(notice_frame(CANCEL_NOTICE) if said is None else said)


async def _fail(run: Ending, error: ErrorJson) -> None:
    """Failed: what was running is marked interrupted, waiting approvals answered `run
    ended`; the status is said even when it could not be written (a full disk)."""
    db, sid = run.db, run.sid
    try:
        await db(db.store.mark_interrupted, sid, keep_approvals=False, approval_output=ENDED)
        session = await run.reader(run.reader.store.get_session, sid)
        if session.status is not Status.FAILED:
            await db(db.store.transition, sid, Status.FAILED)
    except LeaseLost as e:
        _lost_meanwhile(run, e)
        return
    except StoreError as e:  # still cannot write (a full disk): it resumes once it can
        log.error("could not mark session %s failed: %s", sid, e.message)
    except Exception:
        log.exception("could not mark session %s failed", sid)
    run.emit(status_frame(Status.FAILED))
    run.emit(error)


async def _wait(run: Ending, error: ErrorJson) -> None:
    """A store the run needs did not answer: what was running is marked interrupted (to be
    settled on resume, as after a crash) and the session stays Running, not awaiting input,
    so the next reconnect or sweep resumes it once the store is back."""
    db, sid = run.db, run.sid
    try:
        await db(db.store.mark_interrupted, sid, keep_approvals=True)
    except LeaseLost as e:
        _lost_meanwhile(run, e)
        return
    except StoreError as e:
        log.error("could not mark the steps of session %s interrupted: %s", sid, e.message)
    run.emit(error)
    run.emit(notice_frame(WAITING_NOTICE))


async def _budget(run: Ending, e: BudgetReached) -> None:
    """A call would have gone past a cap: what was running (a sub-agent's spawn_agent) is
    marked interrupted, to be continued, and the session waits in state `budget` with
    which cap, what was spent and what is left — durably before anyone is told."""
    db, sid = run.db, run.sid
    try:
        await db(db.store.mark_interrupted, sid, keep_approvals=True)
        await db(db.store.write, BudgetStop(session_id=sid, detail=e.detail))
        session = await run.reader(run.reader.store.get_session, sid)
    except LeaseLost as lost:
        _lost_meanwhile(run, lost)
        return
    run.emit(state_frame(session, busy=False))
    run.emit(notice_frame(budget_notice(e.detail)))


def budget_notice(detail: dict[str, Any]) -> str:
    return (
        f"[budget] stopped before a model call: {words(detail)}; the session goes on where it "
        "stopped after a grant or a raised cap (xclaw budget grant)"
    )


def _lost_meanwhile(run: Ending, e: LeaseLost) -> None:
    """Another worker took the session while the outcome was written: it says the rest."""
    log.warning(
        "event=lease_lost session=%s worker=%s reason=%r", run.sid, run.worker_id, e.message
    )


def _fields(e: BaseException) -> dict[str, str]:
    message = e.message if isinstance(e, XclawError) else str(e)
    return {"message": message, "kind": type(e).__name__, "error": str(e)}
