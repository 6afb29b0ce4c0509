"""Timing probes: does how long a refusal takes tell whether a session exists? Used by
tests/security/test_team_isolation.py and bench/existence_bench.py (docs/teams.md: another's
session answers exactly as an id nobody has — in what it says and in when it says it).

A member's socket names another's session and an id nobody has (random, of the same length),
alternated in random order, one frame in flight at a time; each probe is timed from the send
to its `unknown_session` error."""

from __future__ import annotations

import json
import random
import secrets
import statistics
import time
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection

KINDS = ("message", "approval", "cancel")


def probe_frame(kind: str, sid: str) -> str:
    if kind == "message":
        return json.dumps({"type": "message", "sessionId": sid, "content": "hello"})
    if kind == "approval":
        return json.dumps(
            {"type": "approval", "sessionId": sid, "stepId": "s0003", "approve": True}
        )
    return json.dumps({"type": "cancel", "sessionId": sid})


def unknown_like(sid: str) -> str:
    """A random id of the same length (an id nobody has)."""
    return secrets.token_urlsafe(len(sid))[: len(sid)]


async def probe(ws: ClientConnection, text: str) -> float:
    """Microseconds from the send to the refusal."""
    start = time.perf_counter()
    await ws.send(text)
    answer = json.loads(await ws.recv())
    took = (time.perf_counter() - start) * 1e6
    assert answer.get("code") == "unknown_session", answer
    return took


@dataclass(frozen=True)
class Timing:
    theirs_us: list[float]  # the probes naming another's session
    unknown_us: list[float]  # the probes naming an id nobody has, paired with them

    @property
    def medians(self) -> tuple[float, float]:
        return statistics.median(self.theirs_us), statistics.median(self.unknown_us)

    @property
    def paired_difference_us(self) -> float:
        """The median of (another's - unknown) over the pairs: what the machine's load, the
        same for both probes of a pair, leaves out."""
        return statistics.median(
            a - b for a, b in zip(self.theirs_us, self.unknown_us, strict=True)
        )

    def accuracy(self) -> float:
        """How often one probe is classified right: a threshold and side fitted on the first
        half of the pairs, scored on the second (0.5: chance)."""
        half = len(self.theirs_us) // 2

        def labelled(lo: int, hi: int | None) -> list[tuple[float, bool]]:
            return [(x, True) for x in self.theirs_us[lo:hi]] + [
                (x, False) for x in self.unknown_us[lo:hi]
            ]

        def score(data: list[tuple[float, bool]], t: float, slower: bool) -> float:
            return sum((x > t) == (theirs == slower) for x, theirs in data) / len(data)

        train = labelled(0, half)
        cuts = sorted(x for x, _ in train)[:: max(1, len(train) // 400)]
        _, t, slower = max((score(train, t, s), t, s) for t in cuts for s in (True, False))
        return score(labelled(half, None), t, slower)


async def probe_pairs(
    ws: ClientConnection, theirs: str, kind: str, pairs: int, warmup: int = 100
) -> Timing:
    a: list[float] = []
    b: list[float] = []
    for i in range(warmup + pairs):
        order = [(theirs, a), (unknown_like(theirs), b)]
        random.shuffle(order)
        for sid, into in order:
            took = await probe(ws, probe_frame(kind, sid))
            if i >= warmup:
                into.append(took)
    return Timing(a, b)
