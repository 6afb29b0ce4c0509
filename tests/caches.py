"""Where the suite keeps what it may reuse between runs and checkouts: mypy's incremental
cache, per machine, under XDG_CACHE_HOME (tests/conftest.py keeps it pointing at the real one).
mypy checks every cached module's source hash, so a fresh checkout of the same code reuses it
and a changed file is checked again: the type gates cost seconds instead of a full check."""

from __future__ import annotations

import os
from pathlib import Path


def mypy_cache(name: str) -> str:
    """A cache directory of its own per mypy configuration (`name`): two checks with different
    flags must not share one."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return str(base / "xclaw-tests" / "mypy" / name)
