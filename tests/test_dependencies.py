"""Every import of the package is declared in pyproject.toml, and nothing declared is unused:
deptry (configured under [tool.deptry]) checks xclaw/ against the installed metadata."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_deptry_finds_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deptry", "xclaw"],
        cwd=REPO,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "No dependency issues found" in out
    assert "Warning" not in out, out


def test_deptry_would_notice_an_undeclared_import(tmp_path: Path) -> None:
    """The check can fail: a package importing something pyproject does not declare."""
    pkg = tmp_path / "demo_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import yaml\nimport xclaw_not_declared_anywhere\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo-pkg"\nversion = "0"\ndependencies = ["pyyaml>=6"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "deptry", "demo_pkg"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "DEP001" in out and "xclaw_not_declared_anywhere" in out
