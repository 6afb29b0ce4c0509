"""Schema versions: numbered and append-only; every older database upgrades in place; a newer one is
refused with words; SQL written for the original tutorial still reads the data. On both backends
(PostgreSQL: the same numbered list, its own SQL texts, one schema per test)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.store.builders import llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.errors import SchemaTooNew, StoreError
from xclaw.store.base import Store
from xclaw.store.migrations import LATEST_VERSION, MIGRATIONS
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import StepStatus
from xclaw.store.steps.writes import AddStep, BeginStep

# Rows a database of each version holds, written with that version's SQL. When migration N+1
# is added, the upgrade test below runs from every version 1..N with these rows automatically;
# add SAMPLE_ROWS[N+1] for the new version in the same change. A statement is portable text,
# or {backend name: text} where the dialects differ (binary literals).
Sample = str | dict[str, str]
SAMPLE_ROWS: dict[int, list[Sample]] = {
    1: [
        (
            "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at, "
            "metadata, is_forked, next_seq) VALUES ('old', 'from v1', 'Running', 1000, 2000, "
            "'{\"temperature\":0.5}', 0, 3)"
        ),
        (
            "INSERT INTO traces (step_id, session_id, seq, step_type, name, status, "
            "input_data, start_time, end_time) VALUES ('old:s0001', 'old', 1, 'user_input', "
            "'user', 'completed', '\"hi\"', 1000, 1000)"
        ),
        (
            "INSERT INTO traces (step_id, session_id, parent_step_id, seq, step_type, name, "
            "status, input_data, start_time) VALUES ('old:s0002', 'old', 'old:s0001', 2, "
            "'tool_call', 'shell', 'running', '{\"command\":\"sleep 10\"}', 1500)"
        ),
    ],
}
# A version-2 database: the same session, plus a stored file content and the snapshot of the
# workspace before s0002 that names it.
_HELLO = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"  # sha256("hello")
_BLOB = (
    "INSERT INTO blobs (hash, size, encoding, data, created_at) "
    f"VALUES ('{_HELLO}', 5, 'raw', {{}}, 1500)"
)
SAMPLE_ROWS[2] = [
    *SAMPLE_ROWS[1],
    {
        "sqlite": _BLOB.format("X'68656c6c6f'"),
        "postgres": _BLOB.format("decode('68656c6c6f', 'hex')"),
    },
    (
        "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, files, "
        "bytes, new_bytes, skipped, created_at) VALUES ('old', 2, NULL, "
        f'\'{{"a.txt":{{"hash":"{_HELLO}","size":5,"mode":420}}}}\', NULL, 0, '
        "1, 5, 5, 0, 1500)"
    ),
]
# A version-3 database: the session was driven (lease #4) by a worker that registered and is
# gone; its lease expired long ago.
SAMPLE_ROWS[3] = [
    *SAMPLE_ROWS[2],
    (
        "INSERT INTO workers (worker_id, host, pid, started_at, seen_at, info) "
        "VALUES ('gone:1:abc', 'gone', 1, 1000, 2000, '{}')"
    ),
    (
        "UPDATE sessions SET lease_owner='gone:1:abc', lease_expires_at=2500, lease_token=4 "
        "WHERE session_id='old'"
    ),
]


# A version-4 database: the session was rolled back by another process a moment ago.
SAMPLE_ROWS[4] = [
    *SAMPLE_ROWS[3],
    (
        "INSERT INTO session_changes (session_id, kind, detail, origin, created_at) "
        "VALUES ('old', 'rollback', '{\"stepId\":\"s0003\",\"deleted\":1}', 'cli:1', 2600)"
    ),
]


# A version-5 database: a member who owns the session, another it is shared with, and who
# shared it.
SAMPLE_ROWS[5] = [
    *SAMPLE_ROWS[4],
    (
        "INSERT INTO users (name, role, token_hash, created_at, token_created_at) VALUES "
        "('alice', 'member', 'aa', 2700, 2700), ('bob', 'member', NULL, 2700, NULL)"
    ),
    (
        "INSERT INTO session_access (session_id, user_name, role, granted_by, created_at) "
        "VALUES ('old', 'alice', 'owner', NULL, 2700), ('old', 'bob', 'viewer', 'alice', 2800)"
    ),
    (
        "INSERT INTO session_actions (session_id, kind, user_name, detail, created_at) "
        "VALUES ('old', 'share', 'alice', '{\"user\":\"bob\",\"role\":\"viewer\"}', 2800)"
    ),
]

SAMPLE_ROWS[6] = [
    *SAMPLE_ROWS[5],
    "INSERT INTO object_blobs (hash, pack, pos, size, marked_at) "
    f"VALUES ('{'ab' * 32}', '{'cd' * 32}', 0, 5, 2900)",
]

# A version-7 database: a schedule sending to the session (one tick fired, delivered), and a
# webhook with a delivery still pending.
SAMPLE_ROWS[7] = [
    *SAMPLE_ROWS[6],
    (
        "INSERT INTO schedules (schedule_id, kind, spec, tz, anchor, session_id, fork_of, "
        "message, catch_up, paused, created_by, created_at, updated_at, next_fire, last_fire, "
        "fired, skipped, seed) VALUES ('sch1', 'every', '60000', 'UTC', 3000, 'old', NULL, "
        "'tick', 'skip', 0, 'alice', 3000, 3000, 123000, 63000, 1, 0, 'seed')"
    ),
    (
        "INSERT INTO hooks (name, session_id, template, secret, created_by, created_at) "
        "VALUES ('ci', 'old', 'build {status}', 'whsec_x', NULL, 3000)"
    ),
    (
        "INSERT INTO fires (fire_id, source, source_id, tick, session_id, fork_of, message, "
        "created_by, state, note, deferrals, seq, worker_id, claimed_until, created_at, "
        "updated_at) VALUES ('schedule.sch1.63000', 'schedule', 'sch1', 63000, 'old', NULL, "
        "'tick', 'alice', 'delivered', NULL, 0, 1, 'gone:1:abc', 0, 63000, 63000), "
        "('hook.ci.d1', 'hook', 'ci', NULL, 'old', NULL, 'build ok', NULL, 'pending', NULL, "
        "1, NULL, 'gone:1:abc', 64000, 63500, 63500)"
    ),
]

# A budgets database: alice's call of s0002 held 500 tokens and cost 120; a grant to the session.
SAMPLE_ROWS[8] = [
    *SAMPLE_ROWS[7],
    "INSERT INTO budget_holds (session_id, seq, owner, day, month, held_tokens, held_usd, "
    "spent_tokens, spent_usd, settled, created_at) VALUES ('old', 2, 'alice', '2026-12-06', "
    "'2026-12', 500, 0.01, 120, 0.002, 1, 3000)",
    "INSERT INTO budget_caps (target, caps, granted_tokens, granted_usd, updated_at) VALUES "
    "('session:old', '{\"session_tokens\":1000}', 200, 0, 3000)",
]

# The holds kept in their key's b-tree (SQLite), the month indexes gone: the same rows.
SAMPLE_ROWS[9] = [*SAMPLE_ROWS[8]]

# A version-10 database: a message waits for the session's run to end.
SAMPLE_ROWS[10] = [
    *SAMPLE_ROWS[9],
    "INSERT INTO queued_inputs (session_id, id, mode, content, created_at) "
    "VALUES ('old', 'm-2', 'queue', 'and then this', 3000)",
]

# A version-11 database: alice's day counted on its counter (the hold of s0002, settled).
SAMPLE_ROWS[11] = [
    *SAMPLE_ROWS[10],
    "INSERT INTO budget_counters (scope, tokens, usd) VALUES ('ud:alice:2026-12-06', 120, 0.002)",
]


# A version-12 database: holds in their steps' rows (s0001 held 100 tokens and cost 40), the
# ones written before (s0002's) kept in budget_holds_kept; budget_holds is their view.
SAMPLE_ROWS[12] = [
    *(
        r.replace("INSERT INTO budget_holds ", "INSERT INTO budget_holds_kept ")
        if isinstance(r, str)
        else r
        for r in SAMPLE_ROWS[11]
    ),
    "UPDATE traces SET held_tokens=100, held_usd=0.001, spent_tokens=40, spent_usd=0.0004, "
    "hold_owner='alice', hold_day='2026-12-06' WHERE session_id='old' AND seq=1",
]


def _sql(sample: Sample, backend: Backend) -> str:
    return sample if isinstance(sample, str) else sample[backend.name]


def test_migrations_are_numbered_without_gaps() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert MIGRATIONS[-1].version == LATEST_VERSION
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)
    assert all(m.why and m.sqlite for m in MIGRATIONS)
    assert set(SAMPLE_ROWS) == set(range(1, LATEST_VERSION + 1)), "add sample rows"


def _versions(backend: Backend) -> list[tuple[int, str]]:
    return backend.query("SELECT version, name FROM schema_version ORDER BY version")


def _schema(backend: Backend) -> tuple[set[str], dict[str, set[str]], set[tuple[str, ...]]]:
    """(index names, columns per table, foreign keys as (table, column, ref table, ref column,
    on delete)) as the database itself reports them."""
    q = backend.query
    tables = ("sessions", "traces")
    if backend.name == "sqlite":
        indexes = {r[0] for r in q("SELECT name FROM sqlite_master WHERE type='index'")}
        columns = {t: {r[1] for r in q(f"PRAGMA table_info({t})")} for t in tables}
        fks = {
            (t, r[3], r[2], r[4], r[6]) for t in tables for r in q(f"PRAGMA foreign_key_list({t})")
        }
        return indexes, columns, fks
    schema = backend.schema  # type: ignore[attr-defined]
    indexes = {r[0] for r in q("SELECT indexname FROM pg_indexes WHERE schemaname = ?", (schema,))}
    columns = {
        t: {
            r[0]
            for r in q(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = ? AND table_name = ?",
                (schema, t),
            )
        }
        for t in tables
    }
    fks = set(
        q(
            "SELECT kcu.table_name, kcu.column_name, ccu.table_name, ccu.column_name, "
            "rc.delete_rule FROM information_schema.referential_constraints rc "
            "JOIN information_schema.key_column_usage kcu "
            "  ON kcu.constraint_name = rc.constraint_name "
            "  AND kcu.constraint_schema = rc.constraint_schema "
            "JOIN information_schema.constraint_column_usage ccu "
            "  ON ccu.constraint_name = rc.constraint_name "
            "  AND ccu.constraint_schema = rc.constraint_schema "
            "WHERE rc.constraint_schema = ? AND kcu.table_name IN ('sessions', 'traces')",
            (schema,),
        )
    )
    return indexes, columns, fks


def test_fresh_database_is_at_the_latest_version(store_factory, backend: Backend) -> None:
    store_factory().close()
    assert _versions(backend) == [(m.version, m.name) for m in MIGRATIONS]
    if backend.name == "sqlite":
        assert backend.query("PRAGMA journal_mode") == [("wal",)]
    indexes, columns, fks = _schema(backend)
    assert {"idx_traces_session_time", "idx_traces_parent"} <= indexes
    assert {
        ("traces", "session_id", "sessions", "session_id", "CASCADE"),
        ("traces", "parent_step_id", "traces", "step_id", "SET NULL"),
        ("sessions", "parent_session_id", "sessions", "session_id", "SET NULL"),
    } <= fks
    seed_columns = {
        "session_id",
        "title",
        "current_status",
        "created_at",
        "updated_at",
        "metadata",
        "is_forked",
        "parent_session_id",
    }
    assert seed_columns <= columns["sessions"]
    seed_trace_columns = {
        "step_id",
        "session_id",
        "parent_step_id",
        "step_type",
        "name",
        "status",
        "input_data",
        "output_data",
        "error_message",
        "start_time",
        "end_time",
        "token_usage_prompt",
        "token_usage_completion",
    }
    assert seed_trace_columns <= columns["traces"]
    if backend.name == "postgres":  # types chosen for PostgreSQL, meanings kept
        types = dict(
            backend.query(
                "SELECT table_name || '.' || column_name, data_type FROM "
                "information_schema.columns WHERE table_schema = ?",
                (backend.schema,),  # type: ignore[attr-defined]
            )
        )
        assert types["traces.input_data"] == types["sessions.metadata"] == "jsonb"
        assert types["traces.start_time"] == types["sessions.next_seq"] == "bigint"
        assert types["sessions.is_forked"] == "integer" and types["blobs.data"] == "bytea"


def test_reopening_applies_nothing(store_factory, backend: Backend) -> None:
    store_factory().close()
    assert backend.migrate(LATEST_VERSION) == []


# Up to and including the latest: the latest version's sample rows must read back too, so they
# are known to be right before the next migration starts upgrading from them.
@pytest.mark.parametrize("start", range(LATEST_VERSION + 1))
def test_every_older_version_upgrades_in_place(store_factory, backend: Backend, start: int) -> None:
    assert backend.migrate(start) == list(range(1, start + 1))
    for statement in SAMPLE_ROWS.get(start, []):
        backend.query(_sql(statement, backend))
    store: Store = store_factory()
    assert _versions(backend)[-1][0] == LATEST_VERSION
    if start:
        s = store.record.get_session("old")
        assert (s.title, s.metadata) == ("from v1", {"temperature": 0.5})
        steps = store.record.steps("old")
        assert [(x.display_id, x.status) for x in steps] == [
            ("s0001", StepStatus.COMPLETED),
            ("s0002", StepStatus.RUNNING),
        ]
        assert steps[1].parent_display_id == "s0001"
        if start >= 2:  # workspace snapshots written by a version-2 database
            assert [s.seq for s in store.snapshots.list_snapshots("old")] == [2]
            assert store.snapshots.get_snapshot("old", 2) == {
                "a.txt": {"hash": _HELLO, "size": 5, "mode": 0o644}
            }
            assert store.snapshots.get_blobs([_HELLO]) == {_HELLO: b"hello"}
        lease = store.leases.acquire_lease("old", "new:2:def", 5)
        assert lease is not None  # never leased (v1, v2) or the old lease long expired (v3)
        assert lease.token == (5 if start >= 3 else 1)  # tokens only ever grow
        assert (
            store.leases.driven(lease).write(AddStep(session_id="old", step=user())).display_id
            == "s0003"
        )
        if start >= 7:  # a schedule, a webhook and their fires written by a version-7 one
            st = store.schedules
            got = st.get_schedule("sch1")
            assert (got.session_id, got.next_fire, got.fired, got.created_by) == (
                "old",
                123000,
                1,
                "alice",
            )
            assert [f.fire_id for f in st.pending_fires(10**6)] == ["hook.ci.d1"]
            hook = st.get_hook("ci")
            assert hook is not None and hook.secret == "whsec_x"
        if start >= 8:  # the holds written before carried over, counted as they were
            held = (
                [(2, 500, 120, True)] if start < 12 else [(1, 100, 40, True), (2, 500, 120, True)]
            )
            assert store.budgets.budget_holds("old") == held
            tokens = 120 if start < 12 else 160
            assert store.budgets.budget_totals(["s:old", "ud:alice:2026-12-06"]) == {
                "s:old": (tokens, pytest.approx(0.002 if start < 12 else 0.0024)),
                "ud:alice:2026-12-06": (tokens, pytest.approx(0.002 if start < 12 else 0.0024)),
            }
    sid = store.record.create_session().session_id
    store.record.write(BeginStep(session_id=sid, step=tool()))


def test_failed_migration_leaves_the_previous_version(
    store_factory, backend: Backend, monkeypatch
) -> None:
    from xclaw.store import migrations

    broken = migrations.Migration(
        LATEST_VERSION + 1,
        "broken",
        "test",
        ("CREATE TABLE extra (x)", "SELECT nonsense()"),
        ("CREATE TABLE extra (x int)", "SELECT nonsense()"),
    )
    store_factory().close()
    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, broken))
    monkeypatch.setattr(migrations, "LATEST_VERSION", LATEST_VERSION + 1)
    if backend.name == "postgres":
        from xclaw.store.postgres import conn as postgres_conn

        monkeypatch.setattr(postgres_conn, "MIGRATIONS", (*MIGRATIONS, broken))
        monkeypatch.setattr(postgres_conn, "LATEST_VERSION", LATEST_VERSION + 1)
    with pytest.raises(StoreError, match=r"cannot upgrade .* to schema version"):
        backend.migrate(LATEST_VERSION + 1)
    # atomic with its record: neither the table nor the version row exists
    if backend.name == "sqlite":
        assert backend.query("SELECT name FROM sqlite_master WHERE name='extra'") == []
    else:
        assert backend.query("SELECT to_regclass('extra')") == [(None,)]
    assert _versions(backend)[-1][0] == LATEST_VERSION


def test_a_new_database_whose_migration_fails_is_left_without_xclaw_tables(
    backend: Backend, monkeypatch
) -> None:
    """Every pending migration is one transaction: a crash or power loss while a new database
    is made leaves none of xclaw's tables (the next open makes it whole), never a schema at a
    version between that a reading command would refuse as an older xclaw's."""
    from xclaw.store import migrations

    broken = migrations.Migration(
        LATEST_VERSION + 1,
        "broken",
        "test",
        ("SELECT nonsense()",),
        ("SELECT nonsense()",),
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, broken))
    monkeypatch.setattr(migrations, "LATEST_VERSION", LATEST_VERSION + 1)
    if backend.name == "postgres":
        from xclaw.store.postgres import conn as postgres_conn

        monkeypatch.setattr(postgres_conn, "MIGRATIONS", (*MIGRATIONS, broken))
        monkeypatch.setattr(postgres_conn, "LATEST_VERSION", LATEST_VERSION + 1)
    with pytest.raises(StoreError, match=r"cannot upgrade .* to schema version"):
        backend.migrate(LATEST_VERSION + 1)
    if backend.name == "sqlite":
        tables = backend.query("SELECT name FROM sqlite_master WHERE type='table'")
    else:
        tables = backend.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    assert tables == []
    backend.migrate(LATEST_VERSION)  # made whole by the next open
    assert _versions(backend)[-1][0] == LATEST_VERSION


def test_newer_database_is_refused_clearly(store_factory, backend: Backend) -> None:
    store_factory().close()
    backend.query(
        "INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST_VERSION + 1,)
    )
    with pytest.raises(SchemaTooNew) as e:
        store_factory()
    assert e.value.code == "schema_too_new"
    assert f"schema version {LATEST_VERSION + 1}" in e.value.message
    assert "newer xclaw" in e.value.message and "Upgrade xclaw" in e.value.message


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable xclaw database"):
        SQLiteStore(junk)


def test_a_tutorial_style_database_is_not_silently_adopted(store_factory, backend: Backend) -> None:
    if backend.name == "sqlite":
        backend.path.parent.mkdir(parents=True)  # type: ignore[attr-defined]
    backend.query("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, title TEXT)")
    with pytest.raises(StoreError, match="written by something other than xclaw"):
        store_factory()


def test_the_tutorials_own_queries_read_our_data(store: Store, backend: Backend) -> None:
    sid = store.record.create_session(title="seed").session_id
    u = store.record.write(AddStep(session_id=sid, step=user("hi")))
    t = store.record.write(BeginStep(session_id=sid, step=llm(parent=u.step_id)))
    store.record.write(
        finish(
            sid, t.seq, output_data={"text": "yo"}, token_usage_prompt=10, token_usage_completion=2
        )
    )
    # the tutorial's resume query, and its trace-tree query
    rows = backend.query(
        "SELECT step_id, step_type, status, input_data, output_data FROM traces "
        "WHERE session_id = ? AND status = 'completed' ORDER BY start_time ASC",
        (sid,),
    )
    assert [r[1] for r in rows] == ["user_input", "llm_call"]
    kids = backend.query("SELECT step_id FROM traces WHERE parent_step_id = ?", (u.step_id,))
    assert kids == [(t.step_id,)]
    status = backend.query(
        "SELECT current_status, is_forked FROM sessions WHERE session_id = ?", (sid,)
    )
    assert status == [("Running", 0)]
    tokens = backend.query(
        "SELECT sum(token_usage_prompt + token_usage_completion), "
        "max(end_time - start_time) FROM traces"
    )[0]
    assert tokens[0] == 12 and tokens[1] >= 0


def test_concurrent_first_opens_migrate_once(backend: Backend) -> None:
    errors: list[BaseException] = []
    stores: list[Store] = []

    def open_one() -> None:
        try:
            stores.append(backend.open())
        except Exception as e:  # noqa: BLE001 - asserted on below
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == []
    assert _versions(backend) == [(m.version, m.name) for m in MIGRATIONS]
