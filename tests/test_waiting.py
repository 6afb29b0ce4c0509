"""The tests' one wait-until helper (tests/waiting.py), and that no test module keeps a copy
of its own."""

from __future__ import annotations

import ast
import asyncio
import itertools
import time
from pathlib import Path

import pytest

from tests.waiting import until, wait_until

TESTS = Path(__file__).resolve().parent
# Names the local copies went by.
COPIES = {"wait_until", "_wait_until", "until", "_until", "_wait", "wait_for", "until_exists"}


def test_wait_until_returns_what_the_check_found_once_it_holds() -> None:
    answers = iter([None, 0, "", "found"])
    assert wait_until(lambda: next(answers), every=0) == "found"


def test_a_wait_that_never_holds_fails_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"not within 0\.05 s: the pid file"):
        wait_until(lambda: False, "the pid file", timeout=0.05)
    with pytest.raises(AssertionError, match="log: quiet"):
        wait_until(lambda: False, lambda: "log: quiet", timeout=0.01)


async def test_until_takes_plain_coroutine_and_blocking_checks() -> None:
    seen: list[int] = []

    async def later() -> int:
        seen.append(1)
        return len(seen) if len(seen) >= 3 else 0

    assert await until(later, every=0) == 3
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, event.set)
    assert await until(event.is_set) is True
    assert await until(lambda: "read", in_thread=True) == "read"
    with pytest.raises(AssertionError, match="never"):
        await until(lambda: None, "never", timeout=0.05)


def test_a_long_wait_asks_less_and_less_often() -> None:
    """Asked every 20 ms at first, then less often (up to every 0.1 s): eleven checks cover
    ~0.9 s, where a fixed 20 ms pause made them ~0.2 s of a long wait's fifty checks a
    second."""
    asked: list[float] = []

    def check() -> bool:
        asked.append(time.monotonic())
        return len(asked) == 12

    assert wait_until(check)
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert gaps[0] < 0.5 and sum(gaps) > 0.6, gaps


async def test_a_long_wait_in_the_event_loop_asks_less_and_less_often() -> None:
    asked: list[float] = []

    def check() -> bool:
        asked.append(time.monotonic())
        return len(asked) == 12

    assert await until(check)
    assert asked[-1] - asked[0] > 0.6, asked


def test_no_test_module_keeps_a_wait_helper_of_its_own() -> None:
    own = sorted(
        f"{path.relative_to(TESTS)}: {node.name}"
        for path in TESTS.rglob("*.py")
        if path.name != "waiting.py"
        for node in ast.parse(path.read_text(), str(path)).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in COPIES
    )
    assert own == []
