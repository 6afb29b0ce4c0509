"""The lifeline (xclaw/tools/lifeline.py): a shell command never outlives the xclaw that
started it, even when xclaw is SIGKILLed while the command's wrapper chain is still starting
— the window the earlier parent-death signal left open under bubblewrap.

Each case runs a real child Python process that builds the shell tool's real argv, spawns it
the way the tool does (own session, the lifeline's read end passed on) and SIGKILLs itself.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.runtime.test_crash import command_alive
from xclaw.sandbox.isolation import probe_bwrap
from xclaw.tools import lifeline

# The child: spawn the command exactly as ShellTool does, wait `delay` seconds, die by SIGKILL.
CHILD = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from pathlib import Path
    from xclaw.config.settings import Settings
    from xclaw.sandbox.isolation import isolation_from_settings
    from xclaw.tools import lifeline
    from xclaw.tools.shell import ShellTool

    home, ws, command, mode, delay = sys.argv[1:6]
    settings = Settings(home=Path(home), database=f"{home}/x.db", workspace_root=Path(ws).parent,
                        sandbox={"isolation": mode})
    tool = ShellTool(isolation=isolation_from_settings(settings.sandbox_setup()))
    argv = tool._argv(command, Path(ws))
    subprocess.Popen(argv, cwd=ws, start_new_session=True, stdin=subprocess.DEVNULL,
                     pass_fds=(lifeline.read_end(),))
    time.sleep(float(delay))
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _modes() -> list[str]:
    modes = ["none"]
    bwrap = shutil.which("bwrap")
    why = "bwrap is not installed" if bwrap is None else probe_bwrap(bwrap)
    if why is None:
        modes.append("bwrap")
    elif os.environ.get("XCLAW_TEST_REQUIRE_BWRAP"):
        pytest.fail(f"XCLAW_TEST_REQUIRE_BWRAP is set but {why}")
    return modes


def _kill_parent_during(tmp: Path, mode: str, delay: float) -> tuple[str, Path]:
    home, ws = tmp / "home", tmp / "home" / "workspaces" / "s"
    ws.mkdir(parents=True, exist_ok=True)
    marker = f"xclaw-lifeline-{secrets.token_hex(6)}"
    effect = ws / f"{marker}.txt"
    command = f"sleep 0.6; echo ran > {effect.name}  # {marker}"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(home), str(ws), command, mode, str(delay)],
        cwd=tmp,
        timeout=30,
    )
    assert child.returncode == -9
    return marker, effect


@pytest.mark.parametrize("mode", ["none", "bwrap"])
def test_a_command_dies_with_xclaw_whenever_the_kill_lands(tmp_path: Path, mode: str) -> None:
    if mode not in _modes():
        pytest.skip("bubblewrap cannot create namespaces here")
    # From "before the wrapper chain has even exec'd" to "the command is sleeping".
    delays = [0.0, 0.0, 0.001, 0.002, 0.004, 0.008, 0.015, 0.03, 0.06, 0.2]
    runs = [_kill_parent_during(tmp_path / str(i), mode, d) for i, d in enumerate(delays)]
    deadline = time.monotonic() + 2.0
    while any(command_alive(m) for m, _ in runs) and time.monotonic() < deadline:
        time.sleep(0.01)
    survivors = [d for (m, _), d in zip(runs, delays, strict=True) if command_alive(m)]
    assert survivors == [], f"commands still running after their xclaw died (delays {survivors})"
    time.sleep(0.8)  # longer than the command's own sleep: had one survived, it wrote by now
    ran = [d for (_, e), d in zip(runs, delays, strict=True) if e.exists()]
    assert ran == [], f"a killed xclaw's command ran to its end (delays {ran})"


def test_the_wrapper_passes_the_exit_status_on(tmp_path: Path) -> None:
    r = lifeline.read_end()
    for shell in ("/bin/sh", "bash"):
        for command, want in [("exit 3", 3), ("kill -TERM $$", -15), ("echo ok", 0)]:
            done = subprocess.run(
                [shell, "-c", lifeline.WRAPPER, shell, command, str(r)],
                pass_fds=(r,),
                start_new_session=True,
                capture_output=True,
                timeout=10,
            )
            assert done.returncode == want, (shell, command)


def test_a_fork_does_not_keep_the_lifeline_open() -> None:
    """A forked child holding the write end would hide xclaw's death from every watcher."""
    lifeline.read_end()
    pid = os.fork()
    if pid == 0:  # the child: the inherited ends are closed, a new pipe comes on demand
        os._exit(0 if lifeline._fds is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_command_gets_the_lifeline_under_uvloop(tmp_path: Path) -> None:
    """`xclaw serve` runs on uvloop, which runs the at-fork hooks in the child it execs: the
    hook must leave the read end to the command (it once closed it: "$2": Bad file descriptor)."""
    uvloop = pytest.importorskip("uvloop")
    from xclaw.tools.base import ToolContext
    from xclaw.tools.shell import ShellTool

    async def main() -> tuple[str, bool]:
        result = await ShellTool().run(
            {"command": "echo ok"}, ToolContext(workspace=tmp_path, session_id="s")
        )
        return result.content, result.is_error

    assert uvloop.run(main()) == ("ok", False)
