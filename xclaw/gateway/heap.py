"""[gateway] The garbage collector of a server that holds many sessions at once.

CPython's cycle collector stops the whole process while it runs, and a full collection visits
every tracked object: measured on this project's 2-CPU VM with 1,000 paced sessions (each
holding a few hundred objects: coroutine frames of the ASGI stack, the run, the socket), full
collections ran about once a second and took up to 500 ms each, a third of the server's CPU
and the whole of its p99 latency (bench/HISTORY.md, "1,000 paced sessions").

Two changes make them rare and short:

- `gc.freeze()` once the server is up: the ~100,000+ objects of the imported modules (the
  SDKs, pydantic, starlette) move to a permanent generation that no collection visits again;
- a full collection only after GEN2_THRESHOLD collections of the middle generation instead of
  CPython's 10, so a busy server runs one every few minutes rather than every second. Young
  collections (gen 0 and 1, ~1-10 ms) go on as usual and free cyclic garbage while it is young.

This is safe because the per-step path makes no reference cycles of its own (they would wait
for the rare full collection to be freed): tests/gateway/test_heap.py checks that a run leaves
no cyclic garbage behind.
"""

from __future__ import annotations

import gc

# CPython's defaults are (700, 10, 10).
GEN0_THRESHOLD = 700
GEN1_THRESHOLD = 10
GEN2_THRESHOLD = 1000


def settle_heap() -> None:
    """Collect once, freeze what is alive (the start-up heap), and make full collections
    rare. Call once the server has started and imported what it serves with."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
