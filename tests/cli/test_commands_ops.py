"""`xclaw fsck` as an operator runs it: real `xclaw run` processes write the record, a real
`xclaw fsck` process checks it (SQLite file, and PostgreSQL through --db)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = [
    {"text": "", "tool_calls": [
        {"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}},
        {"name": "shell", "input": {"command": "echo two >> a.txt"}},
    ]},
    {"text": "done"},
]


def xclaw(tmp: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "XCLAW_MODEL"}
    env.update({"XCLAW_HOME": str(tmp), "NO_COLOR": "1", "XCLAW_MODEL": f"script:{tmp / 'script.json'}"})
    if db:
        env["XCLAW_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args], check=False, cwd=tmp, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )


def _recorded_session(tmp: Path, db: str | None = None) -> None:
    (tmp / "script.json").write_text(json.dumps({"turns": SCRIPT}))
    r = xclaw(tmp, "run", "--approval", "yolo", "make a file", db=db)
    assert r.returncode == 0, r.stderr


def test_fsck_passes_a_healthy_database_and_fails_a_missing_tool_step(tmp_path: Path) -> None:
    _recorded_session(tmp_path)
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")

    conn = sqlite3.connect(tmp_path / "xclaw.db")
    with conn:
        conn.execute("DELETE FROM traces WHERE step_type='tool_call' AND name='shell'")
    conn.close()
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 1
    assert "tool_step_missing" in r.stdout and "shell" in r.stdout
    r = xclaw(tmp_path, "fsck", "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["ok"] is False
    assert [f["code"] for f in report["findings"]] == ["tool_step_missing"]
    # Not safely repairable: --repair leaves it (and says so by failing still), no backup made.
    r = xclaw(tmp_path, "fsck", "--repair", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["backup"] is None


def test_fsck_repair_marks_a_dangling_step_after_a_backup(tmp_path: Path) -> None:
    _recorded_session(tmp_path)
    conn = sqlite3.connect(tmp_path / "xclaw.db")
    with conn:
        conn.execute(
            "UPDATE traces SET status='running', end_time=NULL WHERE name='shell'"
        )
    conn.close()
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 1 and "running_step_in_finished_session" in r.stdout
    assert "[--repair fixes this]" in r.stdout
    r = xclaw(tmp_path, "fsck", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backup: " in r.stdout and "repaired  running_step_in_finished_session" in r.stdout
    assert len(list(tmp_path.glob("xclaw.db.fsck-*.bak"))) == 1
    assert xclaw(tmp_path, "fsck").returncode == 0


@pytest.mark.postgres
def test_fsck_on_postgresql_through_db(tmp_path: Path) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        _recorded_session(tmp_path, db=backend.url)
        r = xclaw(tmp_path, "fsck", "--db", backend.url)
        assert r.returncode == 0, r.stdout + r.stderr
        backend.query("DELETE FROM traces WHERE step_type='tool_call' AND name='shell'")
        r = xclaw(tmp_path, "fsck", "--db", backend.url, "--json")
        assert r.returncode == 1
        assert [f["code"] for f in json.loads(r.stdout)["findings"]] == ["tool_step_missing"]
    finally:
        backend.drop()

