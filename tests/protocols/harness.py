"""The official AG-UI client (@ag-ui/client's HttpAgent, npm, installed by .ci/run into
.ci/node) driven from the tests: one run per `node agui_client.cjs` process, the client's
messages and pending interrupts kept in a file between runs, as a browser tab keeps them
while its gateway restarts."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Server

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
SCRIPT = Path(__file__).with_name("agui_client.cjs")


def node() -> str:
    found = shutil.which("node")
    if found and (NODE_MODULES / "@ag-ui" / "client").is_dir():
        return found
    if os.environ.get("XCLAW_TEST_REQUIRE_NPM_AGUI") == "1":
        pytest.fail(f"@ag-ui/client is not installed under {NODE_MODULES} (see .ci/run)")
    pytest.skip("@ag-ui/client not installed: npm install --prefix .ci/node @ag-ui/client@1.0.0")


@dataclass
class RunResult:
    events: list[dict[str, Any]]
    outcome: dict[str, Any] | None
    error: dict[str, Any] | None
    result: Any
    messages: list[dict[str, Any]]
    pending: list[dict[str, Any]]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


@dataclass
class AguiClient:
    """One front end's view of one thread."""

    server: Server
    thread_id: str
    state: Path
    token: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)

    def _args(self, do: dict[str, Any], abort_after: int | None, touch: Path | None = None) -> str:
        args: dict[str, Any] = {
            "url": f"{self.server.http}/agui",
            "token": self.token or self.server.token,
            "threadId": self.thread_id,
            "state": str(self.state),
            "tools": self.tools,
            "do": do,
        }
        if abort_after is not None:
            args["abortAfter"] = abort_after
        if touch is not None:
            args["touch"] = str(touch)
        return json.dumps(args)

    async def start(
        self,
        do: dict[str, Any] | None = None,
        *,
        abort_after: int | None = None,
        touch: Path | None = None,
    ) -> asyncio.subprocess.Process:
        """A run started in the background (a test kills the gateway under it). `touch`: a
        file the client writes once its stream is open (its first event)."""
        return await asyncio.create_subprocess_exec(
            node(),
            str(SCRIPT),
            self._args(do or {}, abort_after, touch),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        )

    async def finish(self, proc: asyncio.subprocess.Process, timeout: float = 90) -> RunResult:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        text = out.decode().strip()
        assert text, f"the client printed nothing; stderr: {err.decode()}"
        data = json.loads(text.splitlines()[-1])
        assert "crashed" not in data, data["crashed"]
        return RunResult(
            events=data["events"],
            outcome=data["outcome"],
            error=data["error"],
            result=data.get("result"),
            messages=data["messages"],
            pending=data["pendingInterrupts"],
        )

    async def run(
        self,
        do: dict[str, Any] | None = None,
        *,
        abort_after: int | None = None,
        touch: Path | None = None,
    ) -> RunResult:
        return await self.finish(await self.start(do, abort_after=abort_after, touch=touch))
