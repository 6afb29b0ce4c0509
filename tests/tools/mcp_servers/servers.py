"""Where the real third-party MCP servers the tests drive are: mcp-server-time and
mcp-server-git (PyPI, the `test` extra) and @modelcontextprotocol/server-everything (npm,
installed by .ci/run into .ci/node; required when XCLAW_TEST_REQUIRE_NPM_MCP=1)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcp-server-everything"


def python_server(name: str) -> str:
    """The console script installed beside this interpreter (the venv's bin)."""
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def everything() -> str:
    if EVERYTHING.exists() and shutil.which("node"):
        return str(EVERYTHING)
    if os.environ.get("XCLAW_TEST_REQUIRE_NPM_MCP") == "1":
        pytest.fail(f"server-everything is not installed at {EVERYTHING} (see .ci/run)")
    pytest.skip(
        "npm MCP server not installed: npm install --prefix .ci/node @modelcontextprotocol/server-everything"
    )


def children_running(pattern: str, parent: int | None = None) -> list[int]:
    """Pids of live processes whose command line contains `pattern` (optionally: children
    of `parent`), read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] in ("Z", "X") or pattern not in cmd:
            continue
        if parent is not None and int(fields[1]) != parent:
            continue
        out.append(int(entry))
    return out


def wait_for_pids(pattern: str, parent: int | None = None, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = children_running(pattern, parent)
        if pids:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"no process matching {pattern!r} within {timeout} s")


class HttpEverything:
    """server-everything in streamable HTTP mode on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [everything(), "streamableHttp"],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"server-everything streamableHttp exited: {self.proc.stderr.read() if self.proc.stderr else ''}"
                )
            time.sleep(0.1)
        self.stop()
        raise AssertionError("server-everything streamableHttp did not listen within 30 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=15)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
