"""A full disk under the database: a clear error, nothing corrupt, nothing done
without a record, and the session carries on once space returns. A real tmpfs, mounted for
the test (needs root; skipped with the reason otherwise), and real `xclaw run` processes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STEPS = 40


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
        text=True,
    )
    if p.returncode != 0:
        pytest.skip(
            f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {p.stderr.strip()}"
        )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)


def test_disk_full_is_a_clear_error_and_the_session_resumes_when_space_returns(
    tmp_path: Path, small_disk: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    turns = [
        {
            "text": f"s{k}",
            "tool_calls": [
                {
                    "name": "shell",
                    "input": {
                        "command": f"head -c 20000 /dev/zero | tr '\\0' 'x'; echo {k} >> {ledger}"
                    },
                }
            ],
        }
        for k in range(STEPS)
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [*turns, {"text": "all done"}]}))
    config = tmp_path / "xclaw.yaml"
    config.write_text("max_iterations: 100\nsandbox:\n  isolation: none\n")
    db = small_disk / "x.db"
    env = {
        **os.environ,
        "XCLAW_HOME": str(tmp_path),
        "XCLAW_DB": str(db),
        "XCLAW_CONFIG": str(config),
        "XCLAW_MODEL": f"script:{script}",
        "NO_COLOR": "1",
    }
    # Leave ~800 KB: room for a new database's tables (~230 KB, twice while the WAL holds
    # them) and a few steps; the task's 40 outputs of 20 KB need more than that.
    st = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - 800_000))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "xclaw",
                "run",
                "--approval",
                "yolo",
                "--session",
                "full",
                *args,
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=False,
            text=True,
            timeout=300,
        )

    first = run("fill the disk")
    out = first.stdout + first.stderr
    assert first.returncode != 0, out
    assert "error (disk_full): the disk holding" in out and "free some space" in out
    assert "Traceback" not in out
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        recorded = {
            r[0] for r in conn.execute("SELECT call_id FROM traces WHERE step_type='tool_call'")
        }
    finally:
        conn.close()
    done = Counter(int(x) for x in ledger.read_text().split())
    assert 0 < len(done) < STEPS  # it stopped part-way
    assert all(f"call_{k}_0" in recorded for k in done)  # nothing happened without its row

    (small_disk / "filler").unlink()  # space returns
    # The run ended Failed (or stayed Running if even that write was refused): a message
    # carries it on, as after any failed run.
    second = run("carry on")
    out = second.stdout + second.stderr
    assert second.returncode == 0, out
    assert "all done" in out and "Traceback" not in out
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT current_status FROM sessions").fetchall() == [("Success",)]
        assert conn.execute("SELECT count(*) FROM traces WHERE status='running'").fetchone() == (0,)
    finally:
        conn.close()
    done = Counter(int(x) for x in ledger.read_text().split())
    assert max(done.values()) == 1  # no side effect twice
    assert len(done) >= STEPS - 1  # at most the call cut off by the full disk is missing


def test_a_new_database_on_a_full_disk_says_the_disk_is_full(
    tmp_path: Path, small_disk: Path
) -> None:
    st = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - 40_000))
    env = {
        **os.environ,
        "XCLAW_HOME": str(tmp_path),
        "XCLAW_DB": str(small_disk / "x.db"),
        "XCLAW_CONFIG": "",
        "XCLAW_MODEL": "script:none.json",
        "NO_COLOR": "1",
    }
    p = subprocess.run(
        [sys.executable, "-m", "xclaw", "run", "hello"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "is full" in out and "free some space" in out, out
    assert "not a usable xclaw database" not in out and "Traceback" not in out
