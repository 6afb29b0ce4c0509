"""The deployment torture campaign, small: bench/torture_deployment.py with 6 SIGKILLs of the
driving worker among two `xclaw serve` workers with workspace roots of their own, PostgreSQL
and a real SeaweedFS, run as a real process; every failure figure must be zero — among them
a file a completed step wrote that the worker finishing the session does not have. The
full campaign is a benchmark (bench/README.md, docs/reliability.md)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.torture import FAILURE_FIGURES
from tests.seaweed import weed_binary
from tests.store.conftest import postgres_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_kills_of_the_driving_worker_lose_no_file_and_repeat_nothing() -> None:
    weed_binary()  # skipped with the reason (failed under XCLAW_TEST_REQUIRE_S3) without it
    seed = random.randrange(1 << 30)
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "torture_deployment.py"),
            "--kills",
            "6",
            "--seed",
            str(seed),
            "--pg",
            postgres_url(),
            "--json",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, (seed, p.stdout[-3000:] + p.stderr[-3000:])
    fig = json.loads(p.stdout.strip().splitlines()[-1])
    assert fig["kills"] >= 6 and fig["sideEffects"] > 0, fig
    zero = FAILURE_FIGURES
    assert {k: fig[k] for k in zero} == dict.fromkeys(zero, 0), (seed, fig["problems"])
