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
  checks each file's source size and time before using it."""

from __future__ import annotations

import os
from pathlib import Path


def mypy_cache(name: str) -> str:
    """A cache directory of its own per mypy configuration (`name`): two checks with different
    flags must not share one."""
    return str(_root() / "mypy" / name)


def bytecode() -> str:
    """The pycache prefix the suite's processes share (see the module's docstring)."""
    return str(_root() / "pycache")


def _root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xclaw-tests"
