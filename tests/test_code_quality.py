"""The project's own type and lint gates, as configured in pyproject.toml: mypy (strict, over
xclaw/), ruff's rule set over the code and its tests, and ruff's formatting. Run as tests so
that the README's single test command (and CI, which runs it) fails on any finding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.caches import mypy_lock

REPO = Path(__file__).resolve().parents[1]
CHECKED = ["xclaw", "tests", "bench", "examples"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_mypy_strict_finds_nothing() -> None:
    # The files, strictness and per-module exceptions all come from [tool.mypy].
    with mypy_lock("xclaw") as cache:
        done = _run("mypy", "--cache-dir", cache)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Success: no issues found" in out, out


def test_ruff_check_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", *CHECKED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_has_nothing_to_change() -> None:
    done = _run("ruff", "format", "--check", "--no-cache", *CHECKED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gates_can_fail(tmp_path: Path) -> None:
    """Both checkers report a planted finding (so a passing run means something)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x):\n    return x + 1\n")
    typed = _run("mypy", "--strict", "--no-incremental", str(bad))
    assert typed.returncode != 0 and "no-untyped-def" in typed.stdout, typed.stdout
    linted = _run("ruff", "check", "--no-cache", "--select", "F", str(bad))
    assert linted.returncode != 0 and "F401" in linted.stdout, linted.stdout
