"""OS isolation of the shell tool with bubblewrap, and the fallback to a plain process.

The bubblewrap tests need a `bwrap` that can create namespaces here; they are skipped
otherwise, unless XCLAW_TEST_REQUIRE_BWRAP is set (CI installs bubblewrap), then they fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from xclaw.config.settings import Settings, read_settings
from xclaw.errors import ConfigError
from xclaw.sandbox import isolation as sandbox
from xclaw.sandbox.isolation import Isolation, isolation_from_settings, sandbox_mode
from xclaw.sandbox.setup import SandboxSetup
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool

REPO = Path(__file__).resolve().parents[2]


def settings(tmp: Path, isolation: str = "auto", network: bool = False) -> SandboxSetup:
    return Settings(
        home=tmp / "home",
        database=str(tmp / "home" / "xclaw.db"),
        workspace_root=tmp / "home" / "workspaces",
        sandbox={"isolation": isolation, "network": network},
    ).sandbox_setup()


@pytest.fixture
def fake_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `bwrap` on PATH that fails the way it does in an unprivileged container."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    sandbox.probe_bwrap.cache_clear()
    yield fake
    sandbox.probe_bwrap.cache_clear()


def test_none_is_a_plain_process(tmp_path: Path) -> None:
    iso = isolation_from_settings(settings(tmp_path, isolation="none"))
    assert not iso.active and iso.wrap(["true"], tmp_path) == ["true"]
    # The banner says what follows: without a sandbox every shell command is asked.
    assert sandbox_mode(settings(tmp_path, isolation="none")).startswith(
        "plain subprocess (sandbox.isolation is none); no sandbox, so every shell command is asked"
    )


def test_auto_falls_back_and_says_why(tmp_path: Path, fake_bwrap: Path) -> None:
    s = settings(tmp_path)
    iso = isolation_from_settings(s)
    assert iso.kind == "none"
    assert iso.why == (
        "bubblewrap cannot create namespaces here: bwrap: No permissions to create new namespace"
    )
    assert sandbox_mode(s).startswith("plain subprocess (bubblewrap cannot create namespaces")


def test_bwrap_required_but_unusable_is_a_config_error(tmp_path: Path, fake_bwrap) -> None:
    with pytest.raises(ConfigError, match=r"sandbox\.isolation is bwrap, but bubblewrap cannot"):
        isolation_from_settings(settings(tmp_path, isolation="bwrap"))
    assert sandbox_mode(settings(tmp_path, isolation="bwrap")).startswith("error: ")


def test_missing_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert isolation_from_settings(settings(tmp_path)).why == "bubblewrap (bwrap) is not installed"
    with pytest.raises(ConfigError, match="not installed"):
        isolation_from_settings(settings(tmp_path, isolation="bwrap"))


def test_bad_mode(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"sandbox\.isolation 'docker': expected auto, bwrap, none"
    ):
        read_settings({"sandbox": {"isolation": "docker"}}, {})


def test_exit_status_of_a_signal_is_given_back() -> None:
    iso = Isolation("bwrap", "available", bwrap="/usr/bin/bwrap")
    assert iso.exit_status(137) == -9 and iso.exit_status(3) == 3 and iso.exit_status(None) is None
    assert Isolation("none", "x").exit_status(137) == 137


# --- real bubblewrap ------------------------------------------------------------------------


def _bwrap_usable() -> str | None:
    path = shutil.which("bwrap")
    if path is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    return sandbox.probe_bwrap(path)


@pytest.fixture
def real(tmp_path: Path) -> tuple[Isolation, ToolContext, SandboxSetup]:
    why = _bwrap_usable()
    if why is not None:
        if os.environ.get("XCLAW_TEST_REQUIRE_BWRAP"):
            pytest.fail(f"XCLAW_TEST_REQUIRE_BWRAP is set but {why}")
        pytest.skip(why)
    s = settings(tmp_path)
    ws = s.workspace_root / "sess"
    ws.mkdir(parents=True)
    (s.home / "token").write_text("secret-token")
    (s.workspace_root / "other").mkdir()
    (s.workspace_root / "other" / "theirs.txt").write_text("another session's file")
    iso = isolation_from_settings(s)
    assert iso.active
    assert sandbox_mode(s).startswith("bubblewrap (only the workspace is writable, network off;")
    return iso, ToolContext(workspace=ws, session_id="sess"), s


async def run(iso: Isolation, ctx: ToolContext, command: str, **kw: object):
    return await ShellTool(isolation=iso, **kw).run({"command": command}, ctx)  # type: ignore[arg-type]


async def test_only_the_workspace_is_writable(real, tmp_path: Path) -> None:
    iso, ctx, _ = real
    # Outside the workspace and outside /tmp (the checkout itself may live under /tmp, which
    # is a private tmpfs in the sandbox): the account's home directory, visible there but
    # read-only (not $HOME: the suite points that into /tmp, tests/conftest.py).
    outside = Path(pwd.getpwuid(os.getuid()).pw_dir) / f"sandbox-escape-{os.getpid()}.txt"
    in_tmp = tmp_path / "in-tmp.txt"  # /tmp is a private tmpfs inside the sandbox
    r = await run(
        iso, ctx, f"echo in > in.txt && cat in.txt; echo out > {outside}; echo t > {in_tmp}; pwd"
    )
    assert (ctx.workspace / "in.txt").read_text() == "in\n"
    assert not outside.exists() and not in_tmp.exists()
    assert "Read-only file system" in r.content
    assert r.content.splitlines()[-1] == str(ctx.workspace.resolve())


async def test_a_confined_command_starts_when_xclaw_lives_under_tmp(
    real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xclaw installed in a venv (or checked out) under /tmp: the socket filter's launcher
    must still start inside the private /tmp — its files are shown again, read-only (before,
    every confined command failed: `bwrap: execvp …/python: No such file or directory`)."""
    from xclaw.sandbox import socket_filter

    install = tmp_path / "venv-under-tmp"
    install.mkdir()
    (install / "marker").write_text("the launcher's files are here")
    real_paths = socket_filter.launcher_paths
    monkeypatch.setattr(socket_filter, "launcher_paths", lambda: [*real_paths(), str(install)])
    iso, ctx, s = real
    # xclaw's home inside what is shown again stays hidden (the hides come after).
    monkeypatch.setattr(
        socket_filter, "launcher_paths", lambda: [*real_paths(), str(install), str(s.home)]
    )
    confined = dataclasses.replace(ctx, confined=True)
    r = await run(
        iso,
        confined,
        f"cat {install / 'marker'}; echo w > {install / 'w'}; cat {s.home / 'token'}",
    )
    assert "the launcher's files are here" in r.content
    assert not (install / "w").exists()  # shown read-only
    assert "secret-token" not in r.content


async def test_home_token_and_other_workspaces_are_hidden(real) -> None:
    iso, ctx, s = real
    r = await run(iso, ctx, f"cat {s.home / 'token'}; ls {s.workspace_root}")
    assert "secret-token" not in r.content and "No such file" in r.content
    assert "other" not in r.content.split()


async def test_network_is_off_unless_allowed(real, tmp_path: Path) -> None:
    iso, ctx, _ = real
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
        assert "refused" in (await run(iso, ctx, probe)).content
        allowed = isolation_from_settings(settings(tmp_path, network=True))
        assert "connected" in (await run(allowed, ctx, probe)).content


async def test_exit_codes_and_signals_read_as_without_a_sandbox(real) -> None:
    iso, ctx, _ = real
    r = await run(iso, ctx, "echo partial; exit 3")
    assert r.content == "partial\n[exit code 3]" and r.data["exit_code"] == 3
    r = await run(iso, ctx, "kill -KILL $$")
    assert "[killed by signal SIGKILL]" in r.content


def _with_marker(marker: str) -> list[int]:
    """Processes running exactly `marker` (e.g. "sleep 42.5"), seen from outside."""
    wanted = marker.replace(" ", "\0").encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd == wanted:
                pids.append(int(entry))
    return pids


def _sleeps(n: int) -> list[str]:
    """`sleep` commands no other test, nor another test run on this machine, is running."""
    tag = random.randrange(10**6)
    return [f"sleep 4{i}.{tag:06d}1" for i in range(n)]


async def _eventually(check: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_timeouts_and_cancels_stop_everything_in_the_sandbox(real) -> None:
    iso, ctx, _ = real
    bg1, fg1, bg2, fg2 = _sleeps(4)
    r = await run(iso, ctx, f"{bg1} & {fg1}; echo never", default_timeout_s=0.5)
    assert r.data["timed_out"] and "never" not in r.content
    task = asyncio.create_task(run(iso, ctx, f"{bg2} & {fg2}"))
    await _eventually(lambda: bool(_with_marker(fg2)), "the sandboxed command never started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _eventually(
        lambda: _with_marker(bg1) == [] and _with_marker(bg2) == [],
        "a background process outlived its timed-out or cancelled command",
        timeout=5,
    )


def test_the_sandbox_dies_with_xclaw(real, tmp_path: Path) -> None:
    _, ctx, s = real
    bg, fg = _sleeps(2)
    child = tmp_path / "child.py"
    child.write_text(
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from xclaw.tools.base import ToolContext\n"
        "from xclaw.tools.shell import ShellTool\n"
        "from xclaw.sandbox.isolation import isolation_from_settings\n"
        "from xclaw.config.settings import Settings\n"
        f"s = Settings(home=Path({str(s.home)!r}), database='x.db', workspace_root=Path({str(s.workspace_root)!r})).sandbox_setup()\n"
        "ctx = ToolContext(workspace=Path(sys.argv[1]), session_id='sess')\n"
        "asyncio.run(ShellTool(isolation=isolation_from_settings(s)).run("
        f"{{'command': {bg + ' & ' + fg!r}}}, ctx))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(child), str(ctx.workspace)], env=env)
    try:
        deadline = time.monotonic() + 20
        while not _with_marker(fg):
            assert time.monotonic() < deadline, "the sandboxed command never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _with_marker(bg) or _with_marker(fg):
            assert time.monotonic() < deadline, "the sandbox outlived the xclaw process"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
