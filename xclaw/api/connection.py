"""[api] The one reconnect loop of xclaw's clients: a WebSocket to a gateway, made again with
backoff whenever it is lost, until stopped.

The Python API's sessions (xclaw/api/remote.py, `SessionSocket`) and the terminal client
(`xclaw chat`, xclaw/cli/chat.py) both stand on it: what each does on a new connection (the
`reconnect` frame it attaches with), with each frame, and when a connection ends (say so, go
on, or give up) is theirs; connecting, the backoff and its constants, the liveness pings and
the wait between attempts are here, once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

# The wait before connecting again: doubled after each failed attempt up to the maximum, and
# back to the start once a connection is made.
BACKOFF_START_S = 0.2
BACKOFF_MAX_S = 5.0
# The WebSocket's own liveness check: a gateway that stops answering pings is left and
# connected to again (at most every 20 s; more often when the caller's bound is shorter).
PING_S = 20.0
# How long a close handshake may take at most.
CLOSE_TIMEOUT_S = 10.0
# The gateway's close codes that refuse this client for good (docs/protocol.md).
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN_ORIGIN = 4403
CLOSE_TOO_MANY_ATTEMPTS = 4429


@dataclass(frozen=True, slots=True)
class Drop:
    """How a connection ended, or why none was made: the close code the gateway sent (None
    without one), and the error that ended it (None: closed cleanly)."""

    code: int | None = None
    error: Exception | None = None

    @property
    def refused_status(self) -> int | None:
        """The HTTP status the WebSocket handshake was refused with, if it was."""
        return self.error.response.status_code if isinstance(self.error, InvalidStatus) else None


class Reconnecting:
    """One WebSocket to `url`, connected again after `BACKOFF_START_S` (doubling up to
    `BACKOFF_MAX_S`) whenever it ends, until `stop` is set or `on_drop` says to give up.

    `on_open(ws)`: a connection is made (the owner attaches with its `reconnect` frame);
    `on_frame(raw)`: each frame as it arrives; `ping`: the liveness check's interval and
    bound; `on_drop(drop, delay)`: the connection ended
    (or none was made) — True connects again after `delay` seconds, False gives up. `ws` is
    the connection of the moment (None between connections)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        on_open: Callable[[ClientConnection], Awaitable[None]],
        on_frame: Callable[[str | bytes], None],
        on_drop: Callable[[Drop, float], bool],
        open_timeout: float,
        max_size: int | None,
        ping: float = PING_S,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.on_open, self.on_frame, self.on_drop = on_open, on_frame, on_drop
        self.open_timeout = open_timeout
        self.max_size = max_size
        self.ping = ping
        self.stop = stop or asyncio.Event()
        self.ws: ClientConnection | None = None

    async def run(self) -> None:
        """Connect, and again after each loss, until stopped or given up."""
        delay = BACKOFF_START_S
        while not self.stop.is_set():
            drop = Drop()
            try:
                async with ws_connect(
                    self.url,
                    additional_headers=self.headers,
                    open_timeout=self.open_timeout,
                    close_timeout=min(self.open_timeout, CLOSE_TIMEOUT_S),
                    max_size=self.max_size,
                    ping_interval=self.ping,
                    ping_timeout=self.ping,
                ) as ws:
                    self.ws = ws
                    delay = BACKOFF_START_S
                    await self.on_open(ws)
                    async for raw in ws:
                        self.on_frame(raw)
                    drop = Drop(ws.close_code)
            except ConnectionClosed as e:
                drop = Drop(e.rcvd.code if e.rcvd else None, e)
            except (OSError, TimeoutError, WebSocketException) as e:
                drop = Drop(None, e)
            finally:
                self.ws = None
            if not self.on_drop(drop, delay) or self.stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
