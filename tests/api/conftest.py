"""Fixtures of the Python API tests: in-process agents on real SQLite files with the scripted
model (docs/scripted-model.md), nothing from the environment (no real model can be reached)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import xclaw
from xclaw.api.local import LocalAgent

AgentFactory = Callable[..., Any]


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def write_script(path: Path, turns: list[dict[str, Any]], **extra: Any) -> Path:
    path.write_text(json.dumps({"turns": turns, **extra}))
    return path


@pytest.fixture(autouse=True)
def no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_")):
            monkeypatch.delenv(name)


@pytest.fixture
async def open_agent(tmp_path: Path) -> AsyncIterator[AgentFactory]:
    """open_agent(turns, approval=..., **open_kwargs) -> an in-process agent, closed after."""
    opened: list[LocalAgent] = []

    async def make(
        turns: list[dict[str, Any]], *, approval: str = "yolo", name: str = "a", **kw: Any
    ) -> LocalAgent:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        script = write_script(root / "script.json", turns)
        agent = await xclaw.open(
            db=root / "app.db",
            home=root / "home",
            model=f"script:{script}",
            approval=approval,
            cwd=root,
            **kw,
        )
        assert isinstance(agent, LocalAgent)
        opened.append(agent)
        return agent

    yield make
    for agent in opened:
        await agent.close()


@pytest.fixture
def gateway(tmp_path: Path) -> Any:
    """gateway(turns, approval=...) -> a real `xclaw serve` process (tests/gateway/harness.py),
    killed after the test."""
    from tests.gateway.harness import Server

    servers: list[Server] = []

    def start(turns: list[dict[str, Any]], *, approval: str = "yolo", name: str = "gw") -> Server:
        root = tmp_path / name
        root.mkdir()
        server = Server(
            root=root, script=write_script(root / "script.json", turns), approval=approval
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.kill()
