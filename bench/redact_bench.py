"""What redacting a streamed reply costs per delta: before (each delta masked alone, which lets
a secret split across two deltas through) and now (one StreamRedactor per reply, which holds
back a tail that may begin a secret), at the delta sizes providers send and for 1 to 500
secrets. Also how often a tail is held back, and how long; then whole texts (Redactor.text,
what every step's data and every frame built outside the recorder pass), before and now.

    python bench/redact_bench.py [--rounds 5] [--chars 200000]

"1 secret" is a server's least (its token); 5, a few provider keys and a database password;
50, a large .env; 500, a stress case. Secrets look like real ones: sk-ant-/sk-proj-/ghp_
keys, random tokens, a password with punctuation. The reply is English and code, with no
secret in it (the common case); a last row puts one secret in every 2,000 characters.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xclaw.recorder.redact import Redactor

PARAGRAPH = (
    "I looked at the repository first. The tests live in tests/ and the package in src/; "
    "the failing test is test_parse_dates, which expects ISO 8601 with a timezone. Here is "
    "the fix:\n\n```python\ndef parse(text: str) -> datetime:\n    value = datetime."
    "fromisoformat(text.replace('Z', '+00:00'))\n    if value.tzinfo is None:\n        raise "
    "ValueError(f'no timezone in {text!r}')\n    return value\n```\n\nAfter the change all 214 "
    "tests pass (ran `pytest -q` twice, 3.2 s). I also updated the changelog and the docstring "
    "so the accepted formats are listed; nothing else needed to move. "
)


class OldRedactor:
    """The redactor before streams: one regex of the secrets, each delta masked alone."""

    def __init__(self, secrets: list[str]) -> None:
        ordered = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
        self._shortest = len(ordered[-1])
        self._surrogate = re.compile("[\ud800-\udfff]")

    def text(self, value: str) -> str:
        if len(value) < self._shortest and value.isascii():
            return value
        if not value.isascii():
            value = self._surrogate.sub("\ufffd", value)
        return self._pattern.sub("[REDACTED]", value)


def make_secrets(n: int, rng: random.Random) -> list[str]:
    alnum = string.ascii_letters + string.digits

    def rand(k: int, chars: str = alnum + "-_") -> str:
        return "".join(rng.choice(chars) for _ in range(k))

    kinds = [
        lambda: rand(43),  # the gateway token (token_urlsafe(32))
        lambda: "sk-ant-api03-" + rand(95),
        lambda: "sk-proj-" + rand(156),
        lambda: "ghp_" + rand(36, alnum),
        lambda: rand(16, alnum + "!@#%^&*") + '"q\\',  # a password with punctuation
    ]
    return [kinds[i % len(kinds)]() for i in range(n)]


def deltas(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def per_delta_us(fn, pieces: list[str], rounds: int) -> float:  # type: ignore[no-untyped-def]
    best = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(pieces)
        best.append((time.perf_counter() - t) / len(pieces) * 1e6)
    return min(best)  # the least disturbed round (a shared machine)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chars", type=int, default=200_000, help="reply text per measurement")
    args = ap.parse_args()
    rng = random.Random(7)
    clean = (PARAGRAPH * (args.chars // len(PARAGRAPH) + 1))[: args.chars]
    print(
        f"{'secrets':>7} {'delta':>5} {'before us':>10} {'now us':>8} {'held %':>7} "
        f"{'held chars':>10} {'max held':>8}"
    )
    for n in (1, 5, 50, 500):
        secrets = make_secrets(n, rng)
        old, new = OldRedactor(secrets), Redactor(secrets)
        texts = [("", clean)]
        if n == 5:
            salted = "".join(
                PARAGRAPH * 3 + secrets[i % n] + " " for i in range(args.chars // 2000)
            )
            texts.append((" +key", salted))
        for label, text in texts:
            for size in (4, 16, 64):
                pieces = deltas(text, size)

                def before(ps: list[str], old: OldRedactor = old) -> None:
                    for p in ps:
                        old.text(p)

                def now(ps: list[str], new: Redactor = new) -> None:
                    s = new.stream()
                    for p in ps:
                        s.feed(p)
                    s.flush()

                b = per_delta_us(before, pieces, args.rounds)
                a = per_delta_us(now, pieces, args.rounds)
                # what the stream keeps back after each delta (it goes out with the next one)
                s = new.stream()
                tails = []
                for p in pieces:
                    s.feed(p)
                    tails.append(len(s._held))
                kept = [t for t in tails if t]
                print(
                    f"{n:>7}{label:<5} {size:>5} {b:>10.2f} {a:>8.2f} "
                    f"{100 * len(kept) / len(tails):>6.1f}% "
                    f"{(statistics.mean(kept) if kept else 0):>10.1f} {max(tails):>8}"
                )
    print()
    print("whole texts (a tool's output, a step's input): Redactor.text, us per text")
    print(f"{'secrets':>7} {'chars':>6} {'before us':>10} {'now us':>8}")
    rng = random.Random(7)
    for n in (1, 5, 50, 500):
        secrets = make_secrets(n, rng)
        old, new = OldRedactor(secrets), Redactor(secrets)
        for size in (200, 2000, 20000):
            text = (PARAGRAPH * (size // len(PARAGRAPH) + 1))[:size]
            b = per_delta_us(lambda ps, o=old: [o.text(p) for p in ps], [text] * 50, args.rounds)
            a = per_delta_us(lambda ps, r=new: [r.text(p) for p in ps], [text] * 50, args.rounds)
            print(f"{n:>7} {size:>6} {b:>10.2f} {a:>8.2f}")


if __name__ == "__main__":
    main()
