"""The columns of `sessions` and `traces` are declared once, on model.Session and model.Step
(store/steps/columns.py): the schema agrees with the declaration, and every path that writes or
copies a row — a step's write path, completion, fork, export and import — carries every
declared column (docs/storage.md, "Adding a column")."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from tests.store.builders import llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.store.base import Store
from xclaw.store.steps.model import Completion, NewStep, Session, Status, Step
from xclaw.store.steps.rows import SESSIONS, STEPS
from xclaw.store.steps.writes import AddStep, BeginStep
from xclaw.store.transfer.format import export_lines, parse_export

# Columns the store writes itself, not part of the row values (leases, the step counter, the
# worker that wrote a step, an LLM call's budget hold: neither copied by a fork nor exported,
# since spend is counted once, where it was spent).
_STORE_ONLY = {
    "sessions": {"next_seq", "lease_owner", "lease_token", "lease_expires_at"},
    "traces": {
        "worker",
        *("held_tokens", "held_usd", "spent_tokens", "spent_usd", "hold_owner", "hold_day"),
    },
}


def _schema_columns(backend: Backend, table: str) -> set[str]:
    if backend.name == "sqlite":
        return {r[1] for r in backend.query(f"PRAGMA table_info({table})")}
    rows = backend.query(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_name=? AND table_schema=current_schema()",
        (table,),
    )
    return {r[0] for r in rows}


def test_the_declaration_is_the_schema(store: Store, backend: Backend) -> None:
    for table in (SESSIONS, STEPS):
        declared = {c.name for c in table.columns}
        assert _schema_columns(backend, table.table) == declared | _STORE_ONLY[table.table]
    # Every field of the row values is a column, and what fills a row names only columns.
    assert {f.name for f in fields(Step)} == {c.field for c in STEPS.columns}
    assert {f.name for f in fields(Session)} == {c.field for c in SESSIONS.columns}
    for partial in (NewStep, Completion):
        assert {f.name for f in fields(partial)} <= set(STEPS.by_field)


def _record(store: Store) -> tuple[str, list[Step]]:
    sid = store.record.create_session(title="t", metadata={"k": [1, "é"]}).session_id
    u = store.record.write(AddStep(session_id=sid, step=user("go")))
    call = store.record.write(BeginStep(session_id=sid, step=llm(u.step_id)))
    store.record.write(
        finish(
            sid,
            call.seq,
            output_data={"text": "x"},
            token_usage_prompt=7,
            token_usage_completion=None,
        )
    )
    t = store.record.write(BeginStep(session_id=sid, step=tool("ls", call.step_id, call_id="c1")))
    store.record.write(finish(sid, t.seq, error_message="boom", output_data="partial"))
    store.record.write(
        BeginStep(session_id=sid, step=tool("pwd", call.step_id, call_id="c2"))
    )  # left running
    return sid, store.record.steps(sid)


def test_every_declared_column_survives_export_and_import(store_factory) -> None:
    source, target = store_factory(), store_factory()
    sid, steps = _record(source)
    session = source.record.get_session(sid)
    lines = list(export_lines(source, [session]))
    source.record.delete_session(sid)  # the same database on PostgreSQL's shared schema
    (imported,) = target.record.import_sessions(parse_export(lines))
    assert imported.session == session
    assert target.record.steps(sid) == steps
    assert target.record.get_session(sid) == session


def test_a_fork_copies_every_declared_column(store: Store) -> None:
    sid, steps = _record(store)
    fork = store.record.fork(sid, steps[-1].seq)
    copied = store.record.steps(fork.session_id)
    assert len(copied) == len(steps)
    for old, new in zip(steps, copied, strict=True):
        for c in STEPS.columns:
            if c.field in {"step_id", "session_id", "parent_step_id"}:
                continue
            if old.status.value == "running" and c.field in {"status", "error_message", "end_time"}:
                continue  # a running step is copied interrupted
            assert getattr(new, c.field) == getattr(old, c.field), c.field
    assert copied[-1].interrupted
    forked = store.record.get_session(fork.session_id)
    assert forked.metadata == {"k": [1, "é"]} and forked.status is Status.INIT
    assert forked.forked_from_seq == steps[-1].seq and forked.parent_session_id == sid


def test_a_row_read_back_is_the_value_written_and_stays_frozen(store: Store) -> None:
    """The generated converter fills the value's slots itself (resume reads 100,000 rows):
    what it makes equals the value built with keywords, and is as frozen."""
    sid, steps = _record(store)
    again = [Step(**{f.name: getattr(s, f.name) for f in fields(Step)}) for s in steps]
    assert again == steps and [hash(s.step_id) for s in again] == [hash(s.step_id) for s in steps]
    with pytest.raises(FrozenInstanceError):
        steps[0].seq = 99  # type: ignore[misc]
    session = store.record.get_session(sid)
    assert session == Session(**{f.name: getattr(session, f.name) for f in fields(Session)})
