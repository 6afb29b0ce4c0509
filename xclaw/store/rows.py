"""Row <-> value conversion shared by both backends: column lists, JSON text, enum lookups.

The column lists follow the field order of Session and Step so a row converts with one call
and no per-column dictionary work (resume loads 100,000 rows).
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
from xclaw.store.model import (
    Session,
    SessionEvent,
    Status,
    Step,
    StepStatus,
    StepType,
    next_status,
    waiting_after,
)

SESSION_COLS = (
    "session_id, title, current_status, created_at, updated_at, metadata, is_forked, "
    "parent_session_id, awaiting_input, forked_from_seq"
)
STEP_COLS = (
    "step_id, session_id, seq, parent_step_id, step_type, name, status, agent, call_id, "
    "input_data, output_data, error_message, start_time, end_time, token_usage_prompt, "
    "token_usage_completion"
)

STATUS_BY_VALUE = {s.value: s for s in Status}
_STEP_TYPE = {t.value: t for t in StepType}
_STEP_STATUS = {s.value: s for s in StepStatus}
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


def row_to_session(r: tuple[Any, ...]) -> Session:
    meta = load_json(r[5])
    return Session(
        r[0],
        r[1],
        STATUS_BY_VALUE[r[2]],
        r[3],
        r[4],
        meta if isinstance(meta, dict) else {},
        bool(r[6]),
        r[7],
        bool(r[8]),
        r[9],
    )


# STEP_COLS with output_data left out: for a completion, whose output the caller just gave us.
STEP_COLS_NO_OUTPUT = STEP_COLS.replace("output_data", "NULL")


def row_to_step(r: tuple[Any, ...], output: Any = None) -> Step:
    """`output` stands in for a NULL output column (see STEP_COLS_NO_OUTPUT)."""
    return Step(
        r[0],
        r[1],
        r[2],
        r[3],
        _STEP_TYPE[r[4]],
        r[5],
        _STEP_STATUS[r[6]],
        r[7],
        r[8],
        load_json(r[9]),
        output if r[10] is None else load_json(r[10]),
        r[11],
        r[12],
        r[13],
        r[14],  # NULL: the provider reported no count (unknown, never 0)
        r[15],
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
    cannot import dialect.py (which imports it), and postgres_rows.py makes PostgreSQL's."""
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
