"""[store/postgres] Values in and out of PostgreSQL for PostgresStore: JSON text for jsonb, NUL-free
text, the in-transaction lookups (with the session row locked where a write follows) and step
checks.

Rows convert with the shared converters of store/steps/rows.py (same column lists, jsonb read back as
its text), so both backends give byte-for-byte the same values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pgerr

from xclaw.errors import SessionNotFound
from xclaw.store.dialect import Dialect, to_postgres
from xclaw.store.leases import Lease, check_lease_for, lease_lost
from xclaw.store.steps.model import SessionEvent, Status, next_status, waiting_after
from xclaw.store.steps.rows import dump_json, existence_checks

_STATUS = {s.value: s for s in Status}

# PostgreSQL text (and jsonb strings) cannot hold NUL. A tool's output sometimes does (binary
# junk on stdout): it is stored as U+FFFD, the usual stand-in for an undecodable character.
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
NUL_STAND_IN = "\ufffd"

# The lease clock: the database server's, so workers on several hosts agree on expiry.
NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

LOCK_BLOBS = 0x78636C03  # advisory lock: shared by snapshot savers, exclusive for sweeps


def pg_json(value: Any, what: str) -> str | None:
    text = dump_json(value, what)
    if text is not None and "\\u0000" in text:
        text = _JSON_NUL.sub(lambda m: m.group(1) + NUL_STAND_IN, text)
    return text


def pg_text(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        return value.replace("\x00", NUL_STAND_IN)
    return value


def lock_session(
    conn: psycopg.Connection, session_id: str, lease: Lease | None = None
) -> tuple[Status, int, int]:
    """(status, next_seq, awaiting_input) with the session row locked until commit, so seq
    allocation, status moves and the fence check see no concurrent writer. With a lease, its
    fencing token must still be the session's (else LeaseLost, nothing written)."""
    check_lease_for(lease, session_id)
    row = conn.execute(
        "SELECT current_status, next_seq, awaiting_input, lease_token, lease_owner "
        "FROM sessions WHERE session_id=%s FOR UPDATE"
        if lease is not None
        else "SELECT current_status, next_seq, awaiting_input FROM sessions "
        "WHERE session_id=%s FOR UPDATE",
        (session_id,),
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    if lease is not None and row[3] != lease.token:
        raise lease_lost(session_id, lease, row[3], row[4])
    return _STATUS[row[0]], row[1], row[2]


_WRITE_STATUS_SQL = """
UPDATE sessions SET current_status=%(target)s,
       awaiting_input=coalesce(%(waiting)s, awaiting_input),
       next_seq=coalesce(%(next_seq)s, next_seq), updated_at=%(now)s
WHERE session_id=%(sid)s
"""


def write_status(
    conn: psycopg.Connection,
    session_id: str,
    current: Status,
    event: SessionEvent | None,
    now: int,
    *,
    next_seq: int | None = None,
    instruction: bool = False,
    with_step: tuple[str, dict[str, Any]] | None = None,
) -> Status:
    """The one write of a session's status on PostgreSQL (checked transitions): the status
    `model.next_status` gives for `event` (None: it stays), the awaiting_input flag
    `model.waiting_after` gives, and, for a new step, the next sequence number. `with_step`
    (a `WITH step AS (INSERT ...)` clause and its parameters) inserts the step in the same
    statement: one round trip per step. An illegal move raises IllegalTransition before
    anything is sent."""
    target = current if event is None else next_status(current, event)
    waiting = waiting_after(event, instruction=instruction)
    prefix, params = with_step or ("", {})
    conn.execute(
        prefix + _WRITE_STATUS_SQL,
        {
            **params,
            "target": target.value,
            "waiting": None if waiting is None else int(waiting),
            "next_seq": next_seq,
            "now": now,
            "sid": session_id,
        },
    )
    return target


# PostgreSQL's, from the same text as SQLite's (rows.existence_checks).
require_session, require_step = existence_checks(to_postgres)


def share_session(conn: psycopg.Connection, session_id: str) -> None:
    """The session row held (FOR SHARE) until commit, so it cannot be deleted meanwhile."""
    if (
        conn.execute(
            "SELECT 1 FROM sessions WHERE session_id=%s FOR SHARE", (session_id,)
        ).fetchone()
        is None
    ):
        require_session(conn, session_id)


def lock_blobs(conn: psycopg.Connection, exclusive: bool) -> None:
    """Sweeps exclusive, snapshot saves shared: a sweep never lands between a save's check
    that its contents are stored and its commit."""
    if exclusive:
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_BLOBS,))
    else:
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s, 0)", (LOCK_BLOBS,))


def _any_of(column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    if values:
        yield f"{column} = ANY(?)", (list(values),)


def _executemany(conn: psycopg.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(sql, rows)


_REFERENCED = """
    SELECT j.value->>'hash' FROM snapshots AS s, jsonb_each(s.manifest) AS j
     WHERE j.value->>'hash' IS NOT NULL{snapshots}
    UNION
    SELECT j.value->>'hash' FROM workspace_restores AS r, jsonb_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND j.value->>'hash' IS NOT NULL{restores}
    UNION
    SELECT i.value->>'hash' FROM traces AS t, jsonb_array_elements(t.output_data->'images') AS i
     WHERE t.step_type = 'tool_call' AND jsonb_typeof(t.output_data) = 'object'
       AND jsonb_typeof(t.output_data->'images') = 'array' AND i.value->>'hash' IS NOT NULL{steps}
"""

POSTGRES = Dialect(
    name="postgres",
    sql=to_postgres,
    json=pg_json,
    text=pg_text,
    lock_session=lock_session,
    share_session=share_session,
    require_session=require_session,
    require_step=require_step,
    write_status=write_status,
    lock_blobs=lock_blobs,
    referenced_hashes=_REFERENCED,
    any_of=_any_of,
    in_ids=lambda column, ids: (f"{column} = ANY(?)", list(ids)),
    executemany=_executemany,
    savepoint=lambda conn: conn.transaction(),
    unique_violation=(pgerr.UniqueViolation,),
    free_read_snapshots=False,
    session_tiebreak="session_id",
)
