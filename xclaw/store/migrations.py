"""Numbered, append-only schema migrations, one list for every backend.

Each migration has a version, a name, a comment saying why, and its SQL per backend (the
PostgreSQL text is written by the PostgreSQL backend; the numbering is shared). A migration is
applied atomically together with its `schema_version` record, so a crash mid-upgrade leaves the
database at the previous version, never half-way. Never edit an applied migration: append one.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from xclaw.errors import StoreError


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    why: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...] = ()  # filled in by the PostgreSQL backend; same numbering


_STATUS_WORDS = "'Init','Running','Paused','Success','Failed'"
_STEP_TYPES = "'llm_call','tool_call','user_input','system_alert'"
_STEP_STATUSES = "'running','completed','failed'"

# m001: every column of the seed's two tables with its meaning and both of its indexes, so the
# seed's own SQL reads the data; plus what the design needs.
M001_SQLITE = (
    f"""
    CREATE TABLE sessions (
        session_id        TEXT PRIMARY KEY,
        title             TEXT NOT NULL,
        current_status    TEXT NOT NULL CHECK (current_status IN ({_STATUS_WORDS})),
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        metadata          TEXT,
        is_forked         INTEGER DEFAULT 0 CHECK (is_forked IN (0, 1)),
        parent_session_id TEXT,
        -- next step sequence number: ids are never reused, even after rollback
        next_seq          INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
        -- set by rollback: Running, but waiting for a new instruction (no auto-resume)
        awaiting_input    INTEGER NOT NULL DEFAULT 0 CHECK (awaiting_input IN (0, 1)),
        -- the fork point in the parent session
        forked_from_seq   INTEGER,
        FOREIGN KEY (parent_session_id) REFERENCES sessions(session_id) ON DELETE SET NULL
    )
    """,
    f"""
    CREATE TABLE traces (
        step_id                TEXT PRIMARY KEY,
        session_id             TEXT NOT NULL,
        parent_step_id         TEXT,
        step_type              TEXT NOT NULL CHECK (step_type IN ({_STEP_TYPES})),
        name                   TEXT NOT NULL,
        status                 TEXT NOT NULL CHECK (status IN ({_STEP_STATUSES})),
        input_data             TEXT,
        output_data            TEXT,
        error_message          TEXT,
        start_time             INTEGER NOT NULL,
        end_time               INTEGER,
        token_usage_prompt     INTEGER DEFAULT 0,
        token_usage_completion INTEGER DEFAULT 0,
        -- per-session sequence number: s0005 is seq 5; all ordering is by seq, never by time
        seq                    INTEGER NOT NULL CHECK (seq >= 1),
        -- which agent of the session took the step ('main' or a sub-agent's name)
        agent                  TEXT NOT NULL DEFAULT 'main',
        -- the provider's tool-call id: pairs a tool_call / approval with its assistant message
        call_id                TEXT,
        UNIQUE (session_id, seq),
        FOREIGN KEY (session_id)     REFERENCES sessions(session_id) ON DELETE CASCADE,
        FOREIGN KEY (parent_step_id) REFERENCES traces(step_id) ON DELETE SET NULL
    )
    """,
    "CREATE INDEX idx_traces_session_time ON traces(session_id, start_time ASC)",
    "CREATE INDEX idx_traces_parent ON traces(parent_step_id)",
)

# The same tables in PostgreSQL: JSON columns are jsonb, millisecond times and sequence numbers
# bigint; the seed's INTEGER flags stay integers 0/1 with the same CHECKs and meanings.
M001_POSTGRES = (
    f"""
    CREATE TABLE sessions (
        session_id        text PRIMARY KEY,
        title             text NOT NULL,
        current_status    text NOT NULL CHECK (current_status IN ({_STATUS_WORDS})),
        created_at        bigint NOT NULL,
        updated_at        bigint NOT NULL,
        metadata          jsonb,
        is_forked         integer DEFAULT 0 CHECK (is_forked IN (0, 1)),
        parent_session_id text REFERENCES sessions(session_id) ON DELETE SET NULL,
        next_seq          bigint NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
        awaiting_input    integer NOT NULL DEFAULT 0 CHECK (awaiting_input IN (0, 1)),
        forked_from_seq   bigint
    )
    """,
    f"""
    CREATE TABLE traces (
        step_id                text PRIMARY KEY,
        session_id             text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        parent_step_id         text REFERENCES traces(step_id) ON DELETE SET NULL,
        step_type              text NOT NULL CHECK (step_type IN ({_STEP_TYPES})),
        name                   text NOT NULL,
        status                 text NOT NULL CHECK (status IN ({_STEP_STATUSES})),
        input_data             jsonb,
        output_data            jsonb,
        error_message          text,
        start_time             bigint NOT NULL,
        end_time               bigint,
        token_usage_prompt     integer DEFAULT 0,
        token_usage_completion integer DEFAULT 0,
        seq                    bigint NOT NULL CHECK (seq >= 1),
        agent                  text NOT NULL DEFAULT 'main',
        call_id                text,
        UNIQUE (session_id, seq)
    )
    """,
    "CREATE INDEX idx_traces_session_time ON traces(session_id, start_time ASC)",
    "CREATE INDEX idx_traces_parent ON traces(parent_step_id)",
)

# m002: workspace snapshots beside the traces, so one database holds memory and environment
# together (files follow memory, docs/architecture.md; with PostgreSQL, across hosts too).
M002_SQLITE = (
    """
    CREATE TABLE blobs (
        -- file contents, content-addressed: one row per distinct content, shared by every
        -- step and session that has it
        hash       TEXT PRIMARY KEY,                 -- sha256 hex of the raw content
        size       INTEGER NOT NULL CHECK (size >= 0),  -- raw size
        encoding   TEXT NOT NULL CHECK (encoding IN ('raw', 'zlib')),
        data       BLOB NOT NULL,
        created_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE snapshots (
        -- the session's workspace just before step `seq` ran
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL CHECK (seq >= 1),
        -- NULL: `manifest` is the whole state {path: entry}; else `manifest` holds the entries
        -- added or changed since snapshot base_seq of the same session and `removed` the
        -- paths gone (a changed file costs one entry, not the whole manifest)
        base_seq   INTEGER CHECK (base_seq < seq),
        manifest   TEXT NOT NULL,
        removed    TEXT,
        depth      INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),  -- deltas since a whole one
        files      INTEGER NOT NULL,
        bytes      INTEGER NOT NULL,
        new_bytes  INTEGER NOT NULL DEFAULT 0,  -- contents this snapshot added to blobs
        skipped    INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq),
        FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
    )
    """,
    """
    CREATE TABLE workspace_restores (
        -- the journal of a restore: written in the rollback/fork transaction, deleted once
        -- the files are in place, so a crash halfway is completed on the next start
        session_id        TEXT PRIMARY KEY,
        restore_id        TEXT NOT NULL,
        kind              TEXT NOT NULL CHECK (kind IN ('rollback', 'fork')),
        source_session_id TEXT,     -- fork: whose workspace unversioned paths are copied from
        snapshot_seq      INTEGER,  -- NULL: copy the source's current workspace
        manifest          TEXT,     -- the whole target state (NULL with snapshot_seq NULL)
        ignore            TEXT NOT NULL,  -- JSON list of the ignore patterns in force
        created_at        INTEGER NOT NULL,
        FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
    )
    """,
)

# m002 in PostgreSQL: contents as bytea, manifests and JSON lists as jsonb.
M002_POSTGRES = (
    """
    CREATE TABLE blobs (
        hash       text PRIMARY KEY,
        size       bigint NOT NULL CHECK (size >= 0),
        encoding   text NOT NULL CHECK (encoding IN ('raw', 'zlib')),
        data       bytea NOT NULL,
        created_at bigint NOT NULL
    )
    """,
    """
    CREATE TABLE snapshots (
        session_id text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        seq        bigint NOT NULL CHECK (seq >= 1),
        base_seq   bigint CHECK (base_seq < seq),
        manifest   jsonb NOT NULL,
        removed    jsonb,
        depth      integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
        files      bigint NOT NULL,
        bytes      bigint NOT NULL,
        new_bytes  bigint NOT NULL DEFAULT 0,
        skipped    bigint NOT NULL DEFAULT 0,
        created_at bigint NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    """
    CREATE TABLE workspace_restores (
        session_id        text PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
        restore_id        text NOT NULL,
        kind              text NOT NULL CHECK (kind IN ('rollback', 'fork')),
        source_session_id text,
        snapshot_seq      bigint,
        manifest          jsonb,
        ignore            jsonb NOT NULL,
        created_at        bigint NOT NULL
    )
    """,
)

# m003: session leases, so at most one worker drives a session at a time across processes and
# hosts (one driver, docs/architecture.md), the workers that hold them, and which worker wrote
# each step.
# The fencing token increases on every acquisition; a write carrying an older one is refused.
# The owner stays on record after a release (the lease just expires), so a sweep can tell an
# interrupted run from a session nobody ever drove.
_WORKERS_SQLITE = """
    CREATE TABLE workers (
        worker_id  TEXT PRIMARY KEY,   -- hostname:pid:random
        host       TEXT NOT NULL,
        pid        INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        seen_at    INTEGER NOT NULL,   -- last heartbeat
        info       TEXT                -- JSON: version, port, ...
    )
"""
M003_SQLITE = (
    "ALTER TABLE sessions ADD COLUMN lease_owner TEXT",
    "ALTER TABLE sessions ADD COLUMN lease_expires_at INTEGER",
    (
        "ALTER TABLE sessions ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0 "
        "CHECK (lease_token >= 0)"
    ),
    _WORKERS_SQLITE,
    (
        "CREATE INDEX idx_sessions_lease_owner ON sessions(lease_owner) "
        "WHERE lease_owner IS NOT NULL"
    ),
    # the worker that wrote the step under its lease (NULL: written without one)
    "ALTER TABLE traces ADD COLUMN worker TEXT",
)
M003_POSTGRES = (
    (
        "ALTER TABLE sessions ADD COLUMN lease_owner text, ADD COLUMN lease_expires_at bigint, "
        "ADD COLUMN lease_token bigint NOT NULL DEFAULT 0 CHECK (lease_token >= 0)"
    ),
    """
    CREATE TABLE workers (
        worker_id  text PRIMARY KEY,
        host       text NOT NULL,
        pid        integer NOT NULL,
        started_at bigint NOT NULL,
        seen_at    bigint NOT NULL,
        info       jsonb
    )
    """,
    (
        "CREATE INDEX idx_sessions_lease_owner ON sessions(lease_owner) "
        "WHERE lease_owner IS NOT NULL"
    ),
    "ALTER TABLE traces ADD COLUMN worker text",
    # Frames between workers larger than a NOTIFY payload travel by reference to a row here.
    """
    CREATE TABLE bus_payloads (
        id         bigserial PRIMARY KEY,
        payload    text NOT NULL,
        created_at bigint NOT NULL
    )
    """,
)

# m004: a log of the changes to sessions that a server did not make itself — a rollback or a
# deletion by the command line (or by another server on the database) — written in the
# transaction that makes them, so every server can tell the clients it serves
# (xclaw/store/changes.py, xclaw/runtime/changes.py). Rows are kept ten minutes.
M004_SQLITE = (
    """
    CREATE TABLE session_changes (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        kind       TEXT NOT NULL CHECK (kind IN ('rollback', 'delete')),
        detail     TEXT,              -- JSON: rollback {"stepId", "deleted"}
        origin     TEXT NOT NULL,     -- host:pid of the process that made the change
        created_at INTEGER NOT NULL
    )
    """,
    "CREATE INDEX idx_session_changes_created ON session_changes(created_at)",
)
M004_POSTGRES = (
    """
    CREATE TABLE session_changes (
        id         bigserial PRIMARY KEY,
        session_id text NOT NULL,
        kind       text NOT NULL CHECK (kind IN ('rollback', 'delete')),
        detail     jsonb,
        origin     text NOT NULL,
        created_at bigint NOT NULL
    )
    """,
    "CREATE INDEX idx_session_changes_created ON session_changes(created_at)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "seed_tables",
        "the seed's sessions and traces tables with their indexes, plus per-session step "
        "sequence numbers, rollback/fork bookkeeping and CHECKs on the status words",
        M001_SQLITE,
        M001_POSTGRES,
    ),
    Migration(
        2,
        "workspace_snapshots",
        "content-addressed file blobs, per-step workspace snapshots (mostly deltas) and a "
        "restore journal, so rollback and fork rewind the files with the memory",
        M002_SQLITE,
        M002_POSTGRES,
    ),
    Migration(
        3,
        "session_leases",
        "lease owner, expiry and fencing token on sessions, a workers table and the writing "
        "worker on each step, so one worker drives a session at a time (checkably) and a "
        "dead worker's sessions are taken over",
        M003_SQLITE,
        M003_POSTGRES,
    ),
    Migration(
        4,
        "session_changes",
        "a log of rollbacks and deletions with the process that made them, so a server learns "
        "of changes made outside it (the command line, another server) and pushes the new "
        "history to the clients it serves",
        M004_SQLITE,
        M004_POSTGRES,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

_VERSION_TABLE = """
    CREATE TABLE IF NOT EXISTS schema_version (
        version    INTEGER PRIMARY KEY,
        name       TEXT NOT NULL,
        applied_at INTEGER NOT NULL
    )
"""


# The tables every xclaw database of version 1 or later holds (m001).
CORE_TABLES = frozenset({"sessions", "traces"})


def check_history(rows: Iterable[tuple[Any, Any]], where: str) -> int:
    """The schema version a `schema_version` table's rows record, once they are known to be
    xclaw's own history: every version this xclaw knows under its migration's name. Another
    program's table of that name is not taken for ours (its database is not written to)."""
    from xclaw.store.access import not_xclaw

    known = {m.version: m.name for m in MIGRATIONS}
    version = 0
    for v, name in rows:
        if not isinstance(v, int) or (v in known and known[v] != name) or v < 1:
            raise not_xclaw(
                where,
                f"its schema_version table records version {v!r} as {name!r}, not as xclaw "
                "does: it was written by something other than xclaw",
            )
        version = max(version, v)
    return version


def sqlite_history(conn: sqlite3.Connection, where: str = "database") -> int:
    """The xclaw schema version of a SQLite database: 0 for one without tables (a new
    file); refuses (DatabaseRefused) one with tables that are not xclaw's."""
    from xclaw.store.access import not_xclaw

    tables = {
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite~_%' ESCAPE '~'"
        )
    }
    if "schema_version" not in tables:
        if tables:
            shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
            raise not_xclaw(
                where,
                f"it holds tables ({shown}) written by something other than xclaw, and xclaw "
                "does not add its own to another program's database",
            )
        return 0
    try:
        rows = conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    except sqlite3.OperationalError as e:
        raise not_xclaw(
            where, f"its schema_version table is not xclaw's ({e}): written by something else"
        ) from e
    version = check_history(rows, where)
    if version and not tables >= CORE_TABLES:
        raise not_xclaw(where, "it records xclaw's schema but lacks its sessions and traces")
    return version


def migrate_sqlite(
    conn: sqlite3.Connection, *, where: str = "database", target: int | None = None
) -> list[int]:
    """Bring the database up to `target` (default: the latest); return the versions applied.

    `conn` must be in autocommit mode (isolation_level=None). Each migration runs in its own
    BEGIN IMMEDIATE transaction together with its record, so concurrent openers serialise
    and each migration is applied exactly once.
    """
    from xclaw.store.access import too_new

    target = LATEST_VERSION if target is None else target
    applied: list[int] = []
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Checked under the write lock before anything is created: another program's
            # database is refused whole, never given xclaw's tables.
            current = sqlite_history(conn, where)
            conn.execute(_VERSION_TABLE)
            if current > LATEST_VERSION:
                raise too_new(where, current)
            if current >= target:
                conn.execute("COMMIT")
                return applied
            m = MIGRATIONS[current]  # versions are 1..n without gaps (tested)
            try:
                for statement in m.sqlite:
                    conn.execute(statement)
            except sqlite3.Error as e:
                raise StoreError(
                    f"cannot upgrade {where} to schema version {m.version} ({m.name}): {e}. "
                    "Is it a database written by something other than xclaw?"
                ) from e
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (m.version, m.name, int(time.time() * 1000)),
            )
            conn.execute("COMMIT")
            applied.append(m.version)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
