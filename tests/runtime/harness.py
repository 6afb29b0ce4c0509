"""An in-process runtime on a real SQLite store with the scripted model, for tests that drive
the runtime directly (tests/runtime, tests/workspace)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from xclaw.config.settings import Settings
from xclaw.llm.scripted import ScriptedModel
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepType


def write_script(path: Path, turns: list[dict[str, Any]], **extra: Any) -> Path:
    path.write_text(json.dumps({"turns": turns, **extra}))
    return path


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


class Harness:
    def __init__(
        self,
        tmp: Path,
        turns: list[dict[str, Any]],
        approval: str | dict[str, Any] = "yolo",
        script_extra: dict[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        self.tmp = tmp
        self.settings = Settings(
            home=tmp,
            database=str(tmp / "xclaw.db"),
            workspace_root=tmp / "ws",
            approval={"mode": approval} if isinstance(approval, str) else approval,
            **settings,
        )
        self.root = self.settings.workspace_root
        self.store = open_store(self.settings.database)
        self.model = ScriptedModel(write_script(tmp / "script.json", turns, **(script_extra or {})))
        self.runtime = Runtime(self.store, self.settings, model=self.model)
        self.frames: list[dict[str, Any]] = []

    async def session(self, sid: str | None = None) -> str:
        """Open (or create) a session and collect its frames."""
        s, _ = await self.runtime.open(sid)
        self.runtime.subscribe(s.session_id, self.frames.append)
        return s.session_id

    async def turn(self, sid: str, text: str) -> None:
        await self.runtime.send(sid, text)
        await self.runtime.wait_idle(sid)

    async def ask(self, text: str, sid: str | None = None) -> str:
        """One turn, in a new session unless one is given; returns the session id."""
        sid = sid or await self.session()
        await self.turn(sid, text)
        return sid

    def step_of(self, sid: str, name: str, nth: int = 0) -> str:
        """Display id of the nth tool call named `name`."""
        calls = [s for s in self.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
        return [s for s in calls if s.name == name][nth].display_id

    async def first(self, kind: str, timeout: float = 5.0) -> dict[str, Any]:
        """The first frame of this kind, waiting for it to arrive."""
        for _ in range(int(timeout / 0.01)):
            if self.of(kind):
                return self.of(kind)[0]
            await asyncio.sleep(0.01)
        raise AssertionError(f"no {kind} frame within {timeout} s")

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == kind]

    async def close(self) -> None:
        await self.runtime.shutdown()
        self.store.close()


@pytest.fixture
async def make(tmp_path: Path):
    """make(turns, approval=..., script_extra=..., **settings) -> Harness, closed after."""
    made: list[Harness] = []

    def factory(turns: list[dict[str, Any]], **kw: Any) -> Harness:
        h = Harness(tmp_path, turns, **kw)
        made.append(h)
        return h

    yield factory
    for h in made:
        await h.close()
