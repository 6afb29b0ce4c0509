"""open_store: pick the backend from a path or URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.errors import StoreError
from xclaw.store import Store, open_store
from xclaw.store.sqlite import SQLiteStore


def test_a_path_opens_sqlite_creating_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "x.db"
    store = open_store(path)
    try:
        assert isinstance(store, SQLiteStore) and isinstance(store, Store)
        assert store.url == str(path) and path.exists()
    finally:
        store.close()
    s2 = open_store(str(path))
    s2.close()


def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")  # sqlite:////abs/path
    store.close()
    assert (tmp_path / "abs.db").exists()
    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///rel.db").close()
    assert (tmp_path / "rel.db").exists()


@pytest.mark.postgres
def test_a_postgresql_url_opens_postgres_with_the_password_hidden() -> None:
    from tests.store.conftest import PostgresBackend, postgres_url
    from xclaw.store.postgres import PostgresStore

    backend = PostgresBackend(postgres_url())
    try:
        store = open_store(backend.url)
        try:
            assert isinstance(store, PostgresStore) and isinstance(store, Store)
            assert store.schema == backend.schema
        finally:
            store.close()
    finally:
        backend.drop()
    from xclaw.store.postgres_conn import parse_url, redact_url

    assert redact_url("postgresql://u:secret@h:5/db?x=1") == "postgresql://u:***@h:5/db?x=1"
    target = parse_url("postgres://u:pw@h/db?schema=s1&pool_max=3&sslmode=disable")
    assert (target.schema, target.pool_max) == ("s1", 3)
    assert "pw" not in target.display and "schema" not in target.conninfo
    assert "sslmode=disable" in target.conninfo and "search_path" in target.conninfo


def test_an_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL at postgresql://u:\\*\\*\\*@127.0.0.1:1/db"):
        open_store("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=2")


@pytest.mark.parametrize("bad", ["mysql://x/y", "", "   "])
def test_bad_targets(bad: str) -> None:
    with pytest.raises(StoreError):
        open_store(bad)


def test_memory_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        SQLiteStore(":memory:")
