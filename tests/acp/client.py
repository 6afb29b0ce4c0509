"""An editor, for the tests: the official `agent-client-protocol` client connection spawning
`xclaw acp` as a real process (as Zed does), recording every `session/update` and answering
`session/request_permission` as a test says."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

ROOT = Path(__file__).resolve().parents[2]
XCLAW = [sys.executable, "-m", "xclaw"]


def agent_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_MODEL", "XCLAW_DB", "XCLAW_TOKEN"))
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


class Editor:
    """The client side: updates by session, permission requests answered by `choose`."""

    def __init__(self, choose: Callable[[Any], str | None] | None = None) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[Any] = []
        self.choose = choose or (lambda request: "allow")
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append(tool_call)
        self.changed.set()
        choice = self.choose(tool_call)
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id in (None, s)]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text
            for _, u in self.updates
            if u.session_update == kind and getattr(u.content, "text", None) is not None
        )

    async def until(self, pred: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            found = pred()
            if found:
                return found
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"not seen in {timeout} s; updates: {self.kinds()}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.2))


@contextlib.asynccontextmanager
async def spawned(
    editor: Editor, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """`xclaw acp ARGS` started as an editor starts it, initialized."""
    async with spawn_agent_process(
        editor, *XCLAW, "acp", *args, env=env or agent_env(), cwd=cwd
    ) as (conn, proc):
        await conn.initialize(protocol_version=1)
        yield conn, proc
