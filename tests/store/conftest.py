"""One contract suite for every Store backend.

`store`, `store_factory` and `backend` are parametrised over BACKENDS: "sqlite" (a real file
in tmp_path) and "postgres" (a schema of its own in the database at XCLAW_TEST_PG_URL,
dropped after the test). Without XCLAW_TEST_PG_URL the postgres cases are skipped with the
reason shown, unless XCLAW_TEST_REQUIRE_PG is set (CI), then they fail. Tests that are about
SQLite itself (its writer, PRAGMAs, WAL files) use `sqlite_store` / `sqlite_path`.

`backend` is the small helper that replaces SQLite-only checks: raw SQL with `?`
placeholders on either database, an integrity check, migrating to a given version.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from xclaw.store.base import Store
from xclaw.store.sqlite.store import SQLiteStore

StoreFactory = Callable[..., Store]


def postgres_url() -> str:
    """The test database's URL, or skip (fail in CI) with the reason."""
    url = os.environ.get("XCLAW_TEST_PG_URL")
    if not url:
        if os.environ.get("XCLAW_TEST_REQUIRE_PG"):
            pytest.fail("XCLAW_TEST_REQUIRE_PG is set but XCLAW_TEST_PG_URL is not")
        pytest.skip("set XCLAW_TEST_PG_URL to run the PostgreSQL contract tests")
    return url


class Backend:
    """One database of one backend for one test."""

    name = ""
    url = ""  # what `open_store` / `--db` take

    def open(self, **kwargs: Any) -> Store:
        raise NotImplementedError

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Raw SQL (`?` placeholders) on a connection of its own, committed."""
        raise NotImplementedError

    def migrate(self, target: int) -> list[int]:
        """Create the schema up to version `target` only (for upgrade tests)."""
        raise NotImplementedError

    def check_integrity(self) -> None:
        """The database's own checks, then the record's invariants in plain SQL."""
        raise NotImplementedError

    def drop(self) -> None:
        pass

    def check_record(self) -> None:
        """What every backend must hold: no orphan steps, parents inside their session and
        earlier, sequence numbers unique and below next_seq."""
        q = self.query
        assert (
            q(
                "SELECT step_id FROM traces t WHERE NOT EXISTS "
                "(SELECT 1 FROM sessions s WHERE s.session_id = t.session_id)"
            )
            == []
        )
        assert (
            q(
                "SELECT c.step_id FROM traces c LEFT JOIN traces p ON p.step_id = c.parent_step_id "
                "WHERE c.parent_step_id IS NOT NULL AND (p.step_id IS NULL "
                "OR p.session_id <> c.session_id OR p.seq >= c.seq)"
            )
            == []
        )
        assert (
            q(
                "SELECT t.step_id FROM traces t JOIN sessions s ON s.session_id = t.session_id "
                "WHERE t.seq >= s.next_seq"
            )
            == []
        )
        assert (
            q("SELECT session_id, seq FROM traces GROUP BY session_id, seq HAVING count(*) > 1")
            == []
        )


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "db" / "xclaw.db"
        self.url = str(self.path)

    def open(self, **kwargs: Any) -> Store:
        return SQLiteStore(self.path, **kwargs)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            with conn:
                return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def migrate(self, target: int) -> list[int]:
        from xclaw.store.migrations import migrate_sqlite

        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return migrate_sqlite(conn, target=target)
        finally:
            conn.close()

    def check_integrity(self) -> None:
        assert self.query("PRAGMA integrity_check") == [("ok",)]
        assert self.query("PRAGMA foreign_key_check") == []
        self.check_record()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.schema = "xclaw_t_" + secrets.token_hex(6)
        sep = "&" if "?" in base_url else "?"
        self.url = f"{base_url}{sep}schema={self.schema}&pool_max=4"

    def _connect(self) -> Any:
        from xclaw.store.postgres.conn import connect, parse_url

        try:
            return connect(parse_url(self.url))
        except Exception as e:
            if os.environ.get("XCLAW_TEST_REQUIRE_PG"):
                raise
            pytest.skip(f"PostgreSQL at {self.base_url} is not reachable: {e}")

    def open(self, **kwargs: Any) -> Store:
        from xclaw.store.postgres.store import PostgresStore

        return PostgresStore(self.url, **kwargs)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        conn = self._connect()
        try:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def migrate(self, target: int) -> list[int]:
        from xclaw.store.postgres.conn import migrate_postgres

        conn = self._connect()
        try:
            return migrate_postgres(conn, schema=self.schema, target=target)
        finally:
            conn.close()

    def check_integrity(self) -> None:
        # amcheck verifies every B-tree index of our tables against its heap, the
        # PostgreSQL counterpart of PRAGMA integrity_check (skipped where not installable).
        conn = self._connect()
        try:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public")
                have = True
            except Exception:  # noqa: BLE001 - needs a superuser; the SQL checks still run
                have = False
            if have:
                conn.execute(
                    "SELECT public.bt_index_check(c.oid, true) FROM pg_index i "
                    "JOIN pg_class c ON c.oid = i.indexrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
                    (self.schema,),
                ).fetchall()
        finally:
            conn.close()
        self.check_record()

    def drop(self) -> None:
        conn = self._connect()
        try:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        finally:
            conn.close()


def _sqlite(tmp_path: Path) -> Backend:
    return SqliteBackend(tmp_path)


def _postgres(tmp_path: Path) -> Backend:
    return PostgresBackend(postgres_url())


BACKENDS: dict[str, Callable[[Path], Backend]] = {"sqlite": _sqlite, "postgres": _postgres}
BACKEND_PARAMS = [
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = BACKENDS[request.param](tmp_path)
    yield b
    b.drop()


@pytest.fixture
def store_factory(backend: Backend) -> Iterator[StoreFactory]:
    """Opens stores of one backend (all on the same database); closes them afterwards."""
    opened: list[Store] = []

    def make(**kwargs: Any) -> Store:
        s = backend.open(**kwargs)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "xclaw.db"


@pytest.fixture
def sqlite_store(sqlite_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(sqlite_path)
    yield s
    s.close()
