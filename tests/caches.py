"""Where the suite keeps what it may reuse between runs and checkouts, per machine, under
XDG_CACHE_HOME (tests/conftest.py keeps it pointing at the real one):

- mypy's incremental cache. mypy checks every cached module's source hash, so a fresh checkout
  of the same code reuses it and a changed file is checked again: the type gates cost seconds
  instead of a full check.
- Python's bytecode, when the environment forbids writing it (PYTHONDONTWRITEBYTECODE, as on
  the CI machine kind): every `xclaw` process a test starts would otherwise compile xclaw's own
  modules from source (85 for `xclaw run`; pip compiled the installed packages), ~0.15 s of
  CPU a start. The
  bytecode goes to a directory of its own (PYTHONPYCACHEPREFIX), never into the checkout; Python
  checks each file's source size and time before using it.

Several checkouts on one machine (git worktrees, a CI run beside a developer's) share these.
mypy's cache is not safe for two runs writing it at once (one read a module's metadata while
the other rewrote it, and a worktree's check reported another checkout's code), so each mypy
run holds its cache's lock (`mypy_lock`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def mypy_cache(name: str) -> str:
    """A cache directory of its own per mypy configuration (`name`): two checks with different
    flags must not share one."""
    return str(_root() / "mypy" / name)


@contextlib.contextmanager
def mypy_lock(name: str) -> Iterator[str]:
    """The cache directory of `name` (`mypy_cache`), held alone for the length of the block:
    another run on this machine, from any checkout, waits for it."""
    cache = Path(mypy_cache(name))
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield str(cache)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def bytecode() -> str:
    """The pycache prefix the suite's processes share (see the module's docstring)."""
    return str(_root() / "pycache")


def _root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xclaw-tests"
