"""Everything a tool step started, found and stopped: no process outlives its step.

A shell command runs in its own process group, and under bubblewrap in its own PID namespace
(the kernel kills every process in it when the command ends). A command run without the
sandbox can still leave its group — `setsid sleep 1000 &`, a double fork, `nohup` — so each
step also marks its processes: their environment carries `XCLAW_STEP_TAG=<random>`, inherited
by everything they start, and at the step's end (or cancel, or timeout) every process still
carrying the tag is stopped too. What escapes that — a process that empties its own
environment (`env -i`, `exec -c`) after leaving the group, without the sandbox — is named in
docs/security.md.

`stop_session_processes(session_id)` stops every step process of a session now: SIGTERM, a
grace period, SIGKILL. The run's cancel path calls it (directly, or through the cancellation
of the tool call, which does the same).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from dataclasses import dataclass, field

TAG_VAR = "XCLAW_STEP_TAG"
# How long SIGKILLed processes get to disappear (a process in uninterruptible sleep may lag).
KILL_SETTLE_S = 2.0


@dataclass(eq=False)
class StepProcesses:
    """The processes of one tool call: its process group and everything carrying its tag."""

    session_id: str
    tag: str = field(default_factory=lambda: secrets.token_hex(12))
    pgid: int | None = None

    @property
    def env(self) -> dict[str, str]:
        """Added to the command's environment: how its processes are found later."""
        return {TAG_VAR: self.tag}

    def live(self) -> list[int]:
        found = set(live_members(self.pgid)) if self.pgid is not None else set()
        found.update(tagged_pids(self.tag))
        found.discard(os.getpid())
        return sorted(found)

    def signal(self, sig: int) -> None:
        if self.pgid is not None:
            signal_group(self.pgid, sig)
        for pid in tagged_pids(self.tag):
            if pid != os.getpid():
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    async def stop(self, grace_s: float) -> None:
        """SIGTERM everything, `grace_s` to go, then SIGKILL whatever is left; returns once
        nothing runs any more. The SIGKILL is in `finally`: even a second cancellation cannot
        leave a process alive."""
        try:
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while self.live() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        finally:
            self.signal(signal.SIGKILL)
        deadline = time.monotonic() + KILL_SETTLE_S
        while self.live() and time.monotonic() < deadline:
            self.signal(signal.SIGKILL)  # children forked between two scans
            await asyncio.sleep(0.01)


_RUNNING: dict[str, set[StepProcesses]] = {}


def register(step: StepProcesses) -> None:
    _RUNNING.setdefault(step.session_id, set()).add(step)


def unregister(step: StepProcesses) -> None:
    steps = _RUNNING.get(step.session_id)
    if steps is not None:
        steps.discard(step)
        if not steps:
            del _RUNNING[step.session_id]


async def stop_session_processes(session_id: str, grace_s: float = 2.0) -> int:
    """Stop every process started by the session's running tool steps (SIGTERM, `grace_s`,
    SIGKILL); returns how many steps had processes. Safe to call when nothing runs."""
    steps = list(_RUNNING.get(session_id, ()))
    await asyncio.gather(*(s.stop(grace_s) for s in steps))
    return len(steps)


def live_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that still run (zombies don't count: they hold nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []  # the common case: nothing of the group is left, not even a zombie
    except PermissionError:
        pass
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel whether anything of the group exists
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    live = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            live.append(int(entry))
    return live


def tagged_pids(tag: str) -> list[int]:
    """Running processes whose environment carries XCLAW_STEP_TAG=`tag`, wherever they went
    (another session, another process group, reparented to init)."""
    marker = f"{TAG_VAR}={tag}".encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            if marker not in environ.split(b"\0"):
                continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[:1]
        if state and state[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def stop_group(pgid: int, grace_s: float) -> None:
    """SIGTERM the group, `grace_s` to go, then SIGKILL whatever is left."""
    await StepProcesses(session_id="", tag="-", pgid=pgid).stop(grace_s)
