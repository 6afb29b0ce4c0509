"""Fixtures: real `xclaw serve` processes (see harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.gateway.harness import OPEN_CLIENTS, Server, write_script


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(turns: list[dict[str, Any]] | None, *, approval: str = "ask", name: str = "srv") -> Server:
        root = tmp_path / name
        root.mkdir()
        script = write_script(root / "script.json", turns) if turns is not None else None
        s = Server(root=root, script=script, approval=approval)
        servers.append(s)
        return s.start()

    yield make
    for s in servers:
        s.kill()


@pytest.fixture(autouse=True)
async def close_clients() -> Any:
    yield
    while OPEN_CLIENTS:
        await OPEN_CLIENTS.pop().conn.close()
