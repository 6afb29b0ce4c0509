"""Who may write what (xclaw/store/access.py): a reading open of a store writes nothing and
refuses what is not an existing xclaw database of this version; no access writes into a file
or database that is not xclaw's. SQLite files and PostgreSQL schemas, checked from outside:
file bytes, modes and directory listings, the tables the database itself reports."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from tests.store.conftest import Backend
from xclaw.errors import DatabaseRefused, SchemaTooNew, StoreError
from xclaw.store import Access, open_store
from xclaw.store.migrations import LATEST_VERSION, MIGRATIONS
from xclaw.store.sqlite.store import SQLiteStore


def listing(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under root: (mode, sha256 of its bytes)."""
    return {
        str(p.relative_to(root)): (
            p.stat().st_mode & 0o7777,
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
        )
        for p in sorted(root.rglob("*"))
    }


def foreign_sqlite(path: Path, *, wal: bool = False) -> None:
    """Another program's database: one table of its own, rollback journal (or WAL)."""
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.close()
    os.chmod(path, 0o644)


def tables(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
    finally:
        conn.close()


def journal_mode(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


# --- SQLite: what is at the path --------------------------------------------------------------


def _text_file(path: Path) -> None:
    path.write_text("dear diary\n" * 50)
    os.chmod(path, 0o644)


def _empty_file(path: Path) -> None:
    path.write_bytes(b"")
    os.chmod(path, 0o644)


def _binary_file(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 40)
    os.chmod(path, 0o644)


def _sqlite_header_only(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)  # cut short
    os.chmod(path, 0o644)


def _marked_empty_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    os.chmod(path, 0o644)


REFUSED = {
    "marked empty sqlite": (_marked_empty_sqlite, "another program has marked as its own"),
    "text file": (_text_file, "not a SQLite database file"),
    "binary file": (_binary_file, "not a SQLite database file"),
    "torn header": (_sqlite_header_only, "cut short"),
    "foreign sqlite": (foreign_sqlite, "written by something other than xclaw"),
    "foreign wal sqlite": (
        lambda p: foreign_sqlite(p, wal=True),
        "written by something other than xclaw",
    ),
}


@pytest.mark.parametrize("access", list(Access))
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_file_that_is_not_xclaws_is_refused_and_left_as_it_was(
    tmp_path: Path, kind: str, access: Access
) -> None:
    make, why = REFUSED[kind]
    path = tmp_path / "theirs.db"
    make(path)
    before = listing(tmp_path)
    with pytest.raises(DatabaseRefused, match=why) as e:
        open_store(path, access=access)
    assert "not a usable xclaw database" in e.value.message and e.value.exit_code == 2
    assert listing(tmp_path) == before  # no byte, mode or -wal/-shm file
    if kind == "foreign wal sqlite":
        assert tables(path) == ["notes"] and journal_mode(path) == "wal"
    if kind == "foreign sqlite":
        assert tables(path) == ["notes"] and journal_mode(path) == "delete"


@pytest.mark.parametrize("access", [Access.READ, Access.WRITE])
def test_no_database_is_refused_without_creating_anything(tmp_path: Path, access: Access) -> None:
    path = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(DatabaseRefused, match=f"no database at {path}"):
        open_store(path, access=access)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("access", [Access.READ, Access.WRITE])
def test_an_empty_file_is_no_database_to_read(tmp_path: Path, access: Access) -> None:
    path = tmp_path / "empty.db"
    _empty_file(path)
    with pytest.raises(DatabaseRefused, match="holds no xclaw tables"):
        open_store(path, access=access)
    assert listing(tmp_path) == {"empty.db": (0o644, hashlib.sha256(b"").hexdigest())}


def test_a_directory_is_refused(tmp_path: Path) -> None:
    for access in Access:
        with pytest.raises(DatabaseRefused, match="is a directory"):
            open_store(tmp_path, access=access)


def test_create_makes_a_new_private_database_or_adopts_an_empty_file(tmp_path: Path) -> None:
    new = tmp_path / "a" / "b" / "x.db"
    open_store(new, access=Access.CREATE).close()
    assert tables(new)[:1] and (new.stat().st_mode & 0o777) == 0o600
    assert (new.parent.stat().st_mode & 0o777) == 0o700
    empty = tmp_path / "touched.db"
    _empty_file(empty)
    open_store(empty, access=Access.CREATE).close()
    assert "sessions" in tables(empty) and (empty.stat().st_mode & 0o777) == 0o600
    blank = tmp_path / "blank.db"  # a SQLite database without tables or marks
    conn = sqlite3.connect(blank)
    conn.execute("VACUUM")
    conn.close()
    assert blank.read_bytes().startswith(b"SQLite format 3")
    open_store(blank, access=Access.CREATE).close()
    assert "sessions" in tables(blank)


def _xclaw_db(path: Path) -> str:
    with SQLiteStore(path) as store:
        sid = store.record.create_session(title="kept").session_id
    os.chmod(path, 0o644)
    return sid


def test_read_writes_nothing_to_an_xclaw_database(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    sid = _xclaw_db(path)
    before = listing(tmp_path)
    store = open_store(path, access=Access.READ)
    try:
        assert store.record.get_session(sid).title == "kept"
        with pytest.raises(StoreError, match="opened read-only"):
            store.record.create_session(title="no")
        # Below the store: SQLite itself refuses a write on its read-only connections.
        with pytest.raises(StoreError, match="readonly database"):
            store.db._read(lambda conn: conn.execute("CREATE TABLE sneaky (x)"))  # type: ignore[attr-defined]
    finally:
        store.close()
    after = listing(tmp_path)
    # SQLite's own -wal/-shm for a reader of a WAL database aside, nothing changed: no chmod
    # to 0600 (a reading command leaves the mode the user chose), no byte of the file.
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == before


def _set_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO schema_version VALUES (?, 'from the future', 0)", (version,))
    conn.close()


@pytest.mark.parametrize("access", list(Access))
def test_a_newer_database_is_refused_by_every_access(tmp_path: Path, access: Access) -> None:
    path = tmp_path / "x.db"
    _xclaw_db(path)
    _set_version(path, LATEST_VERSION + 1)
    before = listing(tmp_path)
    with pytest.raises(SchemaTooNew, match="newer xclaw") as e:
        open_store(path, access=access)
    assert e.value.exit_code == 2
    assert listing(tmp_path) == before


def test_an_older_database_is_not_read_until_upgraded_by_a_writing_open(tmp_path: Path) -> None:
    """Reading commands do not upgrade: they name the command that does (decided: an older
    database's rows lack the columns the reads select, so it cannot be read as it is)."""
    from xclaw.store.migrations import migrate_sqlite

    path = tmp_path / "x.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate_sqlite(conn, target=LATEST_VERSION - 1)
    conn.close()
    os.chmod(path, 0o644)
    before = listing(tmp_path)
    with pytest.raises(DatabaseRefused, match=r"older xclaw .* `xclaw fsck --repair --db "):
        open_store(path, access=Access.READ)
    assert listing(tmp_path) == before
    open_store(path, access=Access.WRITE).close()  # upgrades in place
    store = open_store(path, access=Access.READ)
    try:
        assert store.record.list_sessions() == []
    finally:
        store.close()


def test_another_programs_schema_version_table_is_not_taken_for_ours(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER, name TEXT, applied_at INT)")
        conn.execute("INSERT INTO schema_version VALUES (1, 'create_users', 0)")
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()
    for access in Access:
        with pytest.raises(DatabaseRefused, match="records version 1 as 'create_users'"):
            open_store(path, access=access)
    assert tables(path) == ["schema_version", "users"]


def test_the_history_is_xclaws_own() -> None:
    assert [m.name for m in MIGRATIONS][:1] == ["seed_tables"]


# --- PostgreSQL --------------------------------------------------------------------------------


def _pg_tables(backend: Backend) -> list[str]:
    return [
        r[0]
        for r in backend.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY 1",
            (backend.schema,),  # type: ignore[attr-defined]
        )
    ]


def _pg_schema_exists(backend: Backend) -> bool:
    conn = backend._connect()  # type: ignore[attr-defined]
    try:
        row = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s",
            (backend.schema,),  # type: ignore[attr-defined]
        ).fetchone()
        return row is not None
    finally:
        conn.close()


@pytest.mark.postgres
@pytest.mark.parametrize("access", [Access.READ, Access.WRITE])
def test_postgres_read_of_a_missing_schema_creates_nothing(tmp_path: Path, access: Access) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        with pytest.raises(DatabaseRefused, match="no database at postgresql://"):
            backend.open(access=access)
        assert not _pg_schema_exists(backend)
    finally:
        backend.drop()


@pytest.mark.postgres
@pytest.mark.parametrize("access", [Access.READ, Access.WRITE])
def test_postgres_read_of_a_schema_without_xclaw_tables_creates_none(
    tmp_path: Path, access: Access
) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        backend.query("CREATE TABLE orders (id int)")
        with pytest.raises(DatabaseRefused, match="holds no xclaw tables"):
            backend.open(access=access)
        assert _pg_tables(backend) == ["orders"]
    finally:
        backend.drop()


@pytest.mark.postgres
def test_postgres_foreign_tables_and_versions_are_refused(tmp_path: Path) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        backend.query("CREATE TABLE schema_version (version int, name text, applied_at bigint)")
        backend.query("INSERT INTO schema_version VALUES (1, 'create_orders', 0)")
        for access in Access:
            with pytest.raises(DatabaseRefused, match="records version 1 as 'create_orders'"):
                backend.open(access=access)
        assert _pg_tables(backend) == ["schema_version"]
    finally:
        backend.drop()


@pytest.mark.postgres
def test_postgres_read_refuses_older_and_newer_and_writes_nothing(tmp_path: Path) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        backend.migrate(LATEST_VERSION - 1)
        with pytest.raises(DatabaseRefused, match="older xclaw"):
            backend.open(access=Access.READ)
        versions = backend.query("SELECT max(version) FROM schema_version")
        assert versions == [(LATEST_VERSION - 1,)]
        backend.open(access=Access.WRITE).close()  # upgrades in place
        store = backend.open(access=Access.READ)
        try:
            assert store.record.list_sessions() == []
            with pytest.raises(StoreError, match="read-only"):
                store.record.create_session(title="no")
            # Below the store: the server itself refuses a write on these connections.
            with pytest.raises(StoreError, match="read-only transaction"):
                store.db._read(lambda conn: conn.execute("CREATE TABLE sneaky (x int)"))  # type: ignore[attr-defined]
        finally:
            store.close()
        backend.query("INSERT INTO schema_version VALUES (?, 'from the future', 0)", (99,))
        for access in Access:
            with pytest.raises(SchemaTooNew):
                backend.open(access=access)
    finally:
        backend.drop()
