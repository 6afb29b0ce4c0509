"""Does the time a refusal takes tell whether a session exists? (docs/teams.md: another's
session answers exactly as an id nobody has.)

A member probes a real `xclaw serve` over the WebSocket: frames naming another member's
session and frames naming an id nobody has (random, of the same length), alternated in random
order, one in flight at a time, each timed from the send to its `unknown_session` error
(tests/security/existence_probe.py). Per kind of frame (`message`, `approval`, `cancel`): the
median time of each, the median of the paired differences, and how often a one-probe
classifier tells them apart — its threshold and side fitted on the first half of the pairs,
scored on the second (50 %: chance).

    .venv/bin/python bench/existence_bench.py                # 2,000 pairs per kind
    .venv/bin/python bench/existence_bench.py --pairs 5000
    .venv/bin/python bench/existence_bench.py --python ../main/.venv/bin/python  # another checkout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

from gateway_bench import add_members, machine_speed_ms, spawn_serve
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.security.existence_probe import KINDS, Timing, probe_pairs


def own_session(port: int, token: str) -> str:
    """A session of the owner's, written now (POST /api/sessions)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/sessions",
        data=b'{"title": "the owner\'s"}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(json.load(r)["sessionId"])


async def run(port: int, prober: str, theirs: str, pairs: int) -> dict[str, Timing]:
    async with connect(
        f"ws://127.0.0.1:{port}/ws", additional_headers={"Authorization": f"Bearer {prober}"}
    ) as ws:
        return {kind: await probe_pairs(ws, theirs, kind, pairs, warmup=200) for kind in KINDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--python", default=sys.executable, help="the checkout's python to serve")
    args = parser.parse_args()
    print(f"machine: {machine_speed_ms():.0f} ms for the fixed work (bench/HISTORY.md)")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        proc, port = spawn_serve(home, "list_dir", "existence-bench-token-01", python=args.python)
        try:
            owner, prober = add_members(home / "xclaw.db", 2)
            results = asyncio.run(run(port, prober, own_session(port, owner), args.pairs))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        f"{'frame':<9} {'theirs µs':>10} {'unknown µs':>11} {'paired diff':>12} {'classified':>11}"
    )
    for kind, t in results.items():
        theirs, unknown = t.medians
        print(
            f"{kind:<9} {theirs:>10.0f} {unknown:>11.0f} {t.paired_difference_us:>+12.1f}"
            f" {t.accuracy() * 100:>10.1f}%"
        )


if __name__ == "__main__":
    main()
