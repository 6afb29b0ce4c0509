"""A confined command (one run without asking) cannot reach a pathname Unix socket.

The network namespace and Landlock's TCP rules do not cover them: a socket is a file, and
connecting to one on a read-only mount works. Found by the second campaign: a confined
command connected to `/run/postgresql/.s.PGSQL.5432` (PostgreSQL, often `trust` for local
users). The listener here sits in the workspace itself, which the sandbox binds read-only."""

from __future__ import annotations

import platform
import socket
import threading
from pathlib import Path

import pytest

from tests.security.test_approval_bypass import _isolation
from xclaw.sandbox import socket_filter
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool

CONNECT = (
    'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
    "s.connect('{path}'); print('CONNECTED')\""
)


class _UnixListener:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.hits = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.skipif(socket_filter.program() is None, reason="no filter for this architecture")
@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
async def test_a_confined_command_cannot_connect_to_a_unix_socket(
    tmp_path: Path, kind: str
) -> None:
    iso = _isolation(kind, tmp_path)
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    listener = _UnixListener(ws / "db.sock")
    tool = ShellTool(default_timeout_s=30, isolation=iso)
    try:
        confined = await tool.run(
            {"command": CONNECT.format(path=ws / "db.sock")},
            ToolContext(workspace=ws, session_id="s1", confined=True),
        )
        assert "CONNECTED" not in confined.content, confined.content
        assert "Permission denied" in confined.content, confined.content
        assert listener.hits == 0
        # reading and ordinary commands still work under the filter
        ok = await tool.run(
            {"command": "ls -l / | head -3; whoami"},
            ToolContext(workspace=ws, session_id="s1", confined=True),
        )
        assert not ok.is_error, ok.content
        # a command a human approved is not filtered (the filter is for the unasked)
        approved = await tool.run(
            {"command": CONNECT.format(path=ws / "db.sock")},
            ToolContext(workspace=ws, session_id="s1"),
        )
        assert "CONNECTED" in approved.content, approved.content
    finally:
        listener.close()
    assert platform.machine()


@pytest.mark.skipif(socket_filter.program() is None, reason="no filter for this architecture")
@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
async def test_a_confined_command_sends_no_udp(tmp_path: Path, kind: str) -> None:
    """Landlock has rules for TCP only: a confined command could send UDP (a DNS query to
    anywhere carries data out). The filter refuses every socket, whatever its family."""
    iso = _isolation(kind, tmp_path)
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    port = udp.getsockname()[1]
    tool = ShellTool(default_timeout_s=30, isolation=iso)
    send = (
        'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); '
        f"s.sendto(b'leak', ('127.0.0.1', {port})); print('SENT')\""
    )
    try:
        r = await tool.run(
            {"command": send}, ToolContext(workspace=ws, session_id="s1", confined=True)
        )
        assert "SENT" not in r.content, r.content
        with pytest.raises(TimeoutError):
            udp.recvfrom(16)
        # approved, the same command sends (the check above can fail)
        ok = await tool.run({"command": send}, ToolContext(workspace=ws, session_id="s1"))
        if kind == "landlock":  # bubblewrap's own network namespace has no route here
            assert "SENT" in ok.content, ok.content
            assert udp.recvfrom(16)[0] == b"leak"
    finally:
        udp.close()
