"""[store] Numbered, append-only schema migrations, one list (`MIGRATIONS`) for both backends.

Each migration has a version, a name (recorded in `schema_version`), why it exists, and its SQL
for each backend, both in this module: `M00N_SQLITE` and `M00N_POSTGRES`, side by side under
the comment that says what migration N does and why. SQLite's are run by `migrate_sqlite`
below, PostgreSQL's by `migrate_postgres` in `store/postgres/conn.py`. A migration is applied
atomically together with its `schema_version` record, so a crash mid-upgrade leaves the
database at the previous version, never half-way. Never edit an applied migration: append one,
with both texts.
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
    """One schema change. `version` counts 1…n without gaps; `name` is recorded in
    `schema_version` and compared when a database is opened, so it is never renamed; `why`
    says what the change is for; `sqlite` and `postgres` are its statements per backend."""

    version: int
    name: str
    why: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...] = ()  # its PostgreSQL text, M00N_POSTGRES of this module


_STATUS_WORDS = "'Init','Running','Paused','Success','Failed'"
_STEP_TYPES = "'llm_call','tool_call','user_input','system_alert'"
_STEP_STATUSES = "'running','completed','failed'"

# Migration 1, `seed_tables`: the `sessions` and `traces` tables. Every column, foreign key and
# index of the original tutorial's two tables (*the seed*, docs/architecture.md glossary), with
# their meanings, so SQL written for the tutorial reads the data; plus what xclaw needs: a
# per-session step counter (ids never reused), the rollback and fork bookkeeping, the agent and
# call id of each step, and CHECKs on every status word. PostgreSQL: M001_POSTGRES, below.
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

# Migration 1 in PostgreSQL: the same tables; JSON columns are jsonb, millisecond times and
# sequence numbers bigint; the INTEGER flags stay integers 0/1 with the same CHECKs and meanings.
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

# Migration 2, `workspace_snapshots`: content-addressed file blobs, a snapshot of the workspace
# per side-effecting step (mostly deltas) and the journal of restores, beside the traces, so one
# database holds memory and files together and rollback and fork rewind both (files follow
# memory, docs/architecture.md; with PostgreSQL, across hosts too). PostgreSQL: M002_POSTGRES.
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

# Migration 2 in PostgreSQL: contents as bytea, manifests and JSON lists as jsonb.
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

# Migration 3, `session_leases`: a lease on each session (owner, expiry, fencing token), the
# `workers` table and the worker that wrote each step, so at most one worker drives a session at
# a time across processes and hosts (one driver, docs/architecture.md), a dead worker's sessions
# are taken over, and who wrote what is checkable. PostgreSQL: M003_POSTGRES, below, which also
# adds `bus_payloads` (frames between workers too large for a NOTIFY).
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

# Migration 4, `session_changes`: a log of the changes to sessions that a server did not make
# itself — a rollback or a deletion by the command line (or by another server on the database) —
# written in the transaction that makes them, so every server can tell the clients it serves
# (xclaw/store/steps/changes.py, xclaw/runtime/changes.py). Rows are kept ten minutes. PostgreSQL:
# M004_POSTGRES, below.
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

# Migration 5, `teams`: people with their own tokens, the sessions they own or that are shared
# with them, and a log of who did what to a session that no step records (a cancel, a rollback,
# a fork, a share) — so one server can serve a team (docs/teams.md). Only a hash of each token is
# stored. A session with no `owner` row is the admin's (every session before this migration).
# A user's rows go with the user: a name given again later inherits nothing. PostgreSQL:
# M005_POSTGRES, below.
M005_SQLITE = (
    """
    CREATE TABLE users (
        name             TEXT PRIMARY KEY,
        role             TEXT NOT NULL CHECK (role IN ('admin', 'member')),
        -- sha256 hex of the user's token; NULL: signs in only through a trusted proxy
        token_hash       TEXT UNIQUE,
        created_at       INTEGER NOT NULL,
        token_created_at INTEGER
    )
    """,
    """
    CREATE TABLE session_access (
        session_id TEXT NOT NULL,
        user_name  TEXT NOT NULL,
        role       TEXT NOT NULL
                   CHECK (role IN ('owner', 'collaborator', 'approver', 'viewer')),
        granted_by TEXT,              -- who shared it (NULL: the server's token)
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, user_name),
        FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE,
        FOREIGN KEY (user_name)  REFERENCES users(name) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX idx_session_access_user ON session_access(user_name)",
    "CREATE UNIQUE INDEX idx_session_owner ON session_access(session_id) WHERE role = 'owner'",
    """
    CREATE TABLE session_actions (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        kind       TEXT NOT NULL
                   CHECK (kind IN ('cancel', 'rollback', 'fork', 'share', 'unshare')),
        user_name  TEXT,              -- who did it (NULL: the server's token)
        detail     TEXT,              -- JSON: rollback {"stepId", "deleted"}, share {"user", ...}
        created_at INTEGER NOT NULL,
        FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX idx_session_actions_session ON session_actions(session_id, id)",
)
M005_POSTGRES = (
    """
    CREATE TABLE users (
        name             text PRIMARY KEY,
        role             text NOT NULL CHECK (role IN ('admin', 'member')),
        token_hash       text UNIQUE,
        created_at       bigint NOT NULL,
        token_created_at bigint
    )
    """,
    """
    CREATE TABLE session_access (
        session_id text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        user_name  text NOT NULL REFERENCES users(name) ON DELETE CASCADE,
        role       text NOT NULL
                   CHECK (role IN ('owner', 'collaborator', 'approver', 'viewer')),
        granted_by text,
        created_at bigint NOT NULL,
        PRIMARY KEY (session_id, user_name)
    )
    """,
    "CREATE INDEX idx_session_access_user ON session_access(user_name)",
    "CREATE UNIQUE INDEX idx_session_owner ON session_access(session_id) WHERE role = 'owner'",
    """
    CREATE TABLE session_actions (
        id         bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        kind       text NOT NULL
                   CHECK (kind IN ('cancel', 'rollback', 'fork', 'share', 'unshare')),
        user_name  text,
        detail     jsonb,
        created_at bigint NOT NULL
    )
    """,
    "CREATE INDEX idx_session_actions_session ON session_actions(session_id, id)",
)

# Migration 6: where file contents live when an object store holds them (blob_store: s3://…,
# docs/storage.md "Contents in an object store"). Contents are uploaded in packs (one object
# of up to 8 MB, named by the sha256 of its bytes); a row says which pack holds a content
# and where. No bytes: `marked_at` is the mark that keeps the sweep off it. A snapshot may add
# only contents marked within the grace period; the sweep deletes a pack only once every row
# naming it is older than that and unreferenced.
M006_SQLITE = (
    """
    CREATE TABLE object_blobs (
        hash      TEXT PRIMARY KEY,
        pack      TEXT NOT NULL,
        pos       INTEGER NOT NULL,
        size      INTEGER NOT NULL,
        marked_at INTEGER NOT NULL
    )
    """,
    "CREATE INDEX idx_object_blobs_pack ON object_blobs(pack)",
    "CREATE INDEX idx_object_blobs_marked ON object_blobs(marked_at)",
)

M006_POSTGRES = (
    """
    CREATE TABLE object_blobs (
        hash      TEXT PRIMARY KEY,
        pack      TEXT NOT NULL,
        pos       BIGINT NOT NULL,
        size      BIGINT NOT NULL,
        marked_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX idx_object_blobs_pack ON object_blobs(pack)",
    "CREATE INDEX idx_object_blobs_marked ON object_blobs(marked_at)",
)

# Migration 7, `schedules`: work that starts by itself (docs/schedules.md). A schedule sends
# its message to a session, or to a new fork of a template session, at each tick (cron, a
# period, or one moment); `next_fire` is the tick no worker has claimed yet, and a worker
# claims it by moving it on (compare-and-set), writing the fire in the same transaction. A
# webhook (`hooks`) sends its templated message when a signed request arrives. Each fire is a
# row of `fires` under its deterministic id (the schedule's and the tick's, or the hook's and
# the delivery's): the id the message is recorded with in its session, so however many workers
# and kills, it runs once. `claimed_until` keeps other workers off a fire being delivered.
M007_SQLITE = (
    """
    CREATE TABLE schedules (
        schedule_id  TEXT PRIMARY KEY,
        kind         TEXT NOT NULL CHECK (kind IN ('cron', 'every', 'at')),
        spec         TEXT NOT NULL,
        tz           TEXT NOT NULL,
        anchor       INTEGER NOT NULL,
        session_id   TEXT REFERENCES sessions(session_id) ON DELETE CASCADE,
        fork_of      TEXT REFERENCES sessions(session_id) ON DELETE CASCADE,
        message      TEXT NOT NULL,
        catch_up     TEXT NOT NULL CHECK (catch_up IN ('skip', 'once', 'all')),
        paused       INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        created_by   TEXT,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        next_fire    INTEGER,
        last_fire    INTEGER,
        fired        INTEGER NOT NULL DEFAULT 0,
        skipped      INTEGER NOT NULL DEFAULT 0,
        seed         TEXT NOT NULL,
        CHECK ((session_id IS NULL) <> (fork_of IS NULL))
    )
    """,
    "CREATE INDEX idx_schedules_due ON schedules(next_fire) WHERE paused = 0",
    """
    CREATE TABLE hooks (
        name       TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        template   TEXT NOT NULL,
        secret     TEXT NOT NULL,
        created_by TEXT,
        created_at INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE fires (
        fire_id       TEXT PRIMARY KEY,
        source        TEXT NOT NULL CHECK (source IN ('schedule', 'hook')),
        source_id     TEXT NOT NULL,
        tick          INTEGER,
        session_id    TEXT NOT NULL,
        fork_of       TEXT,
        message       TEXT NOT NULL,
        created_by    TEXT,
        state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'refused')),
        note          TEXT,
        deferrals     INTEGER NOT NULL DEFAULT 0,
        seq           INTEGER,
        worker_id     TEXT,
        claimed_until INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL
    )
    """,
    "CREATE INDEX idx_fires_pending ON fires(claimed_until) WHERE state = 'pending'",
    "CREATE INDEX idx_fires_source ON fires(source_id, created_at)",
)

M007_POSTGRES = tuple(s.replace("INTEGER", "BIGINT").replace("TEXT", "text") for s in M007_SQLITE)

# Migration 8, `budgets` (docs/budgets.md): each LLM call's hold on the budgets — its
# reservation, written with the call's `running` step, and what it cost, written with its
# finish — keyed by the step (written and settled once), with whose spend it counts and when
# (UTC day and month); and the caps and grants an admin set per session, user or the whole
# deployment over xclaw.yaml's. No foreign key: spend outlives a rollback or a deletion.
M008_SQLITE = (
    """
    CREATE TABLE budget_holds (
        session_id   TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        owner        TEXT,             -- the session's owner (NULL: the admin's)
        day          TEXT NOT NULL,    -- 2026-12-06 (UTC)
        month        TEXT NOT NULL,    -- 2026-12
        held_tokens  INTEGER NOT NULL, -- the reservation: prompt estimate + max output
        held_usd     REAL NOT NULL,
        spent_tokens INTEGER NOT NULL,
        spent_usd    REAL NOT NULL,
        settled      INTEGER NOT NULL CHECK (settled IN (0, 1)),
        created_at   INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    "CREATE INDEX idx_budget_holds_owner_day ON budget_holds(owner, day)",
    "CREATE INDEX idx_budget_holds_owner_month ON budget_holds(owner, month)",
    "CREATE INDEX idx_budget_holds_day ON budget_holds(day)",
    "CREATE INDEX idx_budget_holds_month ON budget_holds(month)",
    """
    CREATE TABLE budget_caps (
        target         TEXT PRIMARY KEY,  -- session:<id> | user:<name> | total
        caps           TEXT NOT NULL,     -- JSON: cap key -> number, or null (no cap)
        granted_tokens INTEGER NOT NULL,
        granted_usd    REAL NOT NULL,
        updated_at     INTEGER NOT NULL
    )
    """,
)
M008_POSTGRES = (
    """
    CREATE TABLE budget_holds (
        session_id   text NOT NULL,
        seq          bigint NOT NULL,
        owner        text,
        day          text NOT NULL,
        month        text NOT NULL,
        held_tokens  bigint NOT NULL,
        held_usd     double precision NOT NULL,
        spent_tokens bigint NOT NULL,
        spent_usd    double precision NOT NULL,
        settled      smallint NOT NULL CHECK (settled IN (0, 1)),
        created_at   bigint NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
    """,
    "CREATE INDEX idx_budget_holds_owner_day ON budget_holds(owner, day)",
    "CREATE INDEX idx_budget_holds_owner_month ON budget_holds(owner, month)",
    "CREATE INDEX idx_budget_holds_day ON budget_holds(day)",
    "CREATE INDEX idx_budget_holds_month ON budget_holds(month)",
    """
    CREATE TABLE budget_caps (
        target         text PRIMARY KEY,
        caps           jsonb NOT NULL,
        granted_tokens bigint NOT NULL,
        granted_usd    double precision NOT NULL,
        updated_at     bigint NOT NULL
    )
    """,
)

# Migration 9, `budget_holds_lean`: a hold is written with every LLM call under a cap, so its
# row costs what the step's own write does: SQLite keeps it in its key's b-tree alone (WITHOUT
# ROWID), and the month's sums read the day's indexes by range (the month indexes go).
M009_SQLITE = (
    """
    CREATE TABLE budget_holds_lean (
        session_id   TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        owner        TEXT,
        day          TEXT NOT NULL,
        month        TEXT NOT NULL,
        held_tokens  INTEGER NOT NULL,
        held_usd     REAL NOT NULL,
        spent_tokens INTEGER NOT NULL,
        spent_usd    REAL NOT NULL,
        settled      INTEGER NOT NULL CHECK (settled IN (0, 1)),
        created_at   INTEGER NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID
    """,
    "INSERT INTO budget_holds_lean SELECT session_id, seq, owner, day, month, held_tokens, "
    "held_usd, spent_tokens, spent_usd, settled, created_at FROM budget_holds",
    "DROP TABLE budget_holds",
    "ALTER TABLE budget_holds_lean RENAME TO budget_holds",
    "CREATE INDEX idx_budget_holds_owner_day ON budget_holds(owner, day)",
    "CREATE INDEX idx_budget_holds_day ON budget_holds(day)",
)
M009_POSTGRES = (
    "DROP INDEX idx_budget_holds_owner_month",
    "DROP INDEX idx_budget_holds_month",
)

# Migration 10: messages that arrived while a run was busy and wait their turn (docs/protocol.md,
# "Input while a run is busy"): a durable FIFO per session, in `seq` order (an `interrupt`
# first). `id` is the message id its run will record (the client's `messageId`, or one the
# server made), unique in the session: a resend is queued once, and the write that opens its
# turn deletes it, so kills and takeovers never drop, reorder or repeat one.
M010_SQLITE = (
    """
    CREATE TABLE queued_inputs (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        id         TEXT NOT NULL,
        mode       TEXT NOT NULL CHECK (mode IN ('queue', 'steer', 'interrupt')),
        content    TEXT NOT NULL,
        sent_by    TEXT,              -- JSON: who sent it (a team member), as the message records
        agent      TEXT,              -- the declared agent it asked for
        created_at INTEGER NOT NULL,
        UNIQUE (session_id, id),
        FOREIGN KEY (session_id) REFERENCES sessions(session_id) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX idx_queued_inputs_session ON queued_inputs(session_id, seq)",
)

M010_POSTGRES = (
    """
    CREATE TABLE queued_inputs (
        seq        bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
        id         text NOT NULL,
        mode       text NOT NULL CHECK (mode IN ('queue', 'steer', 'interrupt')),
        content    text NOT NULL,
        sent_by    jsonb,
        agent      text,
        created_at bigint NOT NULL,
        UNIQUE (session_id, id)
    )
    """,
    "CREATE INDEX idx_queued_inputs_session ON queued_inputs(session_id, seq)",
)

# Migration 11, `budget_counters`: what a person's or the deployment's holds count per period
# (`ud:<user>:<day>`, `um:<user>:<month>`, `td:<day>`, `tm:<month>`), kept while such a cap is
# set and updated in the transaction of each hold and settlement, so a shared cap is checked
# exactly across workers (a row lock on PostgreSQL, the one writer on SQLite). A counter is
# rebuilt from the holds when missing, dropped when its target's caps change, and deleted once
# its period has ended (when a new period's counter is made: store/budgets/sql.py).
M011_SQLITE = (
    """
    CREATE TABLE budget_counters (
        scope  TEXT PRIMARY KEY,
        tokens INTEGER NOT NULL,
        usd    REAL NOT NULL
    ) WITHOUT ROWID
    """,
)
M011_POSTGRES = (
    """
    CREATE TABLE budget_counters (
        scope  text PRIMARY KEY,
        tokens bigint NOT NULL,
        usd    double precision NOT NULL
    )
    """,
)

# Migration 12, `budget_holds_in_steps`: an LLM call's hold rides in its own step's row (the
# `traces` columns `held_*`, `spent_*`, `hold_owner`, `hold_day`), written with the `running`
# step and settled with its finish: no row of its own, only two small partial indexes (of
# the rows that hold: by day and owner, by session), where a row of `budget_holds` and its
# two indexes cost more than the step itself (bench/README.md, "Budgets"). Spend outlives a
# rollback or a deletion: a trigger keeps the hold of a step row deleted — by a rollback, or
# with its session — in `budget_holds_kept`, the former table renamed, which carries every
# hold written before this migration over as it was. `budget_holds` becomes the view of
# both: what every sum and every reader of the holds reads, as before.
_HOLD_COLUMNS = (
    ("held_tokens", "INTEGER", "bigint"),  # the reservation: prompt estimate + max output
    ("held_usd", "REAL", "double precision"),
    ("spent_tokens", "INTEGER", "bigint"),  # what it cost; NULL: not settled
    ("spent_usd", "REAL", "double precision"),
    ("hold_owner", "TEXT", "text"),  # whose spend it counts (NULL: the admin's)
    ("hold_day", "TEXT", "text"),  # 2026-12-07 (UTC); its month is the first 7 characters
)
# The rows that hold, by day (and owner: a person's and the deployment's sums, a counter's
# rebuild) and by session (its total, read at each turn's start): only those rows are indexed.
_HOLDS_BY_DAY = (
    "CREATE INDEX idx_traces_holds ON traces(hold_day, hold_owner) WHERE held_tokens IS NOT NULL"
)
_HOLDS_BY_SESSION = (
    "CREATE INDEX idx_traces_holds_session ON traces(session_id, seq) WHERE held_tokens IS NOT NULL"
)
_HOLDS_VIEW = """
    CREATE VIEW budget_holds AS
    SELECT session_id, seq, hold_owner AS owner, hold_day AS day,
           substr(hold_day, 1, 7) AS month, held_tokens, held_usd,
           coalesce(spent_tokens, 0) AS spent_tokens, coalesce(spent_usd, 0) AS spent_usd,
           CASE WHEN spent_tokens IS NULL THEN 0 ELSE 1 END AS settled,
           start_time AS created_at
      FROM traces WHERE held_tokens IS NOT NULL
    UNION ALL
    SELECT session_id, seq, owner, day, month, held_tokens, held_usd, spent_tokens,
           spent_usd, settled, created_at
      FROM budget_holds_kept
"""
_KEEP_HOLD = (
    "INSERT INTO budget_holds_kept (session_id, seq, owner, day, month, held_tokens,"
    " held_usd, spent_tokens, spent_usd, settled, created_at) VALUES (old.session_id, old.seq,"
    " old.hold_owner, old.hold_day, substr(old.hold_day, 1, 7), old.held_tokens, old.held_usd,"
    " coalesce(old.spent_tokens, 0), coalesce(old.spent_usd, 0),"
    " CASE WHEN old.spent_tokens IS NULL THEN 0 ELSE 1 END, old.start_time)"
)
M012_SQLITE = (
    *(f"ALTER TABLE traces ADD COLUMN {name} {lite}" for name, lite, _ in _HOLD_COLUMNS),
    _HOLDS_BY_DAY,
    _HOLDS_BY_SESSION,
    "ALTER TABLE budget_holds RENAME TO budget_holds_kept",
    _HOLDS_VIEW,
    # Foreign-key cascades (a session deleted) fire it too.
    f"""
    CREATE TRIGGER traces_keep_hold BEFORE DELETE ON traces
    WHEN old.held_tokens IS NOT NULL
    BEGIN {_KEEP_HOLD}; END
    """,
)
M012_POSTGRES = (
    *(f"ALTER TABLE traces ADD COLUMN {name} {pg}" for name, _, pg in _HOLD_COLUMNS),
    _HOLDS_BY_DAY,
    _HOLDS_BY_SESSION,
    "ALTER TABLE budget_holds RENAME TO budget_holds_kept",
    _HOLDS_VIEW,
    # The schema's search path is the function's own: a delete from any session finds the
    # table of this schema. Cascaded deletes (a session deleted) fire it too.
    f"""
    CREATE FUNCTION traces_keep_hold() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN {_KEEP_HOLD}; RETURN old; END
    $$
    """,
    """
    CREATE TRIGGER traces_keep_hold BEFORE DELETE ON traces
    FOR EACH ROW WHEN (old.held_tokens IS NOT NULL) EXECUTE FUNCTION traces_keep_hold()
    """,
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "seed_tables",  # "seed": the original tutorial (docs/architecture.md glossary)
        "the original tutorial's sessions and traces tables with their indexes, plus "
        "per-session step sequence numbers, rollback/fork bookkeeping and CHECKs on the status "
        "words",
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
    Migration(
        5,
        "teams",
        "users with hashed tokens, who owns each session and with whom it is shared, and a "
        "log of who cancelled, rolled back, forked or shared a session, so one server serves "
        "a team",
        M005_SQLITE,
        M005_POSTGRES,
    ),
    Migration(
        6,
        "object_blobs",
        "where each file content kept in an object store (blob_store: s3://...) is: its pack "
        "and offset, and the mark that keeps the sweep off it, so the database holds "
        "manifests and references only and the sweep never races a snapshot being saved",
        M006_SQLITE,
        M006_POSTGRES,
    ),
    Migration(
        7,
        "schedules",
        "schedules (cron, period, moment) and webhooks that send a message to a session or "
        "a fork of a template, and each fire under its deterministic id, so work starts by "
        "itself exactly once across workers and kills",
        M007_SQLITE,
        M007_POSTGRES,
    ),
    Migration(
        8,
        "budgets",
        "each LLM call's hold on the budgets (its reservation, written with the call's "
        "step, and what it cost, written with its finish) and the caps and grants an admin "
        "set, so spend is capped and counted once across kills and workers",
        M008_SQLITE,
        M008_POSTGRES,
    ),
    Migration(
        9,
        "budget_holds_lean",
        "a hold's row as cheap to write as its step's: SQLite keeps it in its key's b-tree "
        "(WITHOUT ROWID), and a month's sums read the day indexes by range",
        M009_SQLITE,
        M009_POSTGRES,
    ),
    Migration(
        10,
        "queued_inputs",
        "messages sent while a run is busy that wait their turn (the queue, steering and "
        "interrupting policies), each under the message id its run records, so a kill or a "
        "takeover never drops, reorders or repeats one",
        M010_SQLITE,
        M010_POSTGRES,
    ),
    Migration(
        11,
        "budget_counters",
        "what a person's or the deployment's holds count per day and month, updated with "
        "each hold and settlement while such a cap is set, so a shared cap is checked "
        "exactly across workers",
        M011_SQLITE,
        M011_POSTGRES,
    ),
    Migration(
        12,
        "budget_holds_in_steps",
        "an LLM call's hold in its own step's row, written and settled by the step's "
        "transactions with no row or index of its own; the holds of deleted steps, and "
        "those written before, kept in budget_holds_kept; budget_holds the view of both",
        M012_SQLITE,
        M012_POSTGRES,
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

    `conn` must be in autocommit mode (isolation_level=None). Every pending migration runs in
    one BEGIN IMMEDIATE transaction together with its record: concurrent openers serialise,
    each migration is applied exactly once, and a crash or power loss half-way leaves the
    database as it was (a new one: no xclaw tables at all), never at a version between.
    """
    from xclaw.store.access import too_new

    target = LATEST_VERSION if target is None else target
    applied: list[int] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked under the write lock before anything is created: another program's
        # database is refused whole, never given xclaw's tables.
        current = sqlite_history(conn, where)
        conn.execute(_VERSION_TABLE)
        if current > LATEST_VERSION:
            raise too_new(where, current)
        while current < target:
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
            applied.append(m.version)
            current = m.version
        conn.execute("COMMIT")
        return applied
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
