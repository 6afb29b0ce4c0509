"""The server's garbage-collector policy (xclaw/gateway/heap.py): the start-up heap frozen,
full collections rare — which is only safe because a run leaves no reference cycles behind
(they would wait for the rare full collection to be freed)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from tests.runtime.harness import sh
from xclaw.gateway.heap import GEN2_THRESHOLD, settle_heap


@pytest.fixture
def collector() -> Iterator[None]:
    """Whatever a test does to the collector is undone after it."""
    thresholds = gc.get_threshold()
    yield
    gc.set_debug(0)
    gc.garbage.clear()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settle_heap_freezes_the_start_up_heap_and_makes_full_collections_rare(
    collector: None,
) -> None:
    settle_heap()
    assert gc.get_freeze_count() > 10_000  # the imported modules, never visited again
    assert gc.get_threshold()[2] == GEN2_THRESHOLD > 10


def _ours(o: Any) -> bool:
    """An object made by xclaw's code: its type, or a function or frame of a module of ours."""
    if type(o).__module__.startswith("xclaw"):
        return True
    code = getattr(o, "__code__", None) or getattr(o, "f_code", None) or getattr(o, "cr_code", None)
    return code is not None and "/xclaw/" in code.co_filename


async def test_a_run_leaves_no_reference_cycles_of_ours(make, collector: None) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [{"name": "list_dir", "input": {"path": "."}}]},
            {"text": "", "tool_calls": [sh("echo hi")]},
            {
                "text": "",
                "tool_calls": [{"name": "write_file", "input": {"path": "a", "content": "x"}}],
            },
            {"text": "done"},
        ]
    )
    sid = await h.session()
    await h.turn(sid, "warm up")  # first-use caches (tool specs, parsers) are not garbage
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    await h.turn(sid, "again")
    gc.collect()
    found = [o for o in gc.garbage if _ours(o)]
    gc.set_debug(0)
    kinds = sorted({type(o).__qualname__ + ":" + getattr(o, "__qualname__", "") for o in found})
    assert kinds == [], "\n".join(kinds)
