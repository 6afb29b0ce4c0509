"""One contract suite for every Store backend.

`store` is parametrised over BACKENDS. Today that is only "sqlite" (a real file in tmp_path);
the PostgreSQL backend adds "postgres" here: its factory reads XCLAW_TEST_PG_URL and skips
when it is unset (unless XCLAW_TEST_REQUIRE_PG is set, as in CI). Tests that are about SQLite
itself (PRAGMAs, files, processes) use `sqlite_store` / `sqlite_path` instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from xclaw.store.base import Store
from xclaw.store.sqlite import SQLiteStore

StoreFactory = Callable[..., Store]


def _sqlite_factory(tmp_path: Path) -> StoreFactory:
    def make(**kwargs: Any) -> Store:
        return SQLiteStore(tmp_path / "db" / "xclaw.db", **kwargs)

    return make


def _postgres_url() -> str:
    url = os.environ.get("XCLAW_TEST_PG_URL")
    if not url:
        if os.environ.get("XCLAW_TEST_REQUIRE_PG"):
            pytest.fail("XCLAW_TEST_REQUIRE_PG is set but XCLAW_TEST_PG_URL is not")
        pytest.skip("set XCLAW_TEST_PG_URL to run the PostgreSQL contract tests")
    return url


# name -> factory builder; add "postgres": lambda tmp_path: <factory using _postgres_url()>
# when that backend exists (and mark its param with pytest.mark.postgres).
BACKENDS: dict[str, Callable[[Path], StoreFactory]] = {"sqlite": _sqlite_factory}


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens stores of one backend (all on the same database); closes them afterwards."""
    opened: list[Store] = []
    build = BACKENDS[request.param](tmp_path)

    def make(**kwargs: Any) -> Store:
        s = build(**kwargs)
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
