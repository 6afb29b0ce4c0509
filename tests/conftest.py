"""Fixtures shared across test packages."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import caches

# `make`: an in-process runtime on a real SQLite store with the scripted model; the switches
# that find leaks and where the time goes (tests/diagnostics.py).
pytest_plugins = ["tests.runtime.harness", "tests.diagnostics"]


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode cached outside the checkout when the environment forbids writing it beside the
    sources (tests/caches.py): set before pytest-xdist starts its workers, so they and every
    process a test starts inherit it."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ["PYTHONPYCACHEPREFIX"] = caches.bytecode()
        del os.environ["PYTHONDONTWRITEBYTECODE"]
    # The process that starts the workers compiles once what each would compile (caches.py).
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        caches.warm_bytecode(config, Path(__file__).resolve().parents[1], pytest_plugins)


@pytest.fixture(scope="session", autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and XCLAW_HOME of this test process (one per xdist worker) and of everything it
    starts: a directory of its own, so no test reads or writes the developer's ~/.xclaw and
    no two workers share one. What the suite takes from the real home stays reachable: the
    caches the CI setup builds once per machine (XDG_CACHE_HOME) and git's identity."""
    real = Path.home()
    home = tmp_path_factory.mktemp("home")
    saved = {
        k: os.environ.get(k) for k in ("HOME", "XCLAW_HOME", "XDG_CACHE_HOME", "GIT_CONFIG_GLOBAL")
    }
    os.environ.setdefault("XDG_CACHE_HOME", str(real / ".cache"))
    if (real / ".gitconfig").exists():
        os.environ.setdefault("GIT_CONFIG_GLOBAL", str(real / ".gitconfig"))
    os.environ["HOME"] = str(home)
    os.environ["XCLAW_HOME"] = str(home / ".xclaw")
    try:
        yield home
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(autouse=True)
def no_client_left_open() -> Iterator[None]:
    """A test that ends with a gateway client still open on its finished event loop fails
    here, naming itself. Left alone, that client's socket would be finalised by the garbage
    collector during some later test on the same worker — failing it instead, with a
    ResourceWarning that says nothing of where the socket came from."""
    yield
    harness = sys.modules.get("tests.gateway.harness")
    if harness is None:  # no test on this worker has opened a client
        return
    left = harness.left_open()
    if left:
        pytest.fail(
            f"{len(left)} gateway client(s) left open: close them (`await client.close()`) "
            "or take the `close_clients` fixture (tests/gateway/conftest.py)",
            pytrace=False,
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest first. The suite runs on pytest-xdist workers (`--dist loadfile
    --no-loadscope-reorder`, pyproject.toml): each test file goes whole to whichever worker is
    free, so a costly server its module shares (a model server, Phoenix, a browser) starts
    once. Files are handed out in the order of their first test here, so the real-model tier, then
    the tests that start real processes, go first and the many quick ones fill the end:
    no worker is left with a long test while the others have finished. A stable sort: the
    order within each kind is the files' own."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("local_model"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)
