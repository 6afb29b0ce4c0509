"""Fixtures: real `xclaw serve` processes (see harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Server, close_open_clients, write_script

ServerFactory = Callable[..., Server]


def _factory(base: Path, servers: list[Server]) -> ServerFactory:
    def make(
        turns: list[dict[str, Any]] | None, *, approval: str = "ask", name: str = "srv"
    ) -> Server:
        root = base / name
        root.mkdir(parents=True)
        script = write_script(root / "script.json", turns) if turns is not None else None
        s = Server(root=root, script=script, approval=approval)
        servers.append(s)
        return s.start()

    return make


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[ServerFactory]:
    """Servers for one test (crash drills: they get killed and restarted)."""
    servers: list[Server] = []
    yield _factory(tmp_path, servers)
    for s in servers:
        s.kill()


@pytest.fixture(scope="module")
def module_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Servers shared by a module's tests: each test works in its own sessions."""
    servers: list[Server] = []
    yield _factory(tmp_path_factory.mktemp("servers"), servers)
    for s in servers:
        s.kill()


@pytest.fixture(autouse=True)
async def close_clients() -> Any:
    yield
    await close_open_clients()
