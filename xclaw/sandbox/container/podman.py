"""[sandbox/container] podman, found and checked once per process, and run.

Debian's podman with runc, as root. What this checks, each with the fix in its words:
- podman is installed (`apt-get install podman runc`);
- the OCI runtime works on this machine's cgroups: crun (podman's default elsewhere) refuses
  hybrid cgroup v1 hierarchies such as this machine kind's, runc works; so runc is used
  whenever it is installed (`--runtime runc`), and crun alone is refused on cgroup v1;
- podman runs as root: capturing the container's file system reads its overlay upper
  directory and the workspace's mount follows a restore (mounts.py), both root's.
Default ulimits of containers.conf exceed the hard limits of some machines (runc then fails
with "error setting rlimit"): every container gets explicit ones, this process's own.
"""

from __future__ import annotations

import functools
import json
import resource
import shutil
import subprocess
from dataclasses import dataclass

from xclaw.errors import ConfigError, WorkspaceError

_PROBE_TIMEOUT_S = 30.0
# The highest open-files and processes limits a container is given (its pids limit is the
# real bound on processes: sandbox.pids). Higher nproc values were refused by runc here
# (conmon runs below the caller's hard limit).
_ULIMIT_CAP = 32768


@dataclass(frozen=True)
class Podman:
    """How to call podman here: its path, the global options (the OCI runtime), the ulimits
    every container gets."""

    path: str
    runtime: str
    cgroups: str  # "v1" or "v2", as podman reports it
    ulimits: tuple[str, ...] = ()

    def argv(self, *args: str) -> list[str]:
        return [self.path, "--runtime", self.runtime, *args]

    def run(
        self, *args: str, timeout: float = 60.0, check: bool = True, cwd: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """podman ARGS, its output as text; a failure raises WorkspaceError with podman's own
        last line (`check`), or is returned. `cwd`: where conmon, which podman starts and
        which inherits it, writes its `oom` marker when the kernel's OOM killer strikes."""
        try:
            done = subprocess.run(
                self.argv(*args),
                cwd=cwd,
                check=False,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise WorkspaceError(f"podman {args[0]} took more than {timeout:g} s") from None
        except OSError as e:
            raise WorkspaceError(f"could not run podman: {e}") from None
        if check and done.returncode != 0:
            raise WorkspaceError(f"podman {args[0]} failed: {last_line(done.stderr)}")
        return done

    def describe(self) -> str:
        return f"podman with {self.runtime} (cgroups {self.cgroups})"


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def _ulimits() -> tuple[str, ...]:
    out = []
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        _, hard = resource.getrlimit(which)
        n = _ULIMIT_CAP if hard == resource.RLIM_INFINITY else min(hard, _ULIMIT_CAP)
        out += ["--ulimit", f"{name}={n}:{n}"]
    return tuple(out)


@functools.lru_cache(maxsize=1)
def find_podman() -> Podman:
    """podman as this machine can run it, or ConfigError saying what is missing and how to
    get it (checked once per process)."""
    path = shutil.which("podman")
    if path is None:
        raise ConfigError(
            "sandbox.isolation is container, but podman is not installed "
            "(on Debian: apt-get install podman runc)"
        )
    try:
        done = subprocess.run(
            [path, "info", "--format", "json"],
            check=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"sandbox.isolation is container, but podman info failed: {e}") from None
    if done.returncode != 0:
        raise ConfigError(
            f"sandbox.isolation is container, but podman info failed: {last_line(done.stderr)}"
        )
    try:
        host = json.loads(done.stdout)["host"]
        cgroups = str(host.get("cgroupVersion", "v2"))
        default_runtime = str(host.get("ociRuntime", {}).get("name", ""))
        rootless = bool(host.get("security", {}).get("rootless", False))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError("sandbox.isolation is container, but podman info said nothing") from None
    if rootless:
        raise ConfigError(
            "sandbox.isolation is container, but podman runs rootless here: xclaw's containers "
            "need podman run as root (the container's file system is captured from its overlay "
            "layer and the workspace's mount follows a rollback); run xclaw as root"
        )
    if shutil.which("runc") is not None:
        runtime = "runc"
    elif cgroups == "v1":
        raise ConfigError(
            f"sandbox.isolation is container, but podman's runtime here is "
            f"{default_runtime or 'crun'} and this machine has cgroup v1 (hybrid) hierarchies, "
            "which crun refuses; install runc (apt-get install runc): xclaw uses it when present"
        )
    else:
        runtime = default_runtime or "crun"
    return Podman(path, runtime, cgroups, _ulimits())
