"""[acp] Running the ACP agent on this process's stdin and stdout, as an editor starts it.

stdout carries JSON-RPC only: logging goes to stderr (warnings and errors, one line each,
redacted as the server's are). The agent stops when the editor closes stdin (or kills it):
runs in this process stop with it and are continued by the next `session/load` (xclaw.open),
or go on in the gateway (`--connect`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from xclaw.acp.agent import XclawAcpAgent
from xclaw.acp.wire import GuardedStdio, stdio_pair
from xclaw.api.base import Agent

if TYPE_CHECKING:
    from acp.interfaces import Agent as AcpAgent

log = logging.getLogger("xclaw.acp")


class OneLine(logging.Formatter):
    """A log record on one line of stderr, without a traceback (the editor shows stderr)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.name}: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        record.exc_info = None
        record.exc_text = None
        return " ".join(text.split())


def quiet_logging(name: str = "xclaw acp") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


async def serve(
    opener: Callable[[dict[str, dict[str, Any]]], Awaitable[Agent]], *, remote: bool
) -> None:
    from acp.agent.connection import AgentSideConnection

    reader, writer = await stdio_pair()
    transport = GuardedStdio(reader, writer)
    agent = XclawAcpAgent(opener, remote=remote)
    conn = AgentSideConnection(
        cast("AcpAgent", agent), transport, listening=False, use_unstable_protocol=True
    )
    try:
        await conn.listen()
    finally:
        await agent.close()
        await conn.close()


def run(opener: Callable[[dict[str, dict[str, Any]]], Awaitable[Agent]], *, remote: bool) -> None:
    quiet_logging()
    asyncio.run(serve(opener, remote=remote))
