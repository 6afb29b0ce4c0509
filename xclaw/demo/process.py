"""[demo] A real `xclaw serve` child process and a small protocol client, for the demo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from xclaw.errors import EXIT_USAGE

Frame = dict[str, Any]


def free_port() -> int:
    """A free port below the kernel's ephemeral range: the demo restarts its server on the
    same port after the crash, and a port the kernel hands out (bind to port 0) can meanwhile
    become the local port of any outgoing connection on the machine, failing the restart."""
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32_768
    for _ in range(200):
        port = random.randrange(10_000, max(first, 10_001))
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # nothing free down there: any port the kernel gives
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerRefused(RuntimeError):
    """`xclaw serve` refused what it was given (its configuration: exit status 2) before
    serving anything; `message` is its own `error:` line."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ServerProcess:
    """`python -m xclaw serve` on loopback; restartable on the same port and database."""

    def __init__(
        self, home: Path, env: dict[str, str], token: str, port: int | None = None
    ) -> None:
        self.home = home
        self.env = env
        self.token = token
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        log = (self.home / f"serve-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xclaw", "serve", "--port", str(self.port)],
            cwd=self.home,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, said = self.proc.returncode, self.log()
                refused = [ln for ln in said.splitlines() if ln.startswith("error: ")]
                if code == EXIT_USAGE and refused:
                    raise ServerRefused(refused[-1].removeprefix("error: "), code)
                raise RuntimeError(f"xclaw serve exited with {code}:\n{said}")
            try:
                r = httpx.get(
                    f"{self.url}/api/health",
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=1,
                )
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"xclaw serve did not answer within {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.home.glob("serve-*.log")))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Client:
    """One WebSocket attached to one session; every frame goes to `show` as it arrives."""

    def __init__(self, conn: ClientConnection, show: Callable[[Frame], None]) -> None:
        self.conn = conn
        self.show = show
        self.frames: list[Frame] = []
        self._new = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self.session_id: str | None = None

    @classmethod
    async def attach(
        cls, server: ServerProcess, session_id: str | None, show: Callable[[Frame], None]
    ) -> Client:
        conn = await connect(
            f"ws://127.0.0.1:{server.port}/ws",
            additional_headers={"Authorization": f"Bearer {server.token}"},
            max_size=None,
        )
        client = cls(conn, show)
        await client.send({"type": "reconnect", "sessionId": session_id})
        frame = await client.until(lambda f: f.get("type") == "session")
        client.session_id = frame["sessionId"]
        return client

    async def _read(self) -> None:
        try:
            async for raw in self.conn:
                frame = json.loads(raw)
                self.frames.append(frame)
                self.show(frame)
                self._new.set()
        except ConnectionClosed:
            pass  # the server went away (the demo kills it on purpose); `until` reports it
        finally:
            self._new.set()

    async def send(self, frame: Frame) -> None:
        await self.conn.send(json.dumps(frame))

    async def say(self, text: str) -> None:
        await self.send({"type": "message", "sessionId": self.session_id, "content": text})

    async def until(
        self,
        pred: Callable[[Frame], bool],
        within_s: float = 30.0,
        since: int = 0,
        *,
        quiet: bool = False,
    ) -> Frame:
        """The first frame (from index `since`) satisfying pred, or TimeoutError naming how
        long it waited after `within_s`. With `quiet`, `within_s` is how long the server may
        stay silent: a real model streaming a long answer on a slow machine is progress, not a
        hang (its length is bounded by max_tokens and max_iterations anyway)."""
        deadline = time.monotonic() + within_s
        seen = since
        while True:
            while seen < len(self.frames):
                frame = self.frames[seen]
                seen += 1
                if pred(frame):
                    return frame
                if quiet:
                    deadline = time.monotonic() + within_s
            if self._reader.done():
                raise RuntimeError("the connection to the server closed")
            left = deadline - time.monotonic()
            if left <= 0:
                what = "nothing from the server for" if quiet else "no expected frame within"
                raise TimeoutError(f"{what} {within_s:.0f} s")
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), left)

    def mark(self) -> int:
        return len(self.frames)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(ConnectionClosed, OSError):
            await self.conn.close()
