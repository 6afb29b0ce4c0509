"""The torture campaign, small: bench/torture.py with 20 SIGKILLs across every
kind (headless, gateway, recovery, rollback/fork/restore) and a few simulated power losses,
run as a real process; every figure must be zero. The full campaign is a benchmark
(docs/reliability.md)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.torture import FAILURE_FIGURES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # 20 crash drills: a minute alone, several while the suite runs beside it
def test_twenty_kills_and_power_losses_lose_and_repeat_nothing() -> None:
    seed = random.randrange(1 << 30)
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "torture.py"),
            "--kills",
            "20",
            "--power-losses",
            "4",
            "--seed",
            str(seed),
            "--json",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    fig = json.loads(p.stdout.strip().splitlines()[-1])
    assert fig["kills"] >= 20 and fig["powerLosses"] >= 4, fig
    assert fig["sideEffects"] > 0, fig  # the ledgers were written: the checks had material
    zero = FAILURE_FIGURES
    assert {k: fig[k] for k in zero} == dict.fromkeys(zero, 0), (seed, fig["problems"])


@pytest.mark.parametrize("arg", [["--kills", "-3"], ["--power-losses", "-1"]])
def test_a_negative_count_is_refused_at_once(arg: list[str]) -> None:
    """A negative count used to loop forever (`while made < n` never ends when n < 0)."""
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "torture.py"), *arg],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "must be 0 or more" in p.stderr
