"""Two switches for finding what a test leaves behind or what the suite's time goes to; both
off unless their variable is set, so the suite pays nothing for them.

- ``XCLAW_TEST_LEAKS=1``: a garbage collection after each test's teardown, so a socket,
  transport or file a test left open in a reference cycle is finalised — and its
  ResourceWarning, an error under the suite's warning filter, fails — in that test, not in
  whichever later test the collector happens to run in.
- ``XCLAW_TEST_PROFILE=FILE``: one JSON line a test appended to FILE (one per worker, suffixed
  with its xdist id): wall seconds, and CPU seconds of the test process and of the children it
  reaped (RUSAGE_CHILDREN), setup, call and teardown together.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import time
from collections.abc import Iterator

import pytest

LEAKS = bool(os.environ.get("XCLAW_TEST_LEAKS"))
PROFILE = os.environ.get("XCLAW_TEST_PROFILE")


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not PROFILE:
        return (yield)
    wall, (own, kids) = time.monotonic(), _cpu()
    try:
        return (yield)
    finally:
        own2, kids2 = _cpu()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = {
            "test": item.nodeid,
            "wall": round(time.monotonic() - wall, 3),
            "cpu": round(own2 - own, 3),
            "children": round(kids2 - kids, 3),
            "worker": worker,
        }
        with open(f"{PROFILE}.{worker}", "a") as f:
            f.write(json.dumps(line) + "\n")


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if LEAKS:
            gc.collect()
            # pytest reports what the collection finalised at the next phase it checks; ask it
            # now, so the failure names this test.
            from _pytest.unraisableexception import collect_unraisable

            collect_unraisable(item.config)
