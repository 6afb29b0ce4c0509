"""Fixtures of the protocol-adapter tests: real gateways (tests/gateway/harness.py) with the
scripted model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Any]:
    """gateway(turns, approval=...) -> a real `xclaw serve` process, killed after the test."""
    from tests.gateway.harness import Server

    servers: list[Server] = []

    def start(turns: list[dict[str, Any]], *, approval: str = "yolo", name: str = "gw") -> Server:
        root = tmp_path / name
        root.mkdir()
        script = root / "script.json"
        script.write_text(json.dumps({"turns": turns}))
        server = Server(root=root, script=script, approval=approval)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.kill()
