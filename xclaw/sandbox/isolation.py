"""[sandbox] OS isolation of the shell tool: bubblewrap where the machine allows it, else a plain
process.

With bubblewrap (`bwrap`), a command sees the whole file system read-only, except its own
session's workspace (writable) and a private /tmp; xclaw's home (database, token), the other
workspaces, the database's directory and the `.env` file are hidden; the network is off unless
`sandbox.network: true`; it has its own PID, IPC and UTS namespaces, no capabilities, and dies
with xclaw. A command the approval policy let run without asking is *confined*: its workspace
is read-only too and the network is always off (see Isolation.wrap). Without bubblewrap such
commands are confined with Landlock where the kernel has it (xclaw/sandbox/landlock.py);
with neither, no shell command runs without asking (xclaw/tools/approval.py).

`sandbox.isolation` in xclaw.yaml: `auto` (default: bubblewrap if it works here, else plain,
saying why), `bwrap` (required: refuse to start without it), `none`. Whether bwrap works is
probed once per process with a real sandboxed `true`: inside many containers it is installed
but cannot create namespaces.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xclaw.errors import ConfigError
from xclaw.sandbox import landlock, socket_filter
from xclaw.sandbox.setup import SANDBOX_SETUP_DEFAULTS, SandboxSetup

if TYPE_CHECKING:
    from xclaw.sandbox.container.lifecycle import Containers

# Where the owner's credentials usually live, beneath $HOME: hidden from a confined command
# (one run without asking), which has no business reading them. An approved command still
# sees them (`git push` over ssh needs ~/.ssh).
CREDENTIAL_PATHS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".password-store",
    ".local/share/keyrings",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".vault-token",
)
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Isolation:
    """How shell commands are confined; `kind` is "bwrap" or "none", `why` says why."""

    kind: str
    why: str
    network: bool = False
    bwrap: str | None = None
    hide_dirs: tuple[str, ...] = ()
    hide_files: tuple[str, ...] = ()
    # Without bubblewrap: whether Landlock can still confine commands run without asking
    # (xclaw/sandbox/landlock.py). Approved commands then run as plain processes.
    landlock: bool = False
    # `container`: each session's commands run in its own podman container (docs/containers.md).
    container: Containers | None = None

    @property
    def active(self) -> bool:
        return self.kind == "bwrap"

    @property
    def can_confine(self) -> bool:
        """Whether a command run without asking can be confined here (else it is asked)."""
        return self.active or self.landlock

    def wrap(self, argv: list[str], workspace: Path, *, confined: bool = False) -> list[str]:
        """`argv` run inside the sandbox, with `workspace` the working dir, writable — or,
        `confined` (a command run without asking), read-only like everything else, with the
        network off whatever `sandbox.network` says: only its private /tmp is writable.

        Every capability is dropped: bwrap run by root otherwise keeps them, and with
        CAP_SYS_ADMIN a command can remount a read-only bind writable or unmount the tmpfs
        that hides xclaw's home."""
        if not self.active or self.bwrap is None:
            return argv
        ws = str(Path(workspace).resolve())
        out = [self.bwrap, "--unshare-all"]
        if self.network and not confined:
            out.append("--share-net")
        out += ["--die-with-parent", "--cap-drop", "ALL"]
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        if confined:
            # No Unix sockets either: the network namespace does not cover them.
            argv = socket_filter.confine_argv(argv)
            if argv and argv[0] == sys.executable:
                # Before the hides below, which then still apply inside what is shown again.
                out += _launcher_binds(ws)
        for d in self.hide_dirs:
            if not _within(d, ws):
                out += ["--tmpfs", d]
        for f in self.hide_files:
            if not _within(f, ws):
                out += ["--ro-bind", "/dev/null", f]
        if confined:
            out += _credential_hides(ws)
        out += ["--ro-bind" if confined else "--bind", ws, ws, "--chdir", ws, "--"]
        return out + argv

    def exit_status(self, code: int | None) -> int | None:
        """bwrap (and podman exec) report a command killed by signal N as exit status 128+N;
        give it back as -N, as a plain subprocess reports it (an `exit 130` reads the same:
        as with the plain wrapper, the shell cannot tell the two apart)."""
        if (
            (self.active or self.container is not None)
            and code is not None
            and 128 < code < 128 + 65
        ):
            return -(code - 128)
        return code

    def describe(self) -> str:
        if self.container is not None:
            return (
                f"a container per session ({self.container.policy.words()}; "
                f"{self.container.podman.describe()}); no command is confined per command "
                "there, so every shell command is asked unless the approval mode is yolo"
            )
        if self.active:
            net = "network allowed" if self.network else "network off"
            return (
                f"bubblewrap (only the workspace is writable, {net}; commands run without "
                "asking are confined: read-only, no network)"
            )
        if self.landlock:
            return (
                f"plain subprocess ({self.why}); commands run without asking are confined with "
                "Landlock (writes only to a scratch directory, no sockets)"
            )
        return (
            f"plain subprocess ({self.why}); no sandbox, so every shell command is asked "
            "and processes a command detaches may outlive its step (docs/security.md)"
        )


def _launcher_binds(ws: str) -> list[str]:
    """The socket filter's launcher starts from the interpreter's files: where the private
    /tmp hid them (xclaw installed in a venv, or checked out, under /tmp), they are shown
    again, read-only — else every confined command failed to start."""
    out: list[str] = []
    for p in socket_filter.launcher_paths():
        if _within(p, "/tmp") and p != "/tmp" and not _within(p, ws) and os.path.isdir(p):
            out += ["--ro-bind", p, p]
    return out


def _credential_hides(ws: str) -> list[str]:
    """bwrap arguments hiding the owner's credential files and directories (CREDENTIAL_PATHS
    beneath $HOME) that exist, except inside the workspace."""
    home = os.environ.get("HOME") or str(Path.home())
    out: list[str] = []
    for rel in CREDENTIAL_PATHS:
        p = os.path.join(home, rel)
        if _within(p, ws) or _within(ws, p):
            continue
        if os.path.isdir(p) and not os.path.islink(p):
            out += ["--tmpfs", p]
        elif os.path.lexists(p):
            real = os.path.realpath(p)
            if os.path.isdir(real):
                out += ["--tmpfs", real]
            elif os.path.exists(real):
                out += ["--ro-bind", "/dev/null", real]
    return out


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@functools.lru_cache(maxsize=4)
def probe_bwrap(bwrap: str) -> str | None:
    """None when a sandboxed `true` runs; else why not (bwrap's own words)."""
    try:
        done = subprocess.run(
            [
                bwrap,
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/tmp",
                "--",
                "true",
            ],
            check=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if done.returncode == 0:
        return None
    text = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else f"exit status {done.returncode}"


def isolation_from_settings(setup: SandboxSetup | None) -> Isolation:
    """Decide the isolation for this process from the sandbox's setup (`sandbox:` of
    xclaw.yaml, checked when it was read: `Settings.sandbox_setup()`; None: the defaults)."""
    setup = setup or SANDBOX_SETUP_DEFAULTS
    sandbox = setup.sandbox
    mode, network = sandbox.isolation, sandbox.network
    if mode == "none":
        return Isolation("none", "sandbox.isolation is none", network)
    if mode == "container":
        from xclaw.sandbox.container.shared import containers_for

        return Isolation(
            "container",
            "sandbox.isolation is container",
            network,
            container=containers_for(setup),
        )
    bwrap = shutil.which("bwrap")
    why = "bubblewrap (bwrap) is not installed" if bwrap is None else None
    if bwrap is not None:
        failure = probe_bwrap(bwrap)
        if failure is not None:
            why = f"bubblewrap cannot create namespaces here: {failure}"
    if why is not None:
        if mode == "bwrap":
            raise ConfigError(f"sandbox.isolation is bwrap, but {why}")
        return Isolation("none", why, network, landlock=landlock.available())
    hide_dirs, hide_files = _hidden(setup)
    return Isolation("bwrap", "available", network, bwrap, hide_dirs, hide_files)


def _hidden(setup: SandboxSetup) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a sandboxed command must not read: xclaw's home (token, database), every
    workspace (its own is bound back), the database's directory, and `.env`."""
    dirs: list[str] = []
    for p in (setup.home, setup.workspace_root):
        if p is not None and p.expanduser().is_dir():
            dirs.append(str(p.expanduser().resolve()))
    db = setup.database
    if db and "://" not in db:
        parent = Path(db).expanduser().resolve().parent
        if parent.is_dir() and parent != Path("/"):
            dirs.append(str(parent))
    files = []
    env_file = Path(".env").resolve()
    if env_file.is_file():
        files.append(str(env_file))
    # Never the root itself; outer directories first (the workspace is bound back last).
    dirs = sorted({d for d in dirs if d != "/"}, key=lambda d: (d.count("/"), d))
    return tuple(dirs), tuple(files)


def sandbox_mode(setup: SandboxSetup | None = None) -> str:
    """One line for the start-up banner: how shell commands are isolated, and why."""
    try:
        return isolation_from_settings(setup).describe()
    except ConfigError as e:
        return f"error: {e.message}"


def confinement_available() -> bool:
    """Whether commands can be run confined here: bubblewrap installed and working, or
    Landlock with network rules."""
    bwrap = shutil.which("bwrap")
    if bwrap is not None and probe_bwrap(bwrap) is None:
        return True
    return landlock.available()
