"""The shared SQL text (store/dialect.py) reads the same on both backends: `?` and `:name`
parameters in each backend's style, PostgreSQL casts on parameters kept there and dropped on
SQLite, and no literal `%` (psycopg would read it as a parameter)."""

from __future__ import annotations

import sqlite3

import pytest

from xclaw.store.dialect import SQLITE, to_postgres, to_sqlite


def test_positional_parameters_and_casts() -> None:
    text = "INSERT INTO t (a, b, c) VALUES (?, ?::jsonb, ?)"
    assert to_sqlite(text) == "INSERT INTO t (a, b, c) VALUES (?, ?, ?)"
    assert to_postgres(text) == "INSERT INTO t (a, b, c) VALUES (%s, %s::jsonb, %s)"


def test_named_parameters_and_casts() -> None:
    text = "SELECT :new::text || substr(x, :cut::int + 2), CAST(y AS BIGINT) > :seq"
    assert to_sqlite(text) == "SELECT :new || substr(x, :cut + 2), CAST(y AS BIGINT) > :seq"
    assert to_postgres(text) == (
        "SELECT %(new)s::text || substr(x, %(cut)s::int + 2), CAST(y AS BIGINT) > %(seq)s"
    )


def test_a_cast_of_an_expression_is_not_a_parameter() -> None:
    text = "SELECT a::text, 'x:y' FROM t WHERE b=?"
    assert to_sqlite(text) == text
    assert to_postgres(text) == "SELECT a::text, 'x:y' FROM t WHERE b=%s"


def test_quoted_text_is_never_a_parameter() -> None:
    # A fork's step ids are `new || ':s' || seq`: the literal must reach both backends intact.
    text = "SELECT :new || ':s' || seq, '?', 'it''s :x' FROM t WHERE a = ?"
    assert to_sqlite(text) == text
    assert to_postgres(text) == "SELECT %(new)s || ':s' || seq, '?', 'it''s :x' FROM t WHERE a = %s"


def test_a_percent_sign_is_refused_for_postgres() -> None:
    with pytest.raises(ValueError, match="%"):
        to_postgres("SELECT 1 FROM t WHERE a LIKE '%x' AND b=?")


def test_sqlite_in_lists_are_bound_in_chunks() -> None:
    values = [str(i) for i in range(1234)]
    parts = list(SQLITE.any_of("hash", values))
    assert [len(p) for _, p in parts] == [500, 500, 234]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE blobs (hash TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO blobs VALUES (?)", [(v,) for v in values[::2]])
    found = {
        r[0] for cond, p in parts for r in conn.execute(f"SELECT hash FROM blobs WHERE {cond}", p)
    }
    assert found == set(values[::2])
    assert list(SQLITE.any_of("hash", [])) == []
