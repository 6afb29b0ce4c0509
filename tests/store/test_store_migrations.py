"""Schema versions: numbered and append-only; every older database upgrades in place; a
newer one is refused with words; the seed's own SQL still reads the data."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tests.store.builders import llm, tool, user
from xclaw.errors import SchemaTooNew, StoreError
from xclaw.store.migrations import LATEST_VERSION, MIGRATIONS, migrate_sqlite
from xclaw.store.model import StepStatus
from xclaw.store.sqlite import SQLiteStore

# Rows a database of each version holds, written with that version's SQL. When migration N+1
# is added, the upgrade test below runs from every version 1..N with these rows automatically;
# add SAMPLE_ROWS[N+1] for the new version in the same change.
SAMPLE_ROWS: dict[int, list[str]] = {
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
SAMPLE_ROWS[2] = [
    *SAMPLE_ROWS[1],
    (
        "INSERT INTO blobs (hash, size, encoding, data, created_at) "
        f"VALUES ('{_HELLO}', 5, 'raw', X'68656c6c6f', 1500)"
    ),
    (
        "INSERT INTO snapshots (session_id, seq, base_seq, manifest, removed, depth, files, "
        "bytes, new_bytes, skipped, created_at) VALUES ('old', 2, NULL, "
        f"'{{\"a.txt\":{{\"hash\":\"{_HELLO}\",\"size\":5,\"mode\":420}}}}', NULL, 0, "
        "1, 5, 5, 0, 1500)"
    ),
]


def test_migrations_are_numbered_without_gaps() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert LATEST_VERSION == MIGRATIONS[-1].version
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)
    assert all(m.why and m.sqlite for m in MIGRATIONS)
    assert set(SAMPLE_ROWS) == set(range(1, LATEST_VERSION + 1)), "add sample rows"


def _versions(path: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
    finally:
        conn.close()


def test_fresh_database_is_at_the_latest_version(sqlite_path: Path) -> None:
    SQLiteStore(sqlite_path).close()
    assert _versions(sqlite_path) == [(m.version, m.name) for m in MIGRATIONS]
    conn = sqlite3.connect(sqlite_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"idx_traces_session_time", "idx_traces_parent"} <= names
        fks = {(r[2], r[3], r[4], r[6]) for r in conn.execute("PRAGMA foreign_key_list(traces)")}
        assert fks == {
            ("sessions", "session_id", "session_id", "CASCADE"),
            ("traces", "parent_step_id", "step_id", "SET NULL"),
        }
        (fk,) = conn.execute("PRAGMA foreign_key_list(sessions)").fetchall()
        assert (fk[2], fk[3], fk[6]) == ("sessions", "parent_session_id", "SET NULL")
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
        assert seed_columns <= {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
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
        assert seed_trace_columns <= {r[1] for r in conn.execute("PRAGMA table_info(traces)")}
    finally:
        conn.close()


def test_reopening_applies_nothing(sqlite_path: Path) -> None:
    SQLiteStore(sqlite_path).close()
    conn = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        assert migrate_sqlite(conn) == []
    finally:
        conn.close()


# Up to and including the latest: the latest version's sample rows must read back too, so they
# are known to be right before the next migration starts upgrading from them.
@pytest.mark.parametrize("start", range(LATEST_VERSION + 1))
def test_every_older_version_upgrades_in_place(sqlite_path: Path, start: int) -> None:
    sqlite_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        assert migrate_sqlite(conn, target=start) == list(range(1, start + 1))
        for statement in SAMPLE_ROWS.get(start, []):
            conn.execute(statement)
    finally:
        conn.close()
    with SQLiteStore(sqlite_path) as store:
        assert _versions(sqlite_path)[-1][0] == LATEST_VERSION
        if start:
            s = store.get_session("old")
            assert (s.title, s.metadata) == ("from v1", {"temperature": 0.5})
            steps = store.steps("old")
            assert [(x.display_id, x.status) for x in steps] == [
                ("s0001", StepStatus.COMPLETED),
                ("s0002", StepStatus.RUNNING),
            ]
            assert steps[1].parent_display_id == "s0001"
            if start >= 2:  # workspace snapshots written by a version-2 database
                assert [s.seq for s in store.list_snapshots("old")] == [2]
                assert store.get_snapshot("old", 2) == {
                    "a.txt": {"hash": _HELLO, "size": 5, "mode": 0o644}
                }
                assert store.get_blobs([_HELLO]) == {_HELLO: b"hello"}
            assert store.add_step("old", user()).display_id == "s0003"
        sid = store.create_session().session_id
        store.begin_step(sid, tool())


def test_failed_migration_leaves_the_previous_version(sqlite_path: Path, monkeypatch) -> None:
    from xclaw.store import migrations

    broken = migrations.Migration(
        LATEST_VERSION + 1, "broken", "test", ("CREATE TABLE extra (x)", "SELECT nonsense()")
    )
    SQLiteStore(sqlite_path).close()
    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, broken))
    monkeypatch.setattr(migrations, "LATEST_VERSION", LATEST_VERSION + 1)
    conn = sqlite3.connect(sqlite_path, isolation_level=None)
    try:
        with pytest.raises(StoreError, match="cannot upgrade .* to schema version"):
            migrations.migrate_sqlite(conn)
        # atomic with its record: neither the table nor the version row exists
        assert conn.execute("SELECT name FROM sqlite_master WHERE name='extra'").fetchall() == []
    finally:
        conn.close()
    assert _versions(sqlite_path)[-1][0] == LATEST_VERSION


def test_newer_database_is_refused_clearly(sqlite_path: Path) -> None:
    SQLiteStore(sqlite_path).close()
    conn = sqlite3.connect(sqlite_path)
    with conn:
        conn.execute(
            "INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST_VERSION + 1,)
        )
    conn.close()
    with pytest.raises(SchemaTooNew) as e:
        SQLiteStore(sqlite_path)
    assert e.value.code == "schema_too_new"
    assert f"schema version {LATEST_VERSION + 1}" in e.value.message
    assert "newer xclaw" in e.value.message and "Upgrade xclaw" in e.value.message


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable xclaw database"):
        SQLiteStore(junk)


def test_a_seed_style_database_is_not_silently_adopted(tmp_path: Path) -> None:
    path = tmp_path / "seed.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, title TEXT)")
    conn.close()
    with pytest.raises(StoreError, match="written by something other than xclaw"):
        SQLiteStore(path)


def test_the_seeds_own_queries_read_our_data(sqlite_store: SQLiteStore) -> None:
    sid = sqlite_store.create_session(title="seed").session_id
    u = sqlite_store.add_step(sid, user("hi"))
    t = sqlite_store.begin_step(sid, llm(parent=u.step_id))
    sqlite_store.complete_step(
        sid, t.seq, output_data={"text": "yo"}, token_usage_prompt=10, token_usage_completion=2
    )
    conn = sqlite3.connect(sqlite_store.path)
    try:
        # R6: the resume query of the seed, and R5's tree query
        rows = conn.execute(
            "SELECT step_id, step_type, status, input_data, output_data FROM traces "
            "WHERE session_id = ? AND status = 'completed' ORDER BY start_time ASC",
            (sid,),
        ).fetchall()
        assert [r[1] for r in rows] == ["user_input", "llm_call"]
        kids = conn.execute(
            "SELECT step_id FROM traces WHERE parent_step_id = ?", (u.step_id,)
        ).fetchall()
        assert kids == [(t.step_id,)]
        status = conn.execute(
            "SELECT current_status, is_forked FROM sessions WHERE session_id = ?", (sid,)
        ).fetchone()
        assert status == ("Running", 0)
        tokens = conn.execute(
            "SELECT sum(token_usage_prompt + token_usage_completion), "
            "max(end_time - start_time) FROM traces"
        ).fetchone()
        assert tokens[0] == 12 and tokens[1] >= 0
    finally:
        conn.close()


def test_concurrent_first_opens_migrate_once(sqlite_path: Path) -> None:
    errors: list[BaseException] = []
    stores: list[SQLiteStore] = []

    def open_one() -> None:
        try:
            stores.append(SQLiteStore(sqlite_path))
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
    assert _versions(sqlite_path) == [(m.version, m.name) for m in MIGRATIONS]
