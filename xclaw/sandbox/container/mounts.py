"""[sandbox/container] The workspace inside a session's container follows a restore.

A rollback, a fork or a sync replaces `<root>/<session>/` by renaming another directory into
its place (xclaw/workspace/restore.py). A container's bind mount holds the directory it was
given, not its name: after the swap it would keep showing the old, deleted one. So the
container mounts a *stable* point instead, `<root>/.containers/<session>/`, made a shared
mount of its own when the container is created (the container's mount of it is its slave),
and the workspace is bound onto that point afterwards; replacing that binding (unmount, bind
the new directory) propagates into the running container. `follow` checks with two stats
whether the point shows the workspace directory as it is now, and rebinds when not: before
every command and after every restore. Root only (mount(2)), like the rest of the container
support here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path

from xclaw.errors import WorkspaceError

MS_BIND = 4096
MS_SHARED = 1 << 20
MNT_DETACH = 2
MOUNTS_DIR = ".containers"


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(source: str, target: str, flags: int) -> None:
    rc = _libc().mount(source.encode(), target.encode(), None, flags, None)
    if rc != 0:
        err = ctypes.get_errno()
        raise WorkspaceError(f"could not mount {source} on {target}: {os.strerror(err)}")


def _umount(target: str) -> bool:
    return bool(_libc().umount2(target.encode(), MNT_DETACH) == 0)


def mount_point(root: Path, session_id: str) -> Path:
    return Path(root) / MOUNTS_DIR / session_id


def _mounts_at(target: str) -> int:
    """How many mounts are stacked on `target` (from /proc/self/mountinfo)."""
    n = 0
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" ")
            if len(fields) > 4 and fields[4].encode().decode("unicode_escape") == target:
                n += 1
    return n


def prepare(root: Path, session_id: str) -> Path:
    """The session's stable point, a shared mount of itself (what the container binds, before
    it starts): made once, kept across xclaw's restarts."""
    point = mount_point(root, session_id)
    point.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = str(point)
    if _mounts_at(target) == 0:
        _mount(target, target, MS_BIND)
        _mount("none", target, MS_SHARED)
    return point


def follow(root: Path, session_id: str, workspace: Path) -> bool:
    """Make the session's point show `workspace` as it is now (bound on top of the base);
    True when it had to be bound again. The workspace directory must exist."""
    point = mount_point(root, session_id)
    target = str(point)
    try:
        shown, real = os.stat(target), os.stat(workspace)
    except FileNotFoundError:
        prepare(root, session_id)
        shown, real = os.stat(target), os.stat(workspace)
    if (shown.st_dev, shown.st_ino) == (real.st_dev, real.st_ino):
        return False
    if _mounts_at(target) == 0:
        prepare(root, session_id)
    while _mounts_at(target) > 1 and _umount(target):
        pass
    _mount(str(workspace), target, MS_BIND)
    return True


def release_binding(root: Path, session_id: str) -> None:
    """Leave only the bare shared point (before the container starts: it binds the point as
    it is then, and sees what is bound onto it later)."""
    target = str(prepare(root, session_id))
    while _mounts_at(target) > 1 and _umount(target):
        pass


def release(root: Path, session_id: str) -> None:
    """Unmount everything at the session's point and remove it (the session's container is
    gone)."""
    point = mount_point(root, session_id)
    target = str(point)
    try:
        while _mounts_at(target) and _umount(target):
            pass
        point.rmdir()
    except OSError:
        pass
