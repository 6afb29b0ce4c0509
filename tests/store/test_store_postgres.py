"""PostgreSQL specifics behind the contract: commit durability per operation, schemas."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.store.builders import llm, tool
from tests.store.conftest import PostgresBackend, postgres_url
from tests.writes import finish
from xclaw.store.postgres.store import PostgresStore
from xclaw.store.steps.writes import BeginStep, Sync

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store() -> Iterator[PostgresStore]:
    backend = PostgresBackend(postgres_url())
    store = backend.open()
    assert isinstance(store, PostgresStore)
    yield store
    store.close()
    backend.drop()


def test_durable_commits_wait_for_the_wal_and_others_do_not(pg_store: PostgresStore) -> None:
    """docs/postgres.md: write-ahead rows commit with synchronous_commit on, completions off."""

    def level(durable: bool) -> str:
        return pg_store.db._pool.run(
            lambda c: c.execute("SHOW synchronous_commit").fetchone()[0],
            Sync.DURABLE if durable else Sync.RELAXED,
        )

    assert level(True) == "on" and level(False) == "off"
    seen: list[tuple[bool, str]] = []
    real = pg_store.db._pool.run

    def spy(fn, sync: Sync):
        def probe(conn):
            seen.append(
                (sync is Sync.DURABLE, conn.execute("SHOW synchronous_commit").fetchone()[0])
            )
            return fn(conn)

        return real(probe, sync)

    pg_store.db._pool.run = spy  # type: ignore[method-assign]
    sid = pg_store.record.create_session().session_id
    step = pg_store.record.write(BeginStep(session_id=sid, step=tool()))  # write-ahead
    pg_store.record.write(finish(sid, step.seq, output_data="ok"))
    pg_store.record.write(BeginStep(session_id=sid, step=llm()))
    assert [s for s in seen if s[0] or s[1] == "off"] == seen  # the level matches the policy
    assert [d for d, _ in seen] == [True, True, False, False]


def test_tables_live_in_the_schema_of_the_url(pg_store: PostgresStore) -> None:
    rows = pg_store.db._pool.read(
        lambda c: c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (pg_store.schema,),
        ).fetchall()
    )
    assert {"sessions", "traces", "schema_version", "workers", "blobs"} <= {r[0] for r in rows}
