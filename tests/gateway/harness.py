"""Test harness: real `xclaw serve` processes on loopback and a small protocol client."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.protocol import State

from tests.ports import free_port

# How long a server may take to start: seconds on a quiet machine, far longer when the
# parallel suite and everything else share its two CPUs (the wait ends as soon as it is up).
BANNER_TIMEOUT_S = 90.0


def xclaw_cmd() -> list[str]:
    """`python -m xclaw`, or the command in XCLAW_TEST_CMD (e.g. an installed `xclaw`)."""
    override = os.environ.get("XCLAW_TEST_CMD")
    return shlex.split(override) if override else [sys.executable, "-m", "xclaw"]


def write_script(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"turns": turns}))
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any real provider key: no test can reach a real model."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_")) or k == "XCLAW_TEST_CMD"
    }
    env.update(extra)
    return env


@dataclass
class Server:
    """One `xclaw serve` process; restartable on the same port, home and database."""

    root: Path
    script: Path | None
    approval: str = "ask"
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    token: str = ""
    banner: str = ""
    starts: int = 0
    # More of xclaw.yaml (YAML text appended to what env() writes), e.g. `a2a:` agents.
    config_extra: str = ""

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def workspace(self, session_id: str) -> Path:
        return self.home / "workspaces" / session_id

    def env(self) -> dict[str, str]:
        config = self.root / "xclaw.yaml"
        config.write_text(
            f"approval:\n  mode: {self.approval}\nllm_retry_base_delay: 0.01\n{self.config_extra}"
        )
        extra = {"XCLAW_HOME": str(self.home), "XCLAW_CONFIG": str(config), "NO_COLOR": "1"}
        if self.script is not None:
            extra["XCLAW_MODEL"] = f"script:{self.script}"
        return clean_env(**extra)

    def start(self, *extra_args: str) -> Server:
        self.starts += 1
        out = self.root / f"stdout-{self.starts}.txt"
        err = self.root / f"stderr-{self.starts}.txt"
        self.root.mkdir(parents=True, exist_ok=True)
        with out.open("wb") as stdout, err.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [*xclaw_cmd(), "serve", "--port", str(self.port), *extra_args],
                cwd=self.root,
                env=self.env(),
                stdout=stdout,
                stderr=stderr,
            )
        deadline = time.monotonic() + BANNER_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                text = out.read_text(errors="replace")
                if "listening on" in text and "Ctrl+C stops" in text:
                    self.banner = text
                    self.token = text.split("?token=", 1)[1].split()[0]
                    return self
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        except BaseException:  # stopped meanwhile (pytest-timeout, Ctrl+C): leave no server
            self.kill()
            raise
        self.kill()
        raise AssertionError(f"server did not start:\n{out.read_text()}\n{err.read_text()}")

    def logs(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.root.glob("stderr-*.txt"))
        )

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code

    def restart(self) -> Server:
        self.kill()
        return self.start()


# Every client opened by a test, closed by the `close_clients` fixture even when it fails.
OPEN_CLIENTS: list[Client] = []


def left_open() -> list[Client]:
    """The clients a finished test left open on an event loop that is gone, taken off the list
    with their sockets closed. Nothing can close such a connection properly any more (its loop
    is closed), and left alone its socket is finalised by the garbage collector in whichever
    later test it runs in, failing that one with a ResourceWarning (tests/conftest.py fails
    the test that left them instead)."""
    gone: list[Client] = []
    for client in list(OPEN_CLIENTS):
        if client.loop is None or not client.loop.is_closed():
            continue
        OPEN_CLIENTS.remove(client)
        if client.conn.state is State.CLOSED:
            continue
        gone.append(client)
        # Closed by hand: the transport's own close needs its loop. Its finaliser warns about
        # a socket it still holds, and it holds none after this.
        transport = client.conn.transport
        raw = getattr(transport, "_sock", None)
        if raw is not None:
            raw.close()
            transport._sock = None  # type: ignore[attr-defined]
    return gone


async def close_open_clients() -> None:
    """Close the clients opened on this event loop; drop those of loops already gone.

    A test that ran its client under its own `asyncio.run` leaves it here with a closed loop;
    closing it from another loop raises "attached to a different loop" in a later test.
    """
    loop = asyncio.get_running_loop()
    while OPEN_CLIENTS:
        client = OPEN_CLIENTS.pop()
        if client.loop is loop:
            await client.conn.close()


class Client:
    """A protocol client: sends frames, collects every frame it receives."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self.seen: list[dict[str, Any]] = []
        self.session_id: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    async def open(
        cls,
        server: Server,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        url: str | None = None,
    ) -> Client:
        h = {"Authorization": f"Bearer {token or server.token}"}
        h.update(headers or {})
        conn = await connect(
            url or server.ws_url,
            additional_headers=h,
            max_size=None,
            max_queue=None,
            open_timeout=10,
        )
        client = cls(conn)
        client.loop = asyncio.get_running_loop()
        OPEN_CLIENTS.append(client)
        return client

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.conn.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 60.0) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.conn.recv(), timeout)
        frame = json.loads(raw)
        self.seen.append(frame)
        return frame

    async def until(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = 60.0
    ) -> dict[str, Any]:
        """Frames until one satisfies pred (all of them land in `seen`)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                seen = [
                    (f.get("type"), f.get("content") or f.get("status") or f.get("state"))
                    for f in self.seen[-30:]
                ]
                raise AssertionError(f"no matching frame within {timeout}s; saw {seen}")
            try:
                frame = await self.recv(left)
            except TimeoutError:
                frame = {}
            if pred(frame):
                return frame

    async def until_type(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        return await self.until(lambda f: f.get("type") == kind, timeout)

    async def attach(self, session_id: str | None = None) -> dict[str, Any]:
        """reconnect; returns the post-attach `status` frame (with `busy`)."""
        await self.send({"type": "reconnect", "sessionId": session_id})
        session = await self.until_type("session")
        self.session_id = session["sessionId"]
        return await self.until(lambda f: f.get("type") == "status" and "busy" in f)

    async def turn(
        self, text: str, *, approve: bool | None = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Send a message and wait for its reply (answering approvals if told how)."""
        await self.send({"type": "message", "sessionId": self.session_id, "content": text})
        while True:
            f = await self.until(
                lambda f: f.get("type") in ("reply", "error", "approval_request"), timeout
            )
            if f["type"] == "approval_request" and approve is not None:
                await self.send(
                    {
                        "type": "approval",
                        "sessionId": self.session_id,
                        "stepId": f["stepId"],
                        "approve": approve,
                    }
                )
                continue
            return f

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.seen if f.get("type") == kind]

    async def close(self) -> None:
        await self.conn.close()
