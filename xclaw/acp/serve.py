"""[acp] Running the ACP agent on this process's stdin and stdout, as an editor starts it.

stdout carries JSON-RPC only: logging goes to stderr (warnings and errors, one line each,
redacted as the server's are). The agent stops when the editor closes stdin (or kills it):
runs in this process stop with it and are continued by the next `session/load` (xclaw.open),
or go on in the gateway (`--connect`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from xclaw.acp.agent import XclawAcpAgent
from xclaw.acp.stderr_log import quiet_logging
from xclaw.acp.wire import GuardedStdio, stdio_pair
from xclaw.api.base import Agent

if TYPE_CHECKING:
    from acp.interfaces import Agent as AcpAgent

log = logging.getLogger("xclaw.acp")


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
