"""[store] What the SQL of the two backends differs in, as one small value: `Dialect`.

The transaction bodies both backends share (time travel, snapshots, import, fsck repairs) are
written once, in one SQL text, and run on either connection through their dialect. The text
uses `?` for a parameter and `:name` for a named one; a parameter may carry a PostgreSQL cast
(`?::jsonb`, `:new::text`), which PostgreSQL needs to type a parameter and SQLite does not
take, so `Dialect.sql` drops it there. Everything else the backends differ in is a field:
how a session is locked and fenced (`SELECT ... FOR UPDATE` vs the single SQLite writer), the
blob lock, the JSON walk of the blob sweep, `IN` lists, values PostgreSQL text cannot hold.

SQLITE is defined here; POSTGRES in store/postgres/rows.py, so that SQLite-only installs never
import psycopg.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from xclaw.store.leases import Lease
from xclaw.store.sqlite.leases import check_fence
from xclaw.store.steps.columns import text_as_is
from xclaw.store.steps.model import SessionEvent, Status
from xclaw.store.steps.rows import (
    dump_json,
    require_session,
    require_step,
    session_state,
    write_status,
)


class Cursor(Protocol):
    """The part of a DB-API cursor the shared bodies use (sqlite3 and psycopg alike)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Sequence[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside a transaction (sqlite3.Connection, psycopg.Connection)."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


class WriteStatus(Protocol):
    """rows.write_status / postgres.rows.write_status: the one status write of a backend."""

    def __call__(
        self,
        conn: Any,
        session_id: str,
        current: Status,
        event: SessionEvent | None,
        now: int,
        *,
        next_seq: int | None = None,
        instruction: bool = False,
    ) -> Status: ...


# A parameter of the shared text: `?` or `:name`, with an optional PostgreSQL cast after it.
# A string literal is matched first (group 4) and left as it is: `':s'` or `'?'` inside quotes
# are text, not parameters.
_PARAM = re.compile(r"\?(::\w+)?|(?<![:\w]):([A-Za-z_]\w*)(::\w+)?|('(?:[^']|'')*')")


@lru_cache(maxsize=256)
def to_sqlite(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(4) is not None:
            return m.group(4)
        return "?" if m.group(2) is None else ":" + m.group(2)

    return _PARAM.sub(sub, text)


@lru_cache(maxsize=256)
def to_postgres(text: str) -> str:
    if "%" in text:
        # psycopg reads % as a parameter; the shared text has no literal %, by this rule.
        raise ValueError(f"shared SQL may not hold '%': {text!r}")

    def sub(m: re.Match[str]) -> str:
        if m.group(4) is not None:
            return m.group(4)
        if m.group(2) is None:
            return "%s" + (m.group(1) or "")
        return f"%({m.group(2)})s" + (m.group(3) or "")

    return _PARAM.sub(sub, text)


@dataclass(frozen=True, slots=True)
class Dialect:
    """One backend's SQL differences; the shared bodies ask it, never `if sqlite:`."""

    name: str
    # The shared text in this backend's parameter style (cached per text).
    sql: Callable[[str], str]
    # JSON column text of a value (None: NULL); PostgreSQL also replaces NUL, which it refuses.
    json: Callable[[Any, str], str | None]
    # A text value as this backend can store it (PostgreSQL text cannot hold NUL).
    text: Callable[[str | None], str | None]
    # (status, next_seq, awaiting_input) of a session, locked for this transaction where the
    # backend has concurrent writers, and the lease's fencing token checked (LeaseLost).
    lock_session: Callable[[Any, str, Lease | None], tuple[Status, int, int]]
    # The session row held against deletion while a snapshot is saved (SessionNotFound).
    share_session: Callable[[Any, str], None]
    # SessionNotFound unless the session exists; StepNotFound unless the step does too.
    require_session: Callable[[Any, str], None]
    require_step: Callable[[Any, str, int, object], None]
    write_status: WriteStatus
    # Held by sweeps (exclusive) and snapshot saves (shared) where sweeps run concurrently.
    lock_blobs: Callable[[Any, bool], None]
    # A SELECT of every blob hash something still names; `{snapshots}`, `{restores}` and
    # `{steps}` are where a caller adds conditions on s.session_id, r.session_id, t.session_id.
    referenced_hashes: str
    # `col IN (...)` over values, as (condition, params) pieces small enough to bind.
    any_of: Callable[[str, Sequence[Any]], Iterator[tuple[str, tuple[Any, ...]]]]
    # `col IN <the ids>` as one condition with one parameter (the ids in one value).
    in_ids: Callable[[str, Sequence[str]], tuple[str, Any]]
    # Rows of one statement inserted in one call.
    executemany: Callable[[Any, str, Sequence[Sequence[Any]]], None]
    # Statements whose unique violation should not abort the whole transaction.
    savepoint: Callable[[Any], AbstractContextManager[Any]]
    # Errors of a unique constraint.
    unique_violation: tuple[type[BaseException], ...]
    # Whether a read transaction is free (SQLite: a local lock; PostgreSQL: round trips), so
    # reads of several statements take one only where it costs nothing.
    free_read_snapshots: bool
    # The last key of list_sessions' order, for sessions updated and created in one
    # millisecond: SQLite's rowid (insertion order); PostgreSQL has none, so the id.
    session_tiebreak: str


# --- SQLite -----------------------------------------------------------------------------------

_IN_CHUNK = 500  # bound parameters per IN (...) list


def _sqlite_any_of(column: str, values: Sequence[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    for i in range(0, len(values), _IN_CHUNK):
        part = tuple(values[i : i + _IN_CHUNK])
        yield f"{column} IN ({','.join('?' * len(part))})", part


def _sqlite_lock_session(
    conn: Any, session_id: str, lease: Lease | None
) -> tuple[Status, int, int]:
    """The single writer is the lock: only the fence needs checking."""
    check_fence(conn, session_id, lease)
    return session_state(conn, session_id)


def _sqlite_executemany(conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    conn.executemany(sql, rows)


# Mark and sweep in one statement: every hash named by a snapshot row (whole or delta: each
# content of a reconstructed state was added by some row of its chain), by a pending restore,
# or by a tool step's images (view_file: the step keeps their hashes, docs/storage.md).
_SQLITE_REFERENCED = """
    SELECT json_extract(j.value, '$.hash') FROM snapshots AS s, json_each(s.manifest) AS j
     WHERE json_extract(j.value, '$.hash') IS NOT NULL{snapshots}
    UNION
    SELECT json_extract(j.value, '$.hash') FROM workspace_restores AS r, json_each(r.manifest) AS j
     WHERE r.manifest IS NOT NULL AND json_extract(j.value, '$.hash') IS NOT NULL{restores}
    UNION
    SELECT json_extract(j.value, '$.hash') FROM traces AS t, json_each(t.output_data, '$.images') AS j
     WHERE t.step_type = 'tool_call' AND t.output_data LIKE '{{%"images"%'
       AND json_extract(j.value, '$.hash') IS NOT NULL{steps}
"""

SQLITE = Dialect(
    name="sqlite",
    sql=to_sqlite,
    json=dump_json,
    text=text_as_is,
    lock_session=_sqlite_lock_session,
    share_session=require_session,
    require_session=require_session,
    require_step=require_step,
    write_status=write_status,
    lock_blobs=lambda conn, exclusive: None,  # the writer runs one transaction at a time
    referenced_hashes=_SQLITE_REFERENCED,
    any_of=_sqlite_any_of,
    in_ids=lambda column, ids: (
        f"{column} IN (SELECT value FROM json_each(?))",
        json.dumps(list(ids)),
    ),
    executemany=_sqlite_executemany,
    savepoint=lambda conn: nullcontext(),
    unique_violation=(),
    free_read_snapshots=True,
    session_tiebreak="rowid",
)
