"""Sessions: create, read, list, update, delete."""

from __future__ import annotations

import re

import pytest

from tests.store.builders import tool, user
from xclaw.errors import SessionNotFound, StoreError
from xclaw.store.base import Store
from xclaw.store.steps.model import Session, Status
from xclaw.store.steps.writes import AddStep, BeginStep


def test_create_generates_unguessable_ids(store: Store) -> None:
    a = store.record.create_session(title="first")
    b = store.record.create_session()
    assert a.session_id != b.session_id
    # token_urlsafe(16): 128 random bits, URL-safe, no ':' (step ids use it)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", a.session_id)
    assert a.status is Status.INIT and a.title == "first"
    assert a.created_at == a.updated_at > 0
    assert not a.is_forked and a.parent_session_id is None and not a.awaiting_input
    assert store.record.get_session(a.session_id) == a


def test_create_with_caller_id_and_metadata(store: Store) -> None:
    meta = {"temperature": 0.2, "max_tokens": 512, "note": "日志"}
    s = store.record.create_session(session_id="web-abc.123_x", title="t", metadata=meta)
    assert s.session_id == "web-abc.123_x"
    got = store.record.get_session("web-abc.123_x")
    assert got.metadata == meta and got.title == "t"


@pytest.mark.parametrize("bad", ["", "a:b", "-lead", ".dot", "sp ace", "x" * 129, "é"])
def test_create_rejects_bad_ids(store: Store, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid session id"):
        store.record.create_session(session_id=bad)
    assert store.record.list_sessions() == []


def test_create_duplicate_id_is_a_clear_error(store: Store) -> None:
    store.record.create_session(session_id="cli")
    with pytest.raises(StoreError, match="already exists"):
        store.record.create_session(session_id="cli")


def test_get_and_find_unknown(store: Store) -> None:
    assert store.record.find_session("nope") is None
    with pytest.raises(SessionNotFound) as e:
        store.record.get_session("nope")
    assert e.value.code == "unknown_session"


def test_list_most_recently_updated_first(store_factory) -> None:
    clock = iter(range(1000, 2000, 10))
    store = store_factory(clock=lambda: next(clock))
    a = store.record.create_session(title="a")
    store.record.create_session(title="b")
    store.record.create_session(title="c")
    store.record.write(AddStep(session_id=a.session_id, step=user()))  # touches a
    assert [s.title for s in store.record.list_sessions()] == ["a", "c", "b"]
    assert [s.title for s in store.record.list_sessions(limit=2)] == ["a", "c"]
    assert store.record.list_sessions(limit=0) == []
    assert all(isinstance(s, Session) for s in store.record.list_sessions())


def test_update_session(store: Store) -> None:
    s = store.record.create_session(title="old", metadata={"a": 1})
    renamed = store.record.update_session(s.session_id, title="new")
    assert renamed.title == "new" and renamed.metadata == {"a": 1}
    remeta = store.record.update_session(s.session_id, metadata={"b": 2})
    assert remeta.title == "new" and remeta.metadata == {"b": 2}
    assert store.record.get_session(s.session_id) == remeta
    with pytest.raises(SessionNotFound):
        store.record.update_session("nope", title="x")


def test_delete_cascades_steps_and_keeps_forks(store: Store) -> None:
    s = store.record.create_session(session_id="src")
    store.record.write(AddStep(session_id="src", step=user()))
    store.record.write(BeginStep(session_id="src", step=tool()))
    fork = store.record.fork("src", "s0001")
    store.record.delete_session("src")
    assert store.record.find_session("src") is None
    with pytest.raises(SessionNotFound):
        store.record.steps("src")
    kept = store.record.get_session(fork.session_id)
    assert kept.is_forked and kept.parent_session_id is None  # ON DELETE SET NULL
    assert [st.display_id for st in store.record.steps(fork.session_id)] == ["s0001"]
    with pytest.raises(SessionNotFound):
        store.record.delete_session(s.session_id)
