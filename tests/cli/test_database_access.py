"""A database is touched only when the user means to write to it, through the real `xclaw`
command group: every reading command refuses, with one `error:` line and exit 2, what is not
an existing xclaw database of this version, and leaves it byte for byte as it was; writing
commands refuse another program's file the same way; only serve, run and import create a
database. SQLite files here; PostgreSQL schemas at the end."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.store.test_store_access import foreign_sqlite, listing
from xclaw.cli.main import _register, cli
from xclaw.store.migrations import LATEST_VERSION, migrate_sqlite
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import AddStep

_register()

READING = [
    ["sessions"],
    ["sessions", "--json"],
    ["steps", "s1"],
    ["trace", "s1"],
    ["export", "s1"],
    ["export", "--all"],
    ["snapshots", "s1"],
    ["diff", "s1", "s0001", "s0002"],
    ["workers"],
    ["fsck"],
    ["fsck", "--json"],
]
# Writing commands that act on what a database holds: none creates one.
CHANGING = [
    ["rollback", "s1", "s0001", "--yes"],
    ["fork", "s1", "s0001"],
    ["gc", "--yes", "--older-than", "0s"],
    ["fsck", "--repair"],
    ["replay", "s1"],
]


def _text(p: Path) -> None:
    p.write_text("# my notes\nnot a database\n")
    os.chmod(p, 0o644)


def _binary(p: Path) -> None:
    p.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    os.chmod(p, 0o644)


def _empty(p: Path) -> None:
    p.write_bytes(b"")
    os.chmod(p, 0o644)


def _xclaw(p: Path) -> None:
    with SQLiteStore(p) as store:
        store.record.create_session(session_id="s1", title="mine")
        store.record.write(
            AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "hi"))
        )
        store.record.write(
            AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "again"))
        )
    os.chmod(p, 0o644)


def _newer(p: Path) -> None:
    _xclaw(p)
    conn = sqlite3.connect(p)
    with conn:
        conn.execute(
            "INSERT INTO schema_version VALUES (?, 'from the future', 0)", (LATEST_VERSION + 1,)
        )
    conn.close()


def _older(p: Path) -> None:
    conn = sqlite3.connect(p, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    migrate_sqlite(conn, target=LATEST_VERSION - 1)
    conn.close()
    os.chmod(p, 0o644)


# kind -> (how it is made (None: nothing there), what the refusal says)
TARGETS: dict[str, tuple[Callable[[Path], None] | None, str]] = {
    "missing": (None, "no database at "),
    "empty file": (_empty, "holds no xclaw tables"),
    "text file": (_text, "not a SQLite database file"),
    "binary file": (_binary, "not a SQLite database file"),
    "foreign sqlite": (foreign_sqlite, "written by something other than xclaw"),
    "foreign wal sqlite": (
        lambda p: foreign_sqlite(p, wal=True),
        "written by something other than xclaw",
    ),
    "newer xclaw": (_newer, "written by a newer xclaw"),
}


def _target(tmp_path: Path, kind: str) -> tuple[Path, str]:
    make, why = TARGETS[kind]
    path = tmp_path / "data" / "x.db"
    if make is None:
        path = tmp_path / "no" / "such" / "dir" / "x.db"
    else:
        path.parent.mkdir()
        make(path)
    return path, why


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(
        cli,
        list(args),
        env={"XCLAW_HOME": str(tmp_path / "home"), "XCLAW_CONFIG": str(tmp_path / "none.yaml")},
    )
    return r.exit_code, r.output


def _refused_once(code: int, out: str, why: str) -> None:
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert why in lines[0] and "Traceback" not in out


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("args", READING + CHANGING, ids=" ".join)
def test_what_is_not_an_xclaw_database_is_refused_and_left_alone(
    tmp_path: Path, args: list[str], kind: str
) -> None:
    path, why = _target(tmp_path, kind)
    before = listing(tmp_path)
    code, out = _run(tmp_path, *args, "--db", str(path))
    _refused_once(code, out, why)
    assert listing(tmp_path) == before  # no byte, mode, directory, schema or -wal file


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_an_older_database_is_not_upgraded_by_reading_commands(
    tmp_path: Path, args: list[str]
) -> None:
    path = tmp_path / "x.db"
    _older(path)
    before = listing(tmp_path)
    code, out = _run(tmp_path, *args, "--db", str(path))
    _refused_once(code, out, f"`xclaw fsck --repair --db {path}`")
    assert listing(tmp_path) == before


def test_an_older_database_reads_once_fsck_repair_upgraded_it(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    _older(path)
    code, out = _run(tmp_path, "fsck", "--repair", "--db", str(path))
    assert code == 0, out
    assert _run(tmp_path, "sessions", "--json", "--db", str(path)) == (0, "[]\n")


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_reading_commands_change_nothing_of_an_xclaw_database(
    tmp_path: Path, args: list[str]
) -> None:
    """Not its mode (0644 stays: a reading command chmods nothing), not a byte of it."""
    path = tmp_path / "x.db"
    _xclaw(path)
    (tmp_path / "home" / "workspaces" / "s1").mkdir(parents=True)
    before = listing(tmp_path)
    code, out = _run(tmp_path, *args, "--db", str(path))
    assert code in (0, 1), out  # fsck of this record may find notes; diff may find nothing
    assert "Traceback" not in out
    after = listing(tmp_path)
    # SQLite gives every reader of a WAL database its -wal/-shm files: nothing else appears.
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == before


def test_a_text_file_given_to_a_writing_command_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    _text(path)
    for args in CHANGING:
        code, out = _run(tmp_path, *args, "--db", str(path))
        _refused_once(code, out, "not a SQLite database file")
    assert (path.stat().st_mode & 0o777) == 0o644


# --- the commands that create a database: run, serve, import ---------------------------------


def _xclaw_process(
    tmp: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        {
            "XCLAW_HOME": str(tmp / "home"),
            "XCLAW_MODEL": f"script:{tmp / 'script.json'}",
            "XCLAW_CONFIG": str(tmp / "none.yaml"),
            "NO_COLOR": "1",
        }
    )
    (tmp / "script.json").write_text(json.dumps({"turns": [{"text": "hello"}]}))
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        cwd=tmp,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


EXPORT = (
    '{"kind": "session", "sessionId": "imp", "status": "Success", "createdAt": 1, "updatedAt": 2}\n'
)

CREATING: list[list[str]] = [
    ["run", "hi"],
    ["serve", "--port", "0"],
    ["import", "-"],
]


@pytest.mark.parametrize("kind", ["text file", "binary file", "foreign sqlite", "newer xclaw"])
@pytest.mark.parametrize("args", CREATING, ids=" ".join)
def test_creating_commands_refuse_another_programs_file(
    tmp_path: Path, args: list[str], kind: str
) -> None:
    path, why = _target(tmp_path, kind)
    (tmp_path / "home").mkdir()
    before = listing(tmp_path / "data")
    p = _xclaw_process(tmp_path, *args, "--db", str(path), stdin=EXPORT)
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and why in errors[0] and "Traceback" not in p.stderr
    assert listing(tmp_path / "data") == before


def test_run_and_import_create_a_new_private_database_where_there_is_none(tmp_path: Path) -> None:
    ran = tmp_path / "new" / "run.db"
    p = _xclaw_process(tmp_path, "run", "hi", "--db", str(ran))
    assert p.returncode == 0, p.stderr
    imported = tmp_path / "new2" / "import.db"
    p = _xclaw_process(tmp_path, "import", "-", "--db", str(imported), stdin=EXPORT)
    assert p.returncode == 0, p.stderr
    for path in (ran, imported):
        assert (path.stat().st_mode & 0o777) == 0o600
        assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert _run(tmp_path, "sessions", "--json", "--db", str(imported))[1].count('"imp"') == 1


# --- PostgreSQL ----------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("args", READING + CHANGING, ids=" ".join)
def test_postgres_commands_create_no_schema_and_no_tables(tmp_path: Path, args: list[str]) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        code, out = _run(tmp_path, *args, "--db", backend.url)
        _refused_once(code, out, "no database at postgresql://")
        backend.query("CREATE TABLE orders (id int)")  # a schema of another program's
        code, out = _run(tmp_path, *args, "--db", backend.url)
        _refused_once(code, out, "holds no xclaw tables")
        tables = backend.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
            (backend.schema,),
        )
        assert tables == [("orders",)]
    finally:
        backend.drop()


@pytest.mark.postgres
def test_postgres_reading_commands_run_on_read_only_connections(tmp_path: Path) -> None:
    """Every connection of a reading command refuses writes (the server's own read-only
    transactions): each command still does its work, so none of them writes."""
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        store = backend.open()
        try:
            store.record.create_session(session_id="s1", title="mine")
            store.record.write(
                AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "hi"))
            )
            store.record.write(
                AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "again"))
            )
        finally:
            store.close()
        (tmp_path / "home" / "workspaces" / "s1").mkdir(parents=True)
        for args in READING:
            code, out = _run(tmp_path, *args, "--db", backend.url)
            assert code == 0, (args, out)
    finally:
        backend.drop()
