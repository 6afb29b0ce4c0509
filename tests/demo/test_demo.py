"""`xclaw demo` as a newcomer runs it: one command, offline, exit 0, every stage checked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_walks_crash_resume_rollback_fork(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XCLAW_", "ANTHROPIC_", "OPENAI_"))
    }
    env["NO_COLOR"] = "1"
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "demo", "--home", str(tmp_path / "home")],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    out = r.stdout
    for expected in (
        "SIGKILL the server while that tool call is still running",
        "[history] --- history starts ---",
        "[resume] detected interrupted tool_call, retrying...",
        "may already have run",
        "none executed twice",
        "Steps (session:",
        "/rollback s",
        "CHANGELOG.md is gone too",
        "the two branches now hold different draft.txt files",
        "the original session is untouched",
        # The payment in the ledger database, reversed by the rollback's compensation.
        "xclaw uses [record_payment]",
        "/rollback first shows the outside effect it will undo",
        "the payment is reversed: the ledger is empty again",
        "the trace keeps the compensation",
        "xclaw serve --db",
    ):
        assert expected in out, expected
    assert elapsed < 60, f"the demo took {elapsed:.0f} s"
    assert (tmp_path / "home" / "xclaw.db").exists()
    assert (tmp_path / "home" / "ledger.db").exists()
    # /steps reaches back to the interrupted step it explains; the fork is announced
    # once; the main session ends waiting for an instruction, not "Running"; titles everywhere.
    steps = out[out.index("Steps (session:") : out.index("Usage:")]
    assert "[interrupted]" in steps
    assert out.count("/switch ") == 1
    table = out[out.rindex("SESSION ") :]
    assert "Waiting for your instruction" in table and "Running" not in table
    assert "(untitled)" not in table and "Prepare a release note" in table


def test_demo_fails_loudly_when_a_stage_misbehaves(tmp_path: Path) -> None:
    """A broken model: the demo must exit non-zero and say which stage failed."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XCLAW_", "ANTHROPIC_", "OPENAI_"))
    }
    script = tmp_path / "broken.json"
    script.write_text('{"turns": [{"fail": "the model is down"}]}')
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "xclaw",
            "demo",
            "--home",
            str(tmp_path / "home"),
            "--model",
            f"script:{script}",
        ],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "demo FAILED at stage" in r.stderr


def test_the_demo_script_played_without_a_crash_never_says_interrupted(tmp_path: Path) -> None:
    """README's "Try it by hand" points `xclaw serve` at the demo's script: played through
    without a crash, it must not claim the checks were interrupted (nor run them twice)."""
    script = Path(__file__).resolve().parents[2] / "xclaw" / "demo" / "script.json"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XCLAW_", "ANTHROPIC_", "OPENAI_"))
    }
    env.update({"NO_COLOR": "1", "XCLAW_HOME": str(tmp_path), "XCLAW_MODEL": f"script:{script}"})
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", "prepare a release note"],
        check=False,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "interrupted" not in r.stdout.lower(), r.stdout
    assert "the checks passed once" in r.stdout
    (workspace,) = (tmp_path / "workspaces").iterdir()
    assert (workspace / "effects.log").read_text().split() == ["facts", "checks"]
    assert "xclaw 1.0: state that survives anything" in (workspace / "draft.txt").read_text()
