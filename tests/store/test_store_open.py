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


@pytest.mark.parametrize("url", ["postgresql://u@localhost/db", "postgres://localhost/x"])
def test_postgres_is_not_there_yet(url: str) -> None:
    with pytest.raises(StoreError, match="PostgreSQL support not installed yet"):
        open_store(url)


@pytest.mark.parametrize("bad", ["mysql://x/y", "", "   "])
def test_bad_targets(bad: str) -> None:
    with pytest.raises(StoreError):
        open_store(bad)


def test_memory_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        SQLiteStore(":memory:")
