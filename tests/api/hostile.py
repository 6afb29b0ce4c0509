"""A hostile (or simply wrong) server for `xclaw.connect`: a real server on loopback, in a
thread of its own, that speaks HTTP/1.1 and the WebSocket protocol by hand so that it can
say anything — garbage, a refusal without xclaw's body, another session's frames, a frame of
200 MB, or nothing at all.

A test gives it `http` (what to answer to an HTTP request) and `ws` (what to do on a
WebSocket once the handshake is done); `Hostile.sent` counts the bytes it managed to write
(how much of a huge answer the client took before it hung up)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import struct
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
HUGE = 200 * 1024 * 1024


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


class Silence:
    """Answer nothing, ever (until the client hangs up)."""


@dataclass
class Stream:
    """A 200 answer of `size` bytes, declared (Content-Length) or not (chunked), written until
    the client hangs up."""

    size: int = HUGE
    declared: bool = True


HttpAnswer = bytes | Silence | Stream


def response(status: int, body: bytes | str, kind: str = "application/json") -> bytes:
    data = body.encode() if isinstance(body, str) else body
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + data


HEALTH = {
    "status": "ok",
    "version": "0.1.0",
    "database": "x.db",
    "model": None,
    "sockets": 0,
    "worker": None,
    "backend": "sqlite",
    "sessionsDriven": [],
    "commits": 0,
    "writerBusyMs": 0,
}


def session_json(sid: str, *, busy: bool = False) -> dict[str, Any]:
    return {
        "sessionId": sid,
        "title": "t",
        "status": "Success",
        "createdAt": 1,
        "updatedAt": 1,
        "isForked": False,
        "parentSessionId": None,
        "forkedFromSeq": None,
        "forkedFrom": None,
        "awaitingInput": False,
        "metadata": {},
        "busy": busy,
        "state": "running" if busy else "success",
        "stateText": "x",
    }


def gateway_http(request: Request) -> HttpAnswer:
    """What a well-behaved gateway answers, enough to get past connect and a session."""
    if request.path.startswith("/api/health"):
        return response(200, json.dumps(HEALTH))
    if request.path.startswith("/api/sessions/") and request.path.endswith("/steps?n=0"):
        return response(200, json.dumps({"sessionId": "S", "steps": []}))
    if request.path.startswith("/api/sessions/"):
        sid = request.path.split("/")[3].split("?")[0]
        return response(200, json.dumps(session_json(sid)))
    if request.path.startswith("/api/sessions"):
        return response(201, json.dumps(session_json("S")))
    return response(404, '{"code":"unknown_session","error":"no"}')


class Socket:
    """The server's end of one WebSocket."""

    def __init__(self, server: Hostile, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.answer_pings = True

    async def send(self, frame: dict[str, Any] | str | bytes, opcode: int = 0x1) -> None:
        data = (
            frame
            if isinstance(frame, bytes)
            else (frame if isinstance(frame, str) else json.dumps(frame)).encode()
        )
        await self.send_header(len(data), opcode)
        await self.write(data)

    async def send_header(self, length: int, opcode: int = 0x1) -> None:
        head = bytes([0x80 | opcode])
        if length < 126:
            head += bytes([length])
        elif length < 65536:
            head += bytes([126]) + struct.pack("!H", length)
        else:
            head += bytes([127]) + struct.pack("!Q", length)
        await self.write(head)

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()
        self.server.sent += len(data)

    async def recv(self) -> dict[str, Any] | None:
        """The next text frame from the client as JSON (pings answered, if told to); None
        when it closed."""
        while True:
            try:
                b0, b1 = await self.reader.readexactly(2)
                length = b1 & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", await self.reader.readexactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
                mask = await self.reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
                payload = bytearray(await self.reader.readexactly(length))
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
            for i in range(len(payload)):
                payload[i] ^= mask[i % 4]
            opcode = b0 & 0x0F
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                if self.answer_pings:
                    await self.send(bytes(payload), opcode=0xA)
                continue
            if opcode == 0x1:
                frame = json.loads(payload)
                self.server.received.append(frame)
                return frame  # type: ignore[no-any-return]

    async def attach(self, *, busy: bool = False) -> str:
        """Answer the client's `reconnect` as a gateway does: session, history, status."""
        frame = await self.recv()
        assert frame is not None and frame["type"] == "reconnect", frame
        sid = str(frame["sessionId"])
        base = {"sessionId": sid, "status": "Success", "title": "t", "isForked": False}
        await self.send(
            {
                "type": "session",
                **base,
                "parentSessionId": None,
                "awaitingInput": False,
                "state": "success",
                "stateText": "Success",
                "created": False,
            }
        )
        await self.send({"type": "history", "sessionId": sid, "content": "[]", "messages": []})
        await self.send(
            {
                "type": "status",
                "sessionId": sid,
                "status": "Success",
                "busy": busy,
                "awaitingInput": False,
                "state": "success",
                "stateText": "Success",
            }
        )
        return sid

    async def until_closed(self) -> None:
        while await self.recv() is not None:
            pass


WsScenario = Callable[[Socket], Awaitable[None]]


async def attach_then_wait(ws: Socket) -> None:
    await ws.attach()
    await ws.until_closed()


@dataclass
class Hostile:
    """The server: `http` answers each HTTP request; `ws` plays each WebSocket; `handshake`
    (if set) is sent instead of the upgrade's 101."""

    http: Callable[[Request], HttpAnswer] = gateway_http
    ws: WsScenario = attach_then_wait
    handshake: bytes | None = None
    sent: int = 0
    received: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Hostile:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def serve() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
                ready.set()
                async with self._server:
                    await self._server.serve_forever()

            try:
                loop.run_until_complete(serve())
            except asyncio.CancelledError:
                pass
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="hostile-gateway", daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is not None and server is not None and not loop.is_closed():

            def close() -> None:
                server.close()
                for task in asyncio.all_tasks(loop):
                    task.cancel()

            loop.call_soon_threadsafe(close)
        if self._thread is not None:
            self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            request = Request(method, path, headers)
            if headers.get("upgrade", "").lower() == "websocket":
                await self._websocket(request, reader, writer)
            else:
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                await self._answer(self.http(request), reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, answer: HttpAnswer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if isinstance(answer, bytes):
            writer.write(answer)
            await writer.drain()
            self.sent += len(answer)
        elif isinstance(answer, Silence):
            await reader.read()  # until the client hangs up
        else:
            length = (
                f"Content-Length: {answer.size}"
                if answer.declared
                else "Transfer-Encoding: chunked"
            )
            writer.write(
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}\r\n\r\n".encode()
            )
            chunk = b"[" * 65536
            left = answer.size
            while left > 0:
                data = chunk[: min(left, len(chunk))]
                writer.write(data if answer.declared else b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
                self.sent += len(data)
                left -= len(data)

    async def _websocket(
        self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self.handshake is not None:
            writer.write(self.handshake)
            await writer.drain()
            return
        key = request.headers["sec-websocket-key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        writer.write(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        await self.ws(Socket(self, reader, writer))
