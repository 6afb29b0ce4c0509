"""[store/steps] Row <-> value conversion shared by both backends: the two tables as their row
values declare them (`SESSIONS`, `STEPS`: store/steps/columns.py), JSON text, in-transaction
lookups.

The select lists follow the declaration so a row converts with one generated call and no
per-column dictionary work (resume loads 100,000 rows).
"""

from __future__ import annotations

import json
import math
import re
import secrets
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Protocol

from xclaw.errors import SessionNotFound, StepNotFound
from xclaw.store.steps.columns import Table
from xclaw.store.steps.model import (
    Completion,
    Session,
    SessionEvent,
    Status,
    Step,
    next_status,
    waiting_after,
)

STATUS_BY_VALUE = {s.value: s for s in Status}
_loads = json.loads
# typeshed leaves out the decoder attribute json itself uses (set in JSONDecoder.__init__).
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# allow_nan=False: Python would write NaN / Infinity, which is not JSON (SQLite's json_valid
# says 0, PostgreSQL refuses the row); dump_json writes them as null instead.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_NON_FINITE_KEYS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dump_json(value: Any, what: str) -> str | None:
    """JSON text for a JSON column (compact, UTF-8 as is); None stays SQL NULL. A float that
    is not finite (a model's `NaN` argument, a tool's computed infinity) is written as null,
    as JavaScript's JSON.stringify and the gateway's frames do: the row is still recorded."""
    if value is None:
        return None
    try:
        return _encode(value)
    except TypeError as e:
        raise ValueError(f"{what} must be JSON-serialisable: {e}") from e
    except ValueError as first:  # a non-finite float, or a circular reference
        try:
            return _encode(_finite(value))
        except (TypeError, ValueError, RecursionError):  # RecursionError: the cycle
            raise ValueError(f"{what} must be JSON-serialisable: {first}") from first


def _finite(value: Any) -> Any:
    """`value` with every non-finite float as None (as a dict key: the text Python gives it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            _NON_FINITE_KEYS[repr(k)]
            if isinstance(k, float) and not math.isfinite(k)
            else k: _finite(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(value: Any) -> Any:
    """JSON-like data with every lone surrogate (legal in JSON as `\\ud800`, not encodable as
    UTF-8) replaced by U+FFFD, so that what the store keeps and what clients are sent agree.
    json.loads already joins a valid escaped pair into one character."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {valid_unicode(k): valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_unicode(v) for v in value]
    return value


def load_json(text: str | None) -> Any:
    """Decode a JSON column. Our own compact text goes straight to the C scanner (2-3x faster
    than json.loads on small values, which matters when resume loads 100,000 rows); anything
    else (surrounding whitespace, invalid text) takes the strict json.loads path."""
    if text is None:
        return None
    try:
        value, end = _scan(text, 0)
        if end == len(text):
            return value
    except StopIteration:
        pass
    return _loads(text)


def new_session_id() -> str:
    """>= 96 random bits that pass check_session_id: token_urlsafe may start with '-' or
    '_' (1 in 32), which a command line would take for an option."""
    while True:
        sid = secrets.token_urlsafe(16)
        if sid[0].isalnum():
            return sid


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise ValueError(
            f"invalid session id {session_id!r}: use 1-128 characters from A-Z a-z 0-9 . _ -, "
            "starting with a letter or digit (no ':')"
        )
    return session_id


# The two tables of the record, as Session and Step declare their columns.
SESSIONS = Table("sessions", Session, load=load_json)
STEPS = Table("traces", Step, load=load_json)
SESSION_COLS = SESSIONS.select
STEP_COLS = STEPS.select
row_to_session = SESSIONS.from_row
row_to_step = STEPS.from_row
# STEP_COLS with output_data read as NULL: for a completion, whose output the caller just
# gave us (row_to_finished_step(row, output)).
STEP_COLS_NO_OUTPUT = STEPS.select_without("output_data")
row_to_finished_step = STEPS.from_row_given("output_data")
# A completion: the columns model.Completion names, and the end time (shared `?` style; each
# backend adds its fence and RETURNING).
FINISH_COLUMNS, _FINISH_SET = STEPS.assignments(Completion)
FINISH_STEP = (
    f"UPDATE traces SET {_FINISH_SET}, end_time=? WHERE session_id=? AND seq=? AND status='running'"
)
# An LLM call's budget hold rides in its step's row (migration 12, store/budgets/sql.py): its
# columns, given after the writing worker in the step's INSERT; its settlement, what it cost,
# set by the completion's UPDATE (the row is running: its hold is not settled yet).
HOLD_COLUMNS = ("held_tokens", "held_usd", "hold_owner", "hold_day")
FINISH_STEP_SPENT = (
    f"UPDATE traces SET {_FINISH_SET}, end_time=?, spent_tokens=?, spent_usd=?"
    " WHERE session_id=? AND seq=? AND status='running'"
)


# --- lookups used inside transactions ---------------------------------------------------------


def session_state(conn: sqlite3.Connection, session_id: str) -> tuple[Status, int, int]:
    """(status, next_seq, awaiting_input) of a session; SessionNotFound if there is none."""
    row = conn.execute(
        "SELECT current_status, next_seq, awaiting_input FROM sessions WHERE session_id=?",
        (session_id,),
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return STATUS_BY_VALUE[row[0]], row[1], row[2]


_WRITE_STATUS_SQL = (
    "UPDATE sessions SET current_status=?, awaiting_input=coalesce(?, awaiting_input), "
    "next_seq=coalesce(?, next_seq), updated_at=? WHERE session_id=?"
)


def write_status(
    conn: sqlite3.Connection,
    session_id: str,
    current: Status,
    event: SessionEvent | None,
    now: int,
    *,
    next_seq: int | None = None,
    instruction: bool = False,
) -> Status:
    """The one write of a session's status on SQLite (checked transitions): the status
    `model.next_status` gives for `event` (None: it stays), the awaiting_input flag
    `model.waiting_after` gives, and, for a new step, the next sequence number. An illegal
    move raises IllegalTransition before anything is written."""
    target = current if event is None else next_status(current, event)
    waiting = waiting_after(event, instruction=instruction)
    conn.execute(
        _WRITE_STATUS_SQL,
        (target.value, None if waiting is None else int(waiting), next_seq, now, session_id),
    )
    return target


_SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id=?"
_STEP_EXISTS = "SELECT 1 FROM traces WHERE session_id=? AND seq=?"


class RequireSession(Protocol):
    def __call__(self, conn: Any, session_id: str, /) -> None: ...


class RequireStep(Protocol):
    def __call__(self, conn: Any, session_id: str, seq: int, ref: object, /) -> None: ...


def existence_checks(sql: Callable[[str], str]) -> tuple[RequireSession, RequireStep]:
    """require_session and require_step for one backend, from one SQL text in the shared
    `?` style (dialect.py) put into the backend's style by `sql`. Made here, once: rows.py
    cannot import dialect.py (which imports it), and store/postgres/rows.py makes PostgreSQL's."""
    session_sql, step_sql = sql(_SESSION_EXISTS), sql(_STEP_EXISTS)

    def require_session(conn: Any, session_id: str, /) -> None:
        """SessionNotFound unless the session exists."""
        if conn.execute(session_sql, (session_id,)).fetchone() is None:
            raise SessionNotFound(session_id)

    def require_step(conn: Any, session_id: str, seq: int, ref: object, /) -> None:
        """The step exists in this session: else StepNotFound (or SessionNotFound), never a
        no-op."""
        if conn.execute(step_sql, (session_id, seq)).fetchone() is None:
            require_session(conn, session_id)
            raise StepNotFound(str(ref), session_id)

    return require_session, require_step


# SQLite's: the shared text is already in its parameter style.
require_session, require_step = existence_checks(str)
