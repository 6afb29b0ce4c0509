"""[tools] Everything a tool step started, found and stopped: no process outlives its step.

Three nets, each catching what the one before may miss:
1. a cgroup v2 scope per step, where xclaw may create one (a writable cgroup2 hierarchy, as
   for root or a delegated subtree): the command is moved into it before it starts, nothing
   it forks can leave it without privileges, and `cgroup.kill` ends all of it at once;
2. its own process group, and under bubblewrap its own PID namespace (the kernel kills every
   process in it when the command ends);
3. a tag: the environment of every process it starts carries `XCLAW_STEP_TAG=<random>`, so a
   process that left the group (`setsid sleep 1000 &`, a double fork, `nohup`) is still found.
At the step's end (or cancel, or timeout) whatever any net holds is stopped. What escapes all
three — without a cgroup scope and without the sandbox, a process that leaves the group and
empties its environment (`env -i`) — is named in docs/security.md.

`stop_session_processes(session_id)` stops every step process of a session now: SIGTERM, a
grace period, SIGKILL. The run's cancel path calls it (directly, or through the cancellation
of the tool call, which does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

TAG_VAR = "XCLAW_STEP_TAG"
# How long SIGKILLed processes get to disappear (a process in uninterruptible sleep may lag).
KILL_SETTLE_S = 2.0


# Moves the process into the cgroup (the path is $1), then becomes the real command: the move
# happens before anything is forked, so nothing escapes it. If the move fails, the command
# still runs (the other two nets hold it).
_ENTER_CGROUP = 'echo $$ > "$1" 2>/dev/null; shift; exec "$@"'


@dataclass(eq=False)
class CgroupScope:
    """A cgroup v2 directory holding one step's processes."""

    path: Path

    @classmethod
    def create(cls, tag: str) -> CgroupScope | None:
        """A new scope, or None where cgroup v2 is missing or not writable by us."""
        base = _cgroup_base()
        if base is None:
            return None
        path = base / f"step-{os.getpid()}-{tag}"
        try:
            path.mkdir()
        except OSError:
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        return ["/bin/sh", "-c", _ENTER_CGROUP, "sh", str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill(self) -> None:
        """SIGKILL every process in the scope, atomically where the kernel has cgroup.kill."""
        try:
            (self.path / "cgroup.kill").write_text("1")
            return
        except OSError:
            pass
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        # Still populated (a process in uninterruptible sleep): swept at next start.
        with contextlib.suppress(OSError):
            self.path.rmdir()


@functools.lru_cache(maxsize=1)
def _cgroup_base() -> Path | None:
    """`<cgroup2 mount><our cgroup>/xclaw`, created once per process; None when absent or not
    writable. Scopes of dead xclaw processes left there (killed with SIGKILL mid-step) are
    killed and removed."""
    mount = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    mount = left.split()[4]
                    break
        with open("/proc/self/cgroup") as f:
            own = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or own is None:
        return None
    base = Path(mount) / own.lstrip("/") / "xclaw"
    try:
        base.mkdir(exist_ok=True)
        probe = base / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError:
        return None
    for old in base.glob("step-*"):
        pid = old.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            # The xclaw process that ran this step died without stopping it (SIGKILL):
            # whatever the step left running is stopped now.
            CgroupScope(old).kill()
            deadline = time.monotonic() + KILL_SETTLE_S
            while CgroupScope(old).pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            CgroupScope(old).remove()
    return base


def sweep_stale_scopes() -> None:
    """Stop what steps of dead xclaw processes left in their scopes (done once per process,
    when the first scope is made or the shell tool is set up)."""
    _cgroup_base()


@dataclass(eq=False)
class StepProcesses:
    """The processes of one tool call: its cgroup scope (where there is one), its process
    group, and everything carrying its tag."""

    session_id: str
    tag: str = field(default_factory=lambda: secrets.token_hex(12))
    pgid: int | None = None
    cgroup: CgroupScope | None = None

    @classmethod
    def start(cls, session_id: str, *, scoped: bool = True) -> StepProcesses:
        """`scoped`: in a cgroup scope of its own. Not for a command run in the session's
        container: its processes live in the container's cgroup, and the scope would hold
        only podman's client and conmon, which outlive the step by a moment (an empty scope
        left behind for every command)."""
        step = cls(session_id)
        if scoped:
            step.cgroup = CgroupScope.create(step.tag)
        return step

    @property
    def env(self) -> dict[str, str]:
        """Added to the command's environment: how its processes are found later."""
        return {TAG_VAR: self.tag}

    def wrap(self, argv: list[str]) -> list[str]:
        """The command's argv, entering the step's cgroup scope first when there is one."""
        return self.cgroup.wrap(argv) if self.cgroup is not None else argv

    def live(self) -> list[int]:
        found = set(live_members(self.pgid)) if self.pgid is not None else set()
        found.update(tagged_pids(self.tag))
        if self.cgroup is not None:
            found.update(self.cgroup.pids())
        found.discard(os.getpid())
        return sorted(found)

    def signal(self, sig: int) -> None:
        if self.pgid is not None:
            signal_group(self.pgid, sig)
        pids = set(tagged_pids(self.tag))
        if self.cgroup is not None:
            if sig == signal.SIGKILL:
                self.cgroup.kill()
            pids.update(self.cgroup.pids())
        pids.discard(os.getpid())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def close(self) -> None:
        """Remove the cgroup scope (once nothing runs in it)."""
        if self.cgroup is not None:
            self.cgroup.remove()

    async def stop(self, grace_s: float) -> None:
        """SIGTERM everything, `grace_s` to go, then SIGKILL whatever is left; returns once
        nothing runs any more. The SIGKILL is in `finally`: even a second cancellation cannot
        leave a process alive."""
        try:
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            # Polled: no event tells when another process group's members are gone.
            while self.live() and time.monotonic() < deadline:  # noqa: ASYNC110
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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
