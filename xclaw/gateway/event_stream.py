"""[gateway] A streaming response for Server-Sent Events, lean enough for a stream per run (AG-UI)
or per task (A2A): the chunks are written in the request's own task, and one task waits for the
client to leave (seen between chunks, or at the stream's next keepalive).

Starlette's StreamingResponse, on this server's ASGI version, and sse-starlette's
EventSourceResponse (a2a-sdk's) start a task group per response and a cancel scope per
write: measured, they cost more per run than the adapters' own work (bench/README.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.responses import StreamingResponse


class EventStream(StreamingResponse):
    """StreamingResponse's body, written without a task group (see the module docstring)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        gone = asyncio.ensure_future(receive())  # the client's next message: its leaving
        body = self.body_iterator
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in body:
                data = chunk if isinstance(chunk, bytes) else str(chunk).encode()
                await send({"type": "http.response.body", "body": data, "more_body": True})
                if gone.done():
                    return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()
            closing = getattr(body, "aclose", None)
            if closing is not None:
                await closing()
