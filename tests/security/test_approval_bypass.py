"""The bypass corpus (tests/security/bypass_corpus.py): in `ask` and `auto-edits`, none of its
282 commands runs without a question. And the second layer: even run anyway, confined as an
unasked command would be, none of them can write the workspace or reach the network — so a
wrong "safe" costs nothing."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.security.bypass_corpus import CORPUS, HARMLESS_LOOKALIKES, ISSUE
from xclaw.config.settings import Settings
from xclaw.sandbox import landlock
from xclaw.sandbox.isolation import Isolation, confinement_available, isolation_from_settings
from xclaw.tools.approval import ApprovalPolicy
from xclaw.tools.base import ToolContext
from xclaw.tools.registry import default_tools
from xclaw.tools.shell import ShellTool

SHELL = default_tools()["shell"]


def test_the_corpus_is_large_and_holds_the_issue_cases() -> None:
    assert len(CORPUS) >= 100
    assert len(set(CORPUS)) == len(CORPUS)
    assert set(ISSUE) <= set(CORPUS)


@pytest.mark.parametrize("mode", ["ask", "auto-edits"])
def test_no_corpus_command_runs_unasked(mode: str) -> None:
    policy = ApprovalPolicy(mode, confinement=True)
    unasked = [c for c in CORPUS if policy.decide(SHELL, {"command": c}).kind == "allow"]
    assert unasked == []


def test_lookalikes_are_allowed_but_only_confined() -> None:
    policy = ApprovalPolicy("ask", confinement=True)
    for c in HARMLESS_LOOKALIKES:
        d = policy.decide(SHELL, {"command": c})
        assert d.kind == "allow" and d.confine, (c, d)


def test_a_long_command_is_asked_quickly() -> None:
    import time

    policy = ApprovalPolicy("ask", confinement=True)
    started = time.monotonic()
    d = policy.decide(SHELL, {"command": "echo " + "word " * 40_000})
    assert d.kind == "ask" and "too long" in d.reason
    assert time.monotonic() - started < 1.0


def test_without_a_sandbox_nothing_runs_unasked() -> None:
    policy = ApprovalPolicy("ask", confinement=False)
    for c in ("ls", "cat a.txt", "echo hi", *HARMLESS_LOOKALIKES):
        assert policy.decide(SHELL, {"command": c}).kind == "ask"


class _Listener:
    """A TCP listener on loopback that records whether anyone connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
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


def _isolation(kind: str, tmp_path: Path) -> Isolation:
    if kind == "landlock":
        if not landlock.available():
            pytest.skip(f"Landlock ABI {landlock.landlock_abi()} here (need {landlock.MIN_ABI})")
        return Isolation("none", "testing Landlock", landlock=True)
    if not confinement_available() and not os.environ.get("XCLAW_TEST_REQUIRE_BWRAP"):
        pytest.skip("bubblewrap cannot create namespaces here")
    settings = Settings(
        home=tmp_path / "home",
        database=str(tmp_path / "home" / "x.db"),
        workspace_root=tmp_path / "ws",
    )
    (tmp_path / "home").mkdir()
    iso = isolation_from_settings(settings.sandbox_setup())
    assert iso.active
    return iso


@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
async def test_every_corpus_command_run_confined_changes_nothing(tmp_path: Path, kind: str) -> None:
    iso = _isolation(kind, tmp_path)
    tool = ShellTool(default_timeout_s=3, kill_grace_s=0.2, isolation=iso)
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    (ws / "f").write_text("a\nb\n")
    before = sorted(p.name for p in ws.iterdir())
    listener = _Listener()
    outside = tmp_path / "outside"
    outside.mkdir()
    try:
        commands = [
            *CORPUS,
            *HARMLESS_LOOKALIKES,
            f"echo x >/dev/tcp/127.0.0.1/{listener.port}",
            f"bash -c 'echo x >/dev/tcp/127.0.0.1/{listener.port}'",
            f"touch {outside}/M",
            "mount -o remount,bind,rw . && touch M",
            "umount -l . && touch M",
        ]
        ctx = ToolContext(workspace=ws, session_id="s1", confined=True)
        # First, that the confined command holds no capability at all: the corpus sets the
        # clock (`date -s`), which must fail rather than change this machine.
        caps = await tool.run({"command": "grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status"}, ctx)
        assert caps.content.count("0000000000000000") == 3, caps.content
        wall_minus_mono = time.time() - time.monotonic()

        async def one(c: str) -> None:
            await tool.run({"command": c, "timeout": 3}, ctx)

        for i in range(0, len(commands), 4):  # a few at a time: a loaded 2-core machine
            await asyncio.gather(*(one(c) for c in commands[i : i + 4]))
    finally:
        listener.close()
    assert abs((time.time() - time.monotonic()) - wall_minus_mono) < 5, "the clock was set"
    assert sorted(p.name for p in ws.iterdir()) == before
    assert (ws / "f").read_text() == "a\nb\n"
    assert list(outside.iterdir()) == []
    assert listener.hits == 0


@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
async def test_confined_run_reads_the_workspace_and_writes_only_scratch(
    tmp_path: Path, kind: str
) -> None:
    tool = ShellTool(isolation=_isolation(kind, tmp_path))
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("hello\n")
    ctx = ToolContext(workspace=ws, session_id="s1", confined=True)
    r = await tool.run(
        {
            "command": 'cat notes.txt; echo x > "${TMPDIR:-/tmp}/scratch" && '
            'cat "${TMPDIR:-/tmp}/scratch"; touch new.txt'
        },
        ctx,
    )
    assert "hello" in r.content and "\nx\n" in r.content
    assert "Read-only file system" in r.content or "Permission denied" in r.content
    assert "[ran without approval, so confined" in r.content and r.data["confined"] is True
    assert not (ws / "new.txt").exists()
    # the same command approved by a human (not confined) may write
    r2 = await tool.run({"command": "touch new.txt"}, ToolContext(workspace=ws, session_id="s1"))
    assert not r2.is_error and (ws / "new.txt").exists()


async def test_a_confined_call_without_a_sandbox_is_refused(tmp_path: Path) -> None:
    tool = ShellTool(isolation=None)
    ctx = ToolContext(workspace=tmp_path, session_id="s", confined=True)
    r = await tool.run({"command": "touch M"}, ctx)
    assert r.is_error and "no sandbox" in r.content
    assert not (tmp_path / "M").exists()
    assert shutil.which("bash")
