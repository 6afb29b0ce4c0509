"""[acp] JSON-RPC over stdio, newline-delimited, guarded against what a client may send.

The SDK's own stdio framing skips a line that is not JSON without answering it, and stops
the whole connection on a line that is JSON but not an object (`[1]`, `"x"`). Here every
line is answered as JSON-RPC 2.0 says: not JSON → -32700 (id null); not a request object, or
longer than MAX_LINE → -32600; the connection goes on. Requests reach the SDK's router as
decoded objects (the SDK's message-level `Transport` seam), so its method handling, params
validation and errors are used as they are.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

# A prompt is at most MAX_PROMPT_CHARS (xclaw/acp/prompt.py); a line above this is refused
# whole, without reading it into memory at once.
MAX_LINE = 16 * 1024 * 1024
_CHUNK = 64 * 1024


def error_reply(code: int, message: str, rid: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


class GuardedStdio:
    """The SDK's `Transport` over a reader and a writer of newline-delimited JSON."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        data = orjson.dumps(message) + b"\n"
        async with self._lock:
            if self._closed:
                raise ConnectionError("the client's stdio is closed")
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line, too_long = await self._line()
            if line is None:
                return None
            if too_long:
                await self.send(error_reply(-32600, f"message over {MAX_LINE} bytes refused"))
                continue
            if not line.strip():
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                await self.send(error_reply(-32700, "Parse error: a line that is not JSON"))
                continue
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                rid = message.get("id") if isinstance(message, dict) else None
                if not isinstance(rid, (str, int)) or isinstance(rid, bool):
                    rid = None
                await self.send(
                    error_reply(-32600, "Invalid request: not a JSON-RPC 2.0 object", rid)
                )
                continue
            if "method" in message and not isinstance(message["method"], str):
                await self.send(error_reply(-32600, "Invalid request: method", message.get("id")))
                continue
            if "params" in message and not isinstance(message["params"], (dict, list, type(None))):
                await self.send(error_reply(-32602, "Invalid params", message.get("id")))
                continue
            return message

    async def _line(self) -> tuple[bytes | None, bool]:
        """The next line (None at the end of input), and whether it was over MAX_LINE (then
        read to its end and thrown away)."""
        parts: list[bytes] = []
        size = 0
        too_long = False
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as e:
                chunk = await self._reader.readexactly(e.consumed)
                done = False
            except asyncio.IncompleteReadError as e:
                chunk = e.partial
                if not chunk and not parts:
                    return None, False
                done = True
            size += len(chunk)
            if size > MAX_LINE:
                too_long = True
                parts = []
            else:
                parts.append(chunk)
            if done:
                return b"".join(parts), too_long

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            self._writer.close()


async def stdio_pair() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """This process's stdin and stdout as asyncio streams."""
    import sys

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer
