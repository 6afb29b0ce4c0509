"""`xclaw import` refuses every hostile file (tests/cli/import_corpus.py) cleanly, through the
real command group: one `error:` line naming the line and what is wrong, exit 2, nothing
written — the database is not even created. On SQLite and PostgreSQL (the file is checked
before either is opened; the edges both must hold are imported on both), and the import of
a whole file is one transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.cli.import_corpus import ACCEPTED, CASES, Case, line, session, step
from tests.store.conftest import Backend, PostgresBackend, SqliteBackend, postgres_url
from xclaw.cli.main import _register, cli
from xclaw.errors import StoreError
from xclaw.store import open_store
from xclaw.store.steps.model import Session, Status, Step, StepStatus, StepType
from xclaw.store.transfer.format import Exported

_register()


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b: Backend = (
        SqliteBackend(tmp_path) if request.param == "sqlite" else PostgresBackend(postgres_url())
    )
    yield b
    b.drop()


def _import(tmp_path: Path, data: bytes, db: str, *extra: str) -> tuple[int, str]:
    f = tmp_path / "in.jsonl"
    f.write_bytes(data)
    r = CliRunner().invoke(
        cli,
        ["import", str(f), "--db", db, *extra],
        env={"XCLAW_HOME": str(tmp_path / "home"), "XCLAW_CONFIG": str(tmp_path / "none.yaml")},
    )
    return r.exit_code, r.output


def _nothing_there(b: Backend) -> bool:
    if isinstance(b, SqliteBackend):
        return not b.path.parent.exists()
    rows = b.query(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ?",
        (b.schema,),  # type: ignore[attr-defined]
    )
    return rows == [(0,)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_hostile_file_is_refused_on_its_line_and_writes_nothing(
    tmp_path: Path, target: Backend, case: Case
) -> None:
    code, out = _import(tmp_path, case.data, target.url)
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out[:2000]
    assert len(lines[0]) < 600, "a hostile value is quoted in full"
    where = f"in.jsonl line {case.line}: " if case.line else "in.jsonl "
    assert where in lines[0] and case.why in lines[0], lines[0]
    assert "Traceback" not in out
    assert _nothing_there(target)


def test_the_edges_both_backends_hold_are_imported_and_kept(
    tmp_path: Path, target: Backend
) -> None:
    code, out = _import(tmp_path, ACCEPTED, target.url, "--json")
    assert code == 0, out
    assert json.loads(out) == [
        {"sessionId": "edges", "from": "edges", "steps": 3, "remapped": False}
    ]
    store = open_store(target.url)
    try:
        s = store.record.get_session("edges")
        # A lone surrogate made U+FFFD; NUL too where a backend cannot hold it (PostgreSQL).
        title = s.title.replace("\u0000", "\ufffd")
        assert title == "nul\ufffd lone\ufffd sep\u2028 bidi\u202e end"
        assert s.updated_at == 2**63 - 1 and s.metadata["big"] == 2**70
        first, big, last = store.record.steps("edges")
        assert big.output_data == "x" * 1_000_000
        assert first.input_data == {"n": 10**30, "text": "a\u2028b"}
        assert (first.start_time, first.end_time) == (2**63 - 2, 2**63 - 1)
        # A null count is unknown (the server reported none): kept as NULL, never a 0.
        assert (first.token_usage_prompt, first.token_usage_completion) == (2**31 - 1, None)
        assert last.seq == 2**63 - 2 and last.parent_step_id == first.step_id
    finally:
        store.close()


def test_export_then_import_keeps_a_line_separator_inside_a_title(tmp_path: Path) -> None:
    """Lines are split on newlines only: U+2028 inside a JSON string is text, not a line."""
    data = line(session(sessionId="sep", title="one\u2028two\u0085three")) + line(
        step(stepId="sep:s0001")
    )
    db = tmp_path / "x.db"
    assert _import(tmp_path, data, str(db))[0] == 0
    r = CliRunner().invoke(cli, ["export", "sep", "--db", str(db)])
    assert r.exit_code == 0, r.output
    db2 = tmp_path / "y.db"
    code, out = _import(tmp_path, r.output.encode(), str(db2), "--json")
    assert code == 0, out
    store = open_store(db2)
    try:
        assert store.record.get_session("sep").title == "one\u2028two\u0085three"
    finally:
        store.close()


def _exported(sid: str, *steps: tuple[int, str | None]) -> Exported:
    sess = Session(session_id=sid, title="t", status=Status.SUCCESS, created_at=1, updated_at=2)
    ex = Exported(sess)
    for seq, parent in steps:
        ex.steps.append(
            Step(
                step_id=f"{sid}:s{seq:04d}",
                session_id=sid,
                seq=seq,
                parent_step_id=parent,
                step_type=StepType.USER_INPUT,
                name="user",
                status=StepStatus.COMPLETED,
                agent="main",
                call_id=None,
                input_data="x",
                output_data=None,
                error_message=None,
                start_time=1,
                end_time=1,
                token_usage_prompt=0,
                token_usage_completion=0,
            )
        )
    return ex


def test_an_import_is_one_transaction(target: Backend) -> None:
    """The database's own refusal of the last session (a parent link to no row, which only
    the parse normally stops) takes every session of the import back with it."""
    store = open_store(target.url)
    try:
        good = _exported("good", (1, None), (2, "good:s0001"))
        bad = _exported("bad", (1, "bad:s0042"))
        bad.session = Session(
            session_id="bad", title="t", status=Status.SUCCESS, created_at=5, updated_at=6
        )
        with pytest.raises(StoreError):
            store.record.import_sessions([good, bad])
        assert store.record.list_sessions() == []
        done = store.record.import_sessions([good])
        assert [d.session.session_id for d in done] == ["good"] and len(
            store.record.steps("good")
        ) == 2
    finally:
        store.close()


def _remapped(out: str) -> list[dict[str, Any]]:
    return [d for d in json.loads(out) if d["remapped"]]


def test_ids_taken_in_the_target_are_remapped_in_the_same_transaction(
    tmp_path: Path, target: Backend
) -> None:
    data = line(session(sessionId="p")) + line(step(stepId="p:s0001"))
    data += line(session(sessionId="f", parentSessionId="p", createdAt=1_800_000_000_000))
    assert _import(tmp_path, data, target.url)[0] == 0
    code, out = _import(tmp_path, data, target.url, "--json")
    assert code == 0, out
    moved = {d["from"]: d["sessionId"] for d in _remapped(out)}
    assert set(moved) == {"p", "f"}
    store = open_store(target.url)
    try:
        assert store.record.get_session(moved["f"]).parent_session_id == moved["p"]
        assert store.record.steps(moved["p"])[0].step_id == f"{moved['p']}:s0001"
    finally:
        store.close()
