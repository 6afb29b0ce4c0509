"""[sandbox/container] A session's container: made from the session's image, started, adopted by the
worker that runs the session, and the `podman exec` the shell tool runs each command with.

One container per session, named `xclaw-<session id>` and labelled with the session, the
workspace root it belongs to (several xclaw installations may share one podman) and the
lease epoch it was made under. Its first process is a keeper that does nothing; the agent's
commands run beside it (`podman exec`) and what they leave running in the background stays,
across steps and turns, until the session is rolled back past it, taken over, reaped or
deleted. The workspace is mounted at /workspace through the session's stable mount point
(mounts.py), /tmp is a tmpfs (not captured), everything else is the image plus the
container's own overlay layer, which xclaw/workspace/env_layer.py captures and rewinds.

Every method blocks (podman, /proc): call them from a worker thread, except `exec_argv`.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xclaw.errors import WorkspaceError
from xclaw.sandbox.container import mounts, procs
from xclaw.sandbox.container.podman import Podman, last_line
from xclaw.sandbox.container.policy import SandboxPolicy

WORKDIR = "/workspace"
NAME_PREFIX = "xclaw-"
LABEL_SESSION = "xclaw.session"
LABEL_ROOT = "xclaw.root"
LABEL_EPOCH = "xclaw.epoch"
# The container's first process (after podman's init): waits, reaps nothing, stops on TERM.
_KEEPER = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
_START_TIMEOUT_S = 120.0
_STOP_GRACE_S = 2


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """What podman says of a session's container."""

    id: str
    status: str  # running, exited, created, ...
    pid: int  # its first process on the host (0 when not running)
    upper: str  # the overlay directory its changes are written to

    @property
    def running(self) -> bool:
        return self.status == "running" and self.pid > 0


@dataclass(frozen=True, slots=True)
class Adopted:
    """What `ensure` did: `how` is created, started (it was stopped) or adopted (it ran);
    `killed`: processes of older lease epochs stopped."""

    how: str
    info: ContainerInfo
    killed: int = 0


class Containers:
    """The containers of the sessions under one workspace root, with one policy."""

    def __init__(self, podman: Podman, policy: SandboxPolicy, root: Path) -> None:
        if policy.kind != "container" or not policy.image:
            raise ValueError("a container policy with an image is needed")
        self.podman = podman
        self.policy = policy
        self.root = Path(root).expanduser().resolve()
        self._root_tag = hashlib.sha256(str(self.root).encode()).hexdigest()[:8]
        self._lock = threading.Lock()
        # Per session, in this process: the lease epoch of the run that drives it here and
        # the step running now (set before each side-effecting step's snapshot).
        self._epochs: dict[str, int] = {}
        self._owners: dict[str, str] = {}
        self._steps: dict[str, int] = {}
        # Sessions whose container this process saw running (ready() then only checks the
        # workspace's mount); and the OOM kills counted when each was last looked at.
        self._running: set[str] = set()
        self._info: dict[str, ContainerInfo] = {}
        # One creation or start of a session's container at a time in this process (two
        # commands of a run, a rewind, a fence may each find it missing at once).
        self._making: dict[str, threading.Lock] = {}
        self._ooms: dict[str, int] = {}
        # The crash tests' hook (xclaw/workspace/crash_points.py): a no-op in production.
        self.crash_point: Callable[[str], None] = _no_crash_point
        # Set by the workspaces (xclaw/workspace/timetravel.py): the session's captured changes
        # to put into a container made anew.
        self.layer_for: Callable[[str], Callable[[ContainerInfo], None] | None] = lambda _sid: None

    @property
    def quiet_dir(self) -> str:
        """Where podman (and the conmon it starts, which drops an `oom` file into its working
        directory when the OOM killer strikes) runs: the private directory of the mount
        points, never a workspace or xclaw's own working directory."""
        d = self.root / mounts.MOUNTS_DIR
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return str(d)

    def _podman(
        self, *args: str, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.podman.run(*args, timeout=timeout, check=check, cwd=self.quiet_dir)

    def discard(self, name: str) -> None:
        """Remove a container by name (one a crash left half-made)."""
        self._podman("rm", "-f", "-t", "0", name, check=False)

    # --- names ------------------------------------------------------------------------------
    def name(self, session_id: str) -> str:
        """`xclaw-<root>-<session>`: `<root>` a short hash of the workspace root, so that two
        installations (or two workers with their own roots, as on two hosts) sharing one
        podman never take each other's containers."""
        return f"{NAME_PREFIX}{self._root_tag}-{session_id}"

    def note_epoch(self, session_id: str, epoch: int, owner: str | None = None) -> None:
        with self._lock:
            self._epochs[session_id] = epoch
            if owner is not None:
                self._owners[session_id] = owner

    def note_step(self, session_id: str, seq: int) -> None:
        with self._lock:
            self._steps[session_id] = seq

    def epoch(self, session_id: str) -> int:
        return self._epochs.get(session_id, 0)

    # --- what podman knows --------------------------------------------------------------------
    def inspect(self, session_id: str) -> ContainerInfo | None:
        return self._inspect(self.name(session_id))

    def _inspect(self, name: str) -> ContainerInfo | None:
        done = self._podman("container", "inspect", name, check=False)
        if done.returncode != 0:
            if "no such container" in done.stderr.lower():
                return None
            raise WorkspaceError(f"podman container inspect failed: {last_line(done.stderr)}")
        try:
            data = json.loads(done.stdout)[0]
            graph = data.get("GraphDriver", {}).get("Data", {})
            return ContainerInfo(
                str(data["Id"]),
                str(data["State"]["Status"]),
                int(data["State"].get("Pid", 0) or 0),
                str(graph.get("UpperDir", "")),
            )
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise WorkspaceError(f"podman container inspect said something unexpected: {e}") from e

    def listed(self) -> list[tuple[str, str, str]]:
        """(session id, status, name) of every container of this workspace root (a name
        other than the session's: a creation a crash interrupted)."""
        done = self._podman(
            "ps",
            "-a",
            "--filter",
            f"label={LABEL_ROOT}={self.root}",
            "--format",
            "json",
        )
        out = []
        for c in json.loads(done.stdout or "[]"):
            labels = c.get("Labels") or {}
            sid = labels.get(LABEL_SESSION)
            names = c.get("Names") or [""]
            if sid:
                out.append((str(sid), str(c.get("State", "")), str(names[0])))
        return out

    # --- lifecycle ----------------------------------------------------------------------------
    def ensure(
        self,
        session_id: str,
        workspace: Path,
        epoch: int | None,
        layer: Callable[[ContainerInfo], None] | None = None,
        owner: str | None = None,
    ) -> Adopted:
        """The session's container, running, with its workspace shown, driven under `epoch`:
        made from the image (then `layer` writes the session's captured changes into its
        overlay layer before its first process starts), started if it was stopped, or
        adopted as it runs. Processes another worker started under an older epoch are killed
        before this returns: a worker that took the session over (`owner`, its lease's) is
        alone in it, while what its own earlier turns started lives on (`epoch` None: nothing
        is killed)."""
        if epoch is not None:
            self.note_epoch(session_id, epoch, owner)
        owner = self._owners.get(session_id) if owner is None else owner
        with self._lock:
            making = self._making.setdefault(session_id, threading.Lock())
        with making:
            info = self.inspect(session_id)
            how = "adopted"
            if info is None:
                info = self._create(session_id, self.epoch(session_id), layer)
                how = "created"
            if not info.running:
                self._start(session_id, workspace)
                self.crash_point("container.started")
                info = self.inspect(session_id)
                if info is None or not info.running:
                    raise WorkspaceError(f"the container of session {session_id} did not start")
                how = "started" if how == "adopted" else how
        mounts.follow(self.root, session_id, workspace)
        older = [
            p.pid
            for p in procs.processes_in(info.pid)
            if p.epoch is not None and epoch is not None and p.epoch < epoch and p.owner != owner
        ]
        procs.kill(older)
        with self._lock:
            self._running.add(session_id)
            self._info[session_id] = info
            self._ooms[session_id] = _oom_kills(info.pid)
        return Adopted(how, info, len(older))

    def running_info(self, session_id: str) -> ContainerInfo | None:
        """The container as this process last made sure it runs; None: not since (then its
        layer is what the record last captured)."""
        with self._lock:
            return self._info.get(session_id) if session_id in self._running else None

    def rewind(
        self, session_id: str, workspace: Path, write: Callable[[ContainerInfo], None]
    ) -> None:
        """Stop the container, let `write` rewrite its overlay layer (unmounted now), start it
        again: its file system rewound, every process in it stopped."""
        info = self.inspect(session_id)
        if info is None:
            return
        self.stop(session_id)
        info = self.inspect(session_id)
        if info is None or info.running:
            raise WorkspaceError(f"the container of session {session_id} did not stop")
        write(info)
        self._start(session_id, workspace)
        self.ensure(session_id, workspace, None)

    def ready(self, session_id: str, workspace: Path) -> None:
        """Before a command: the container runs and shows the workspace as it is now (two
        stats when this process saw it running; else `ensure`, under the epoch noted)."""
        info = self.running_info(session_id)
        if info is not None and _alive(info.pid):
            mounts.follow(self.root, session_id, workspace)
            return
        with self._lock:  # stopped behind this process's back (xclaw gc, podman stop)
            self._running.discard(session_id)
        self.ensure(session_id, workspace, self.epoch(session_id), self.layer_for(session_id))

    def limit_reached(self, session_id: str, code: int | None, output: str) -> str | None:
        """Which of the container's limits a failed command met, in words; None: none seen."""
        if "Resource temporarily unavailable" in output and "fork" in output:
            return (
                f"the container's process limit was reached (sandbox.pids = {self.policy.pids}); "
                "stop some background processes or raise the limit"
            )
        if code in (-9, 137):
            info = self.inspect(session_id)
            if info is None or not info.running:
                with self._lock:
                    self._running.discard(session_id)
                return (
                    "the session's container stopped (its memory limit, sandbox.memory_mb = "
                    f"{self.policy.memory_mb} MB, may have been reached); it is started again "
                    "for the next command, without the processes it ran"
                )
            kills = _oom_kills(info.pid)
            with self._lock:
                before = self._ooms.get(session_id, kills)
                self._ooms[session_id] = kills
            if kills > before:
                return (
                    "killed: the container's memory limit was reached (sandbox.memory_mb = "
                    f"{self.policy.memory_mb} MB)"
                )
        return None

    def _create(
        self,
        session_id: str,
        epoch: int,
        layer: Callable[[ContainerInfo], None] | None,
    ) -> ContainerInfo:
        """Made under a name of its own, its layer written, then renamed to the session's:
        a crash half-way leaves no container under the session's name with a missing layer
        (what it leaves is removed by the next creation, or by the reaper)."""
        p = self.policy
        final = self.name(session_id)
        for sid, _state, name in self.listed():
            if sid == session_id and name != final:  # an earlier creation a crash cut short
                self._podman("rm", "-f", "-t", "0", name, check=False)
        point = mounts.prepare(self.root, session_id)
        making = f"{final}-new-{secrets.token_hex(4)}"
        args = [
            "create",
            "--name",
            making,
            "--label",
            f"{LABEL_SESSION}={session_id}",
            "--label",
            f"{LABEL_ROOT}={self.root}",
            "--label",
            f"{LABEL_EPOCH}={epoch}",
            "--network",
            "bridge" if p.network else "none",
            "--memory",
            f"{p.memory_mb}m",
            "--memory-swap",
            f"{p.memory_mb}m",
            "--cpus",
            f"{p.cpus:g}",
            "--pids-limit",
            str(p.pids),
            *self.podman.ulimits,
            "--init",
            "--tmpfs",
            "/tmp:rw,mode=1777",
            "-v",
            f"{point}:{WORKDIR}:rslave",
            "-w",
            WORKDIR,
            "--hostname",
            "xclaw",
            str(p.image),
            "sh",
            "-c",
            _KEEPER,
        ]
        done = self._podman(*args, timeout=_START_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise WorkspaceError(
                f"could not create the container of session {session_id} from image "
                f"{p.image}: {last_line(done.stderr)}"
            )
        info = self._inspect(making)
        if info is None:
            raise WorkspaceError(f"the container of session {session_id} vanished once made")
        self.crash_point("container.created")
        if layer is not None:
            layer(info)  # made, not started: its overlay is not mounted
            self.crash_point("container.layer-written")
        renamed = self._podman("rename", making, final, check=False)
        if renamed.returncode != 0:
            # Another creator on this root (another worker) named its own first, or removed
            # ours as a crash's leftover: the session has its container, ours goes. (Removed
            # and not yet replaced: no container has the name, and this fails as before.)
            theirs = self.inspect(session_id)
            self.discard(making)
            if theirs is None:
                raise WorkspaceError(
                    f"could not name the container of session {session_id}: "
                    f"{last_line(renamed.stderr)}"
                )
            return theirs
        done_info = self.inspect(session_id)
        if done_info is None:
            raise WorkspaceError(f"the container of session {session_id} vanished once renamed")
        return done_info

    def _start(self, session_id: str, workspace: Path) -> None:
        # The container binds the bare point: the workspace is bound onto it afterwards, and
        # that binding (and every later one) propagates into the container (mounts.py).
        mounts.release_binding(self.root, session_id)
        done = self._podman("start", self.name(session_id), timeout=_START_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise WorkspaceError(
                f"could not start the container of session {session_id}: {last_line(done.stderr)}"
            )

    def stop(self, session_id: str) -> None:
        with self._lock:
            self._running.discard(session_id)
        self._podman("stop", "-t", str(_STOP_GRACE_S), self.name(session_id), check=False)

    def remove(self, session_id: str) -> None:
        """The container and its changes go, and the session's mount point."""
        with self._lock:
            self._running.discard(session_id)
        self._podman("rm", "-f", "-t", "0", self.name(session_id), check=False)
        mounts.release(self.root, session_id)
        with self._lock:
            self._epochs.pop(session_id, None)
            self._steps.pop(session_id, None)

    # --- processes ----------------------------------------------------------------------------
    def processes(
        self, session_id: str, info: ContainerInfo | None = None
    ) -> list[procs.ContainerProcess]:
        """What runs in the session's container that xclaw's commands started (`info`: what
        podman just said of it, else asked now)."""
        info = info or self.inspect(session_id)
        if info is None or not info.running:
            return []
        return [p for p in procs.processes_in(info.pid) if p.epoch is not None]

    def stop_steps(self, session_id: str, seqs: set[int]) -> int:
        """Kill the processes started by the steps `seqs`."""
        found = [p.pid for p in self.processes(session_id) if p.seq in seqs]
        procs.kill(found)
        return len(found)

    def stop_from(self, session_id: str, seq: int) -> int:
        """Kill the processes started by step `seq` or later (a rollback to `seq`)."""
        found = [p.pid for p in self.processes(session_id) if p.seq is not None and p.seq >= seq]
        procs.kill(found)
        return len(found)

    # --- the shell tool's command -------------------------------------------------------------
    def exec_argv(
        self, session_id: str, argv: list[str], env: dict[str, str], lifeline_fd: int
    ) -> list[str]:
        """`argv` run in the session's container by `podman exec`, in /workspace, with `env`
        and the run's epoch and step; the lifeline's read end becomes fd 3 inside (the
        wrapper's `$2`), so the command still dies with xclaw."""
        marks = {
            **env,
            procs.EPOCH_VAR: str(self._epochs.get(session_id, 0)),
            procs.OWNER_VAR: self._owners.get(session_id, ""),
            procs.SEQ_VAR: str(self._steps.get(session_id, 0)),
        }
        flags: list[str] = []
        for k, v in marks.items():
            flags += ["-e", f"{k}={v}"]
        exec_ = self.podman.argv(
            "exec", "--preserve-fds", "1", "-w", WORKDIR, *flags, self.name(session_id)
        )
        # bash: dash takes no two-digit fd in a redirection.
        dup = f'exec 3<&{int(lifeline_fd)}; exec "$@"'
        return ["bash", "-c", dup, "bash", *exec_, *argv]

    def follow(self, session_id: str, workspace: Path) -> bool:
        return mounts.follow(self.root, session_id, workspace)


def _oom_kills(pid: int) -> int:
    """The OOM kills counted in the memory cgroup of process `pid` (v1 `oom_kill` of
    memory.oom_control, v2 `oom_kill` of memory.events); 0 when unknown."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidates.append(f"/sys/fs/cgroup/memory{path}/memory.oom_control")
        elif controllers == "":
            candidates.append(f"/sys/fs/cgroup{path}/memory.events")
    for candidate in candidates:
        try:
            with open(candidate) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def _no_crash_point(point: str) -> None:
    """Production: every moment passes straight through."""


def _alive(pid: int) -> bool:
    """The container's first process still runs (it stops with the container)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[:1] not in ([b"Z"], [b"X"])
