"""One exit status for one kind of error (xclaw.errors: EXIT_USAGE, EXIT_FAILED), across every
subcommand of the real `xclaw` group: a configuration error — a misspelled xclaw.yaml key,
YAML that does not parse, a bad environment value — ends each of them with one `error:`
line and exit 2, with or without --db, before it touches anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xclaw.cli.main import _register, cli
from xclaw.errors import (
    EXIT_USAGE,
    ConfigError,
    DatabaseRefused,
    SchemaTooNew,
    SessionNotFound,
    StepNotFound,
    StoreError,
    XclawError,
)
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import AddStep
from xclaw.store.transfer.format import BadExport

_register()

# Each subcommand with arguments that would run it on the database `db` (session s1).
ARGS: dict[str, list[str]] = {
    "sessions": [],
    "steps": ["s1"],
    "trace": ["s1"],
    "rollback": ["s1", "s0002", "--yes"],
    "fork": ["s1", "s0001"],
    "export": ["s1"],
    "import": ["{export}"],
    "gc": ["--yes", "--older-than", "0s"],
    "snapshots": ["s1"],
    "container": ["s1"],
    "diff": ["s1", "s0001", "s0002"],
    "workers": [],
    "fsck": [],
    "replay": ["s1"],
    "run": ["hello"],
    "serve": ["--port", "0"],
    "chat": [],
    "tools": [],
    "schema": ["frames"],
    "demo": [],
    "users": ["list"],
    "share": ["s1", "bob", "--role", "viewer"],
    "acp": [],
    "mcp": [],
    "budget": ["show", "s1"],
    "schedule": ["list"],
    "hook": ["list"],
}
# The demo runs on a configuration of its own (its own home and xclaw.yaml): the working
# directory's xclaw.yaml is not read; the environment is (its server inherits it).
OWN_CONFIG = {"demo"}

BAD_CONFIG = {
    "unknown key": ("xclaw.yaml", "databse: x.db\n", "unknown key 'databse'"),
    "not yaml": ("xclaw.yaml", "approval: [ask\n", "not valid YAML"),
    "bad env value": ("env", "WEB_PORT=http", "WEB_PORT must be a TCP port"),
}


def test_every_subcommand_is_covered() -> None:
    assert set(cli.commands) == set(ARGS)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "x.db"
    with SQLiteStore(path) as store:
        store.record.create_session(session_id="s1", title="t")
        store.record.write(
            AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "one"))
        )
        store.record.write(
            AddStep(session_id="s1", step=NewStep(StepType.USER_INPUT, "user", "two"))
        )
    (tmp_path / "export.jsonl").write_text(
        '{"kind": "session", "sessionId": "e", "status": "Init", "createdAt": 1, "updatedAt": 1}\n'
    )
    return path


@pytest.mark.parametrize("with_db", [False, True], ids=["default db", "--db"])
@pytest.mark.parametrize("error", sorted(BAD_CONFIG))
@pytest.mark.parametrize("command", sorted(ARGS))
def test_a_configuration_error_exits_2_from_every_command(
    tmp_path: Path,
    db: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    error: str,
    with_db: bool,
) -> None:
    where, text, why = BAD_CONFIG[error]
    if command in OWN_CONFIG and where == "xclaw.yaml":
        pytest.skip("the demo does not read the working directory's xclaw.yaml")
    takes_db = any(p.name == "db" for p in cli.commands[command].params)
    if with_db and not takes_db:
        pytest.skip(f"{command} takes no --db")
    monkeypatch.chdir(tmp_path)
    env = {
        "XCLAW_HOME": str(tmp_path / "home"),
        "XCLAW_DB": str(db),
        "XCLAW_CONFIG": "",
        "XCLAW_MODEL": "script:none.json",
    }
    if where == "env":
        name, value = text.split("=", 1)
        env[name] = value
    else:
        (tmp_path / where).write_text(text)
    args = [a.format(export=tmp_path / "export.jsonl") for a in ARGS[command]]
    if with_db:
        args += ["--db", str(db)]
    before = db.read_bytes()
    r = CliRunner().invoke(cli, [command, *args], env=env)
    assert r.exit_code == 2, (r.exit_code, r.output)
    errors = [ln for ln in r.output.splitlines() if ln.lstrip().startswith("error: ")]
    assert len(errors) == 1 and why in errors[0], r.output
    assert "Traceback" not in r.output and not isinstance(r.exception, ConfigError)
    assert db.read_bytes() == before


def test_the_rule_is_the_errors_own() -> None:
    usage = (ConfigError, SessionNotFound, StepNotFound, DatabaseRefused, SchemaTooNew, BadExport)
    assert all(kind.exit_code == EXIT_USAGE for kind in usage)
    assert XclawError.exit_code == StoreError.exit_code == 1


def test_through_the_installed_entry_point(tmp_path: Path, db: Path) -> None:
    (tmp_path / "xclaw.yaml").write_text("databse: x.db\n")
    env = {**os.environ, "XCLAW_HOME": str(tmp_path / "home"), "XCLAW_DB": str(db)}
    env.pop("XCLAW_CONFIG", None)
    for args in (["sessions"], ["fsck"], ["steps", "s1", "--db", str(db)]):
        p = subprocess.run(
            [sys.executable, "-m", "xclaw", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.strip().startswith("error: ") and "unknown key 'databse'" in p.stderr
