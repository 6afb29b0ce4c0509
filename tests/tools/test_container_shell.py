"""The shell tool in a session's container (`sandbox.isolation: container`, docs/containers.md):
real podman with runc, the test image made from this machine's files (tests/containers.py).

Each command runs in the session's own container by `podman exec`, in /workspace, with its
timeout and output cap; what it leaves running in the background lives on to the next
command; a limit it meets is a clear error, never a hang."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import containers_of, remove_containers, test_image
from xclaw.config.settings import Settings
from xclaw.sandbox.isolation import isolation_from_settings, sandbox_mode
from xclaw.sandbox.paths import workspace_dir
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool

pytestmark = pytest.mark.slow


def container_settings(tmp: Path, **sandbox: object) -> Settings:
    return Settings(
        home=tmp / "home",
        database=str(tmp / "home" / "xclaw.db"),
        workspace_root=tmp / "home" / "workspaces",
        sandbox={"isolation": "container", "image": test_image(), **sandbox},
    )


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    where = (tmp_path / "home" / "workspaces").resolve()
    yield where
    remove_containers(where)


def shell_for(s: Settings, **kw: object) -> ShellTool:
    return ShellTool(isolation=isolation_from_settings(s.sandbox_setup()), **kw)  # type: ignore[arg-type]


def ctx(s: Settings, sid: str = "sess1") -> ToolContext:
    return ToolContext(workspace=workspace_dir(s.workspace_root, sid), session_id=sid)


async def test_a_command_runs_in_the_sessions_container_in_its_workspace(
    tmp_path: Path, root: Path
) -> None:
    s = container_settings(tmp_path)
    assert sandbox_mode(s).startswith("a container per session (a container of image")
    shell, c = shell_for(s), ctx(s)
    (c.workspace / "from-host.txt").write_text("written on the host\n")
    r = await shell.run(
        {
            "command": "pwd; cat from-host.txt; hostname; test -e /usr/bin/python3 || echo no-py; "
            "echo made-inside > inside.txt"
        },
        c,
    )
    assert not r.is_error, r.content
    assert r.content.splitlines() == ["/workspace", "written on the host", "xclaw", "no-py"]
    assert (c.workspace / "inside.txt").read_text() == "made-inside\n"
    [made] = containers_of(root)
    assert made["Labels"]["xclaw.session"] == "sess1"  # type: ignore[index]
    assert made["State"] == "running"


async def test_a_background_process_answers_in_the_next_command(tmp_path: Path, root: Path) -> None:
    """A server started in one step (left in the background) answers in the next: before
    containers, the command's end stopped it."""
    s = container_settings(tmp_path)
    shell, c = shell_for(s), ctx(s)
    (c.workspace / "hello.txt").write_text("hello from the server\n")
    r = await shell.run({"command": "httpd -f -p 127.0.0.1:8080 -h /workspace & echo started"}, c)
    assert not r.is_error and "started" in r.content, r.content
    assert "stopped" not in r.content
    deadline = time.monotonic() + 30
    while True:
        r = await shell.run({"command": "wget -qO- http://127.0.0.1:8080/hello.txt"}, c)
        if not r.is_error or time.monotonic() > deadline:
            break
    assert r.content.strip() == "hello from the server", r.content
    container = shell.isolation.container  # type: ignore[union-attr]
    assert container is not None
    running = [p.command for p in container.processes("sess1")]
    assert any(cmd.startswith("httpd -f -p 127.0.0.1:8080") for cmd in running), running


async def test_a_timeout_kills_the_command_inside_the_container(tmp_path: Path, root: Path) -> None:
    s = container_settings(tmp_path)
    shell, c = shell_for(s), ctx(s)
    started = time.monotonic()
    r = await shell.run({"command": "sleep 4242", "timeout": 2}, c)
    assert r.is_error and "timed out after 2s" in r.content, r.content
    assert time.monotonic() - started < 30
    container = shell.isolation.container  # type: ignore[union-attr]
    assert container is not None
    deadline = time.monotonic() + 10
    while any("4242" in p.command for p in container.processes("sess1")):
        assert time.monotonic() < deadline, "the timed-out command still runs in the container"
        await asyncio.sleep(0.05)


async def test_the_pids_limit_is_a_clear_error(tmp_path: Path, root: Path) -> None:
    s = container_settings(tmp_path, pids=20)
    shell, c = shell_for(s), ctx(s)
    r = await shell.run(
        {"command": "for i in $(seq 40); do sleep 100 & done; wait", "timeout": 60}, c
    )
    assert r.is_error
    assert "the container's process limit was reached (sandbox.pids = 20)" in r.content, r.content


async def test_the_memory_limit_is_a_clear_error(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)  # xclaw's working directory
    s = container_settings(tmp_path, memory_mb=32)
    shell, c = shell_for(s), ctx(s)
    r = await shell.run(
        {"command": "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}", "timeout": 60},
        c,
    )
    assert r.is_error
    assert "memory limit" in r.content and "sandbox.memory_mb = 32 MB" in r.content, r.content
    # The session goes on: the next command runs.
    r = await shell.run({"command": "echo still-here"}, c)
    assert r.content == "still-here", r.content
    # conmon's OOM marker lands in neither xclaw's working directory nor the workspace.
    assert list(here.iterdir()) == []
    assert not (c.workspace / "oom").exists()


async def test_the_network_is_off_by_default(tmp_path: Path, root: Path) -> None:
    s = container_settings(tmp_path)
    shell, c = shell_for(s), ctx(s)
    r = await shell.run({"command": "ip -o link | cut -d: -f2 | tr -d ' '"}, c)
    assert r.content.split() == ["lo"], r.content


async def test_output_is_capped_as_on_the_host(tmp_path: Path, root: Path) -> None:
    s = container_settings(tmp_path)
    shell, c = shell_for(s, output_cap=1000), ctx(s)
    r = await shell.run({"command": "seq 100000"}, c)
    assert "bytes truncated" in r.content
    assert r.data["output_bytes"] > 500_000


async def test_a_container_stopped_behind_the_tools_back_is_started_again(
    tmp_path: Path, root: Path
) -> None:
    s = container_settings(tmp_path)
    shell, c = shell_for(s), ctx(s)
    r = await shell.run({"command": "echo kept > /opt/kept"}, c)
    assert not r.is_error, r.content
    container = shell.isolation.container  # type: ignore[union-attr]
    assert container is not None
    await asyncio.to_thread(
        container.podman.run, "stop", "-t", "0", container.name("sess1")
    )  # as `xclaw gc` in another process does
    r = await shell.run({"command": "cat /opt/kept"}, c)
    assert r.content == "kept", r.content
