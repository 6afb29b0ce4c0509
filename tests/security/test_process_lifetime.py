"""No process outlives its step: detached with setsid, double-forked or nohup'd, a command's
processes are gone when the step ends, times out or is cancelled — with and without the
sandbox."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.waiting import until
from xclaw.config.settings import Settings
from xclaw.sandbox.isolation import confinement_available, isolation_from_settings
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool
from xclaw.tools.step_processes import stop_session_processes


def running_with(arg: str) -> list[int]:
    """Live processes whose command line holds `arg` (found from outside any namespace)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if arg.encode() in cmd and stat[stat.rfind(")") + 2] not in "ZX":
            out.append(int(entry))
    return out


def _unique() -> str:
    return f"{1000 + (time.monotonic_ns() % 10**6) / 10**6:.6f}"


@pytest.fixture(params=["plain", "bwrap"])
def tool(request, tmp_path: Path) -> ShellTool:  # type: ignore[no-untyped-def]
    if request.param == "plain":
        return ShellTool(kill_grace_s=0.5, isolation=None)
    if not confinement_available():
        if os.environ.get("XCLAW_TEST_REQUIRE_BWRAP"):
            raise AssertionError("bubblewrap is required here but does not work")
        pytest.skip("bubblewrap cannot create namespaces here")
    settings = Settings(
        home=tmp_path / "home",
        database=str(tmp_path / "home" / "x.db"),
        workspace_root=tmp_path / "ws",
    )
    (tmp_path / "home").mkdir()
    return ShellTool(kill_grace_s=0.5, isolation=isolation_from_settings(settings.sandbox_setup()))


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    return ToolContext(workspace=ws, session_id="s1")


@pytest.mark.parametrize(
    "spell",
    [
        "setsid sleep {n} > /dev/null 2>&1 &",
        "(setsid sh -c 'sleep {n} > /dev/null 2>&1 &' &)",
        "nohup setsid sleep {n} > /dev/null 2>&1 &",
        "setsid -f sleep {n} > /dev/null 2>&1",
    ],
)
async def test_detached_processes_are_gone_when_the_step_ends(
    tool: ShellTool, ctx: ToolContext, spell: str
) -> None:
    n = _unique()
    result = await tool.run({"command": spell.format(n=n) + "; echo started"}, ctx)
    assert "started" in result.content
    assert running_with(n) == [], f"{spell} outlived its step"


async def test_detached_processes_are_gone_when_the_step_is_cancelled(
    tool: ShellTool, ctx: ToolContext
) -> None:
    n = _unique()
    task = asyncio.create_task(
        tool.run({"command": f"setsid sleep {n} > /dev/null 2>&1 & sleep 60"}, ctx)
    )
    await until(lambda: running_with(n), "the command runs")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running_with(n) == []


async def test_stop_session_processes_stops_a_running_step(
    tool: ShellTool, ctx: ToolContext
) -> None:
    n = _unique()
    task = asyncio.create_task(
        tool.run({"command": f"setsid sleep {n} > /dev/null 2>&1 & sleep {n}1"}, ctx)
    )
    await until(
        lambda: len(running_with(n)) == 1 and len(running_with(n + "1")) == 1, "both commands run"
    )
    assert await stop_session_processes("s1", grace_s=0.5) == 1
    result = await asyncio.wait_for(task, 30)
    assert result.is_error  # killed by a signal
    assert running_with(n) == [] and running_with(n + "1") == []
    assert await stop_session_processes("s1") == 0  # nothing left to stop


async def test_a_process_that_also_empties_its_environment_is_gone(
    tool: ShellTool, ctx: ToolContext
) -> None:
    """`setsid env -i sleep` leaves the group and the tag: only the step's cgroup scope (or
    bubblewrap's PID namespace) still holds it."""
    from xclaw.tools.step_processes import _cgroup_base

    if tool.isolation is None and _cgroup_base() is None:
        pytest.skip("no writable cgroup v2 here and no sandbox: the residual in docs/security.md")
    n = _unique()
    result = await tool.run(
        {"command": f"setsid env -i /bin/sleep {n} > /dev/null 2>&1 & echo started"}, ctx
    )
    assert "started" in result.content
    assert running_with(n) == []


async def test_step_scopes_are_removed(tool: ShellTool, ctx: ToolContext) -> None:
    from xclaw.tools.step_processes import _cgroup_base

    base = _cgroup_base()
    if base is None:
        pytest.skip("no writable cgroup v2 here")
    await tool.run({"command": "setsid sleep 5 > /dev/null 2>&1 & echo x"}, ctx)
    assert not list(base.glob(f"step-{os.getpid()}-*"))


def test_what_a_killed_xclaw_left_in_a_scope_is_stopped_at_the_next_start(tmp_path: Path) -> None:
    """xclaw SIGKILLed mid-step: a detached process that emptied its environment survives it,
    but sits in the step's cgroup scope; the next xclaw process stops it and removes the scope."""
    import signal
    import subprocess
    import sys

    from xclaw.tools.step_processes import _cgroup_base

    base = _cgroup_base()
    if base is None:
        pytest.skip("no writable cgroup v2 here: the residual in docs/security.md")
    n = _unique()
    ws = tmp_path / "w"
    ws.mkdir()
    code = (
        "import asyncio, pathlib\n"
        "from xclaw.tools.shell import ShellTool\n"
        "from xclaw.tools.base import ToolContext\n"
        f"ctx = ToolContext(workspace=pathlib.Path({str(ws)!r}), session_id='k')\n"
        "asyncio.run(ShellTool(isolation=None).run({'command': "
        f"'setsid env -i /bin/sleep {n} >/dev/null 2>&1 & sleep 60'}}, ctx))\n"
    )
    victim = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while not running_with(n):
            assert time.monotonic() < deadline, "the step never started"
            time.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        victim.wait(15)
        assert running_with(n), "it survived the kill (this is what the sweep is for)"
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from xclaw.tools.step_processes import sweep_stale_scopes; sweep_stale_scopes()",
            ],
            check=True,
            timeout=60,
        )
        deadline = time.monotonic() + 10
        while running_with(n):
            assert time.monotonic() < deadline, "the next start did not stop it"
            time.sleep(0.02)
        assert not list(base.glob(f"step-{victim.pid}-*"))
    finally:
        for pid in running_with(n):
            os.kill(pid, signal.SIGKILL)
