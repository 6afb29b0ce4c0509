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
from typing import Any


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


def warm_bytecode(config: Any, root: Path, plugins: list[str]) -> None:
    """Compile xclaw's and the tests' modules into the pycache prefix, and pytest's rewritten
    test modules beside them, once, in the process that starts the xdist workers, before it
    starts them.

    The prefix mirrors each file's absolute path, so a fresh clone in a new folder (each CI
    run) finds nothing cached, and the four workers, collecting the whole suite at the same
    moment, each compiled xclaw and rewrote the asserts of every test module: `--collect-only`
    took 20.9 CPU-s from nothing against 6.5 warm, a worker. Done here once, the workers find
    it all written. A pure speed-up: pytest and Python check every cached file against its
    source (its hash, or its size and time) and compile afresh what does not match; pytest's
    own functions that rewrite are internal, so if they change this does nothing.
    """
    import compileall
    import sys

    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if not prefix:
        return  # bytecode beside the sources: the workers write it there as they go
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
    except ImportError:
        return
    saved = sys.pycache_prefix
    sys.pycache_prefix = prefix
    try:
        compileall.compile_dir(root / "xclaw", quiet=2)
        state = config.stash[assertstate_key]
        # What pytest rewrites: test modules, conftest files and the plugins conftest names.
        rewritten = {root / (name.replace(".", "/") + ".py") for name in plugins}
        # The test modules of the run only (a file or two on `-n 2` need not rewrite the rest).
        chosen = [Path(arg.split("::")[0]).resolve() for arg in config.args]
        for path in sorted((root / "tests").rglob("*.py")):
            if not (path.name.startswith("test_") or path.name == "conftest.py"):
                compileall.compile_file(path, quiet=2)
                if path not in rewritten:
                    continue
            elif path.name.startswith("test_") and not any(
                path == c or c in path.parents for c in chosen
            ):
                continue
            cache = get_cache_dir(path)
            pyc = cache / (path.name[:-3] + PYC_TAIL)
            if _read_pyc(path, pyc) is None:
                cache.mkdir(parents=True, exist_ok=True)
                source_hash, code = _rewrite_test(path, config)
                _write_pyc(state, code, source_hash, pyc)
    except (AttributeError, KeyError, TypeError, ValueError, OSError, SyntaxError):
        pass  # a speed-up only: the workers compile what is missing
    finally:
        sys.pycache_prefix = saved


def _root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xclaw-tests"
