"""[workspace] The environment follows memory too: a session container's own file-system changes,
captured with each snapshot and written back on a rollback, a fork or a takeover
(docs/containers.md).

What a container changed outside its workspace — installed packages, files under /etc, /opt,
/usr/local, the home directory — is exactly its overlay *upper directory*: files written or
copied up, directories made (`opaque` when one replaced an image directory whole), and
*whiteouts* (character devices 0/0) where an image file was deleted. The capture walks that
directory like a workspace (xclaw/workspace/walk.py: never leaving it) with a stat cache per
container, so an unchanged layer costs a stat walk and nothing is read; contents go to the
same content-addressed blobs (the database or the object store) as the workspace's.

Its entries ride in the step's workspace manifest under one reserved top-level name,
`.xclaw-container/` (a path the workspace side neither captures nor restores), so they share
everything a snapshot already has: deltas between steps, rollback and fork in the record's
transaction, blob garbage collection, the upload that moves a session between machines.

Written back only into the upper directory of a container that is not running (its overlay
unmounted): the layer is made exactly the target, then the container starts on it.

Not captured: /tmp (a tmpfs), /proc, /sys, /dev, /run, the workspace's mount point and the
files podman writes itself (/etc/hosts, /etc/hostname, /etc/resolv.conf); extended
attributes other than the overlay's opaque mark; hard links (captured as copies).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from xclaw.errors import WorkspaceError
from xclaw.store.base import SnapshotStore
from xclaw.store.snapshots.model import Manifest, PendingRestore
from xclaw.workspace.walk import IgnoreRules, walk

ENV_PREFIX = ".xclaw-container"
_PREFIX_SLASH = ENV_PREFIX + "/"
# Never captured, never written: podman's own files and mounts, and the tmpfs.
EXCLUDED = (
    "/proc/",
    "/sys/",
    "/dev/",
    "/run/",
    "/tmp/",
    "/workspace/",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/mtab",
)
_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")
_BATCH_BYTES = 32 * 1024 * 1024
WHITEOUT_REASON = "whiteout: deleted from the image"

Fetch = Callable[[list[str]], dict[str, bytes]]


def is_env(path: str) -> bool:
    return path == ENV_PREFIX or path.startswith(_PREFIX_SLASH)


def env_part(manifest: Mapping[str, Any] | None) -> Manifest:
    """The container layer of a snapshot manifest, its paths relative to the container's root."""
    if not manifest:
        return {}
    n = len(_PREFIX_SLASH)
    return {p[n:]: dict(e) for p, e in manifest.items() if p.startswith(_PREFIX_SLASH)}


def workspace_part(manifest: Manifest) -> Manifest:
    """A snapshot manifest without its container layer: what the workspace restores."""
    if not any(is_env(p) for p in manifest):
        return manifest
    return {p: e for p, e in manifest.items() if not is_env(p)}


def without_env(pending: PendingRestore) -> PendingRestore:
    if pending.manifest is None:
        return pending
    return replace(pending, manifest=workspace_part(pending.manifest))


def prefixed(entries: Mapping[str, Any]) -> Manifest:
    return {f"{_PREFIX_SLASH}{p}": dict(e) for p, e in entries.items()}


_Key = tuple[int, int, int, int, int, int]


class EnvLayer:
    """Captures containers' upper directories into a store and writes them back; one per
    process (it owns the stat caches, one per upper directory)."""

    def __init__(self, max_file_bytes: int, max_total_bytes: int) -> None:
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.rules = IgnoreRules(EXCLUDED)
        self._caches: dict[str, dict[str, tuple[_Key, str]]] = {}
        self._guard = threading.Lock()
        self.last_read = 0  # files read by the latest capture (tests, the benchmark)

    def forget(self, upper: str) -> None:
        with self._guard:
            self._caches.pop(upper, None)

    # --- capture ------------------------------------------------------------------------------
    def capture(self, store: SnapshotStore | None, upper: str) -> tuple[Manifest, int]:
        """The layer as it is now ({path: entry}, relative to the container's root) and the
        bytes of new contents stored (with `store`; without, nothing is stored)."""
        with self._guard:
            cache = self._caches.setdefault(upper, {})
        seen: dict[str, tuple[_Key, str]] = {}
        out: Manifest = {}
        pending: dict[str, bytes] = {}
        pending_size = new_bytes = total = read = 0
        for found in walk(Path(upper), self.rules):
            if found.ignored:
                continue
            st, rel = found.st, found.rel
            mode = stat.S_IMODE(st.st_mode)
            owner = _owner(st)
            if stat.S_ISDIR(st.st_mode):
                entry: dict[str, Any] = {"dir": True, "mode": mode, **owner}
                if _opaque(found.dir_fd, found.name):
                    entry["opaque"] = True
                out[rel] = entry
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    out[rel] = {"link": os.readlink(found.name, dir_fd=found.dir_fd), **owner}
                except OSError as e:
                    out[rel] = {"skipped": f"unreadable link: {e.strerror}", "size": 0}
                continue
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out[rel] = {"skipped": WHITEOUT_REASON, "size": 0, "whiteout": True}
                continue
            if not stat.S_ISREG(st.st_mode):
                out[rel] = {"skipped": "not a regular file (fifo, socket or device)", "size": 0}
                continue
            if st.st_size > self.max_file_bytes or total + st.st_size > self.max_total_bytes:
                out[rel] = {
                    "skipped": "over the snapshot limits (sandbox.max_*_mb)",
                    "size": st.st_size,
                }
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode)
            hit = cache.get(rel)
            if hit is not None and hit[0] == key:
                digest = hit[1]
            else:
                try:
                    digest, data = _read(found.name, found.dir_fd)
                except OSError as e:
                    out[rel] = {"skipped": f"unreadable: {e.strerror or e}", "size": st.st_size}
                    continue
                read += 1
                if store is not None:
                    pending[digest] = data
                    pending_size += len(data)
                    if pending_size >= _BATCH_BYTES:
                        new_bytes += _flush(store, pending)
                        pending_size = 0
            seen[rel] = (key, digest)
            total += st.st_size
            out[rel] = {"hash": digest, "size": st.st_size, "mode": mode, **owner}
        if store is not None:
            new_bytes += _flush(store, pending)
        with self._guard:
            cache.clear()
            cache.update(seen)
        self.last_read = read
        return out, new_bytes

    # --- write back ---------------------------------------------------------------------------
    def write(
        self,
        upper: str,
        target: Mapping[str, Any],
        fetch: Fetch,
        crash_point: Callable[[str], None] | None = None,
    ) -> int:
        """Make the upper directory `upper` (its container stopped) hold exactly `target`;
        returns the entries written. Contents come from `fetch` in bounded batches. Done
        again from the start by whoever finds the layer unlike the record (a crash half-way
        leaves a container whose layer the next run rewrites)."""
        current, _ = self.capture(None, upper)
        self.forget(upper)
        base = os.path.realpath(upper)
        removed: set[str] = set()
        for rel in sorted(current, reverse=True):  # children before their parents
            have, want = current[rel], target.get(rel)
            if want is not None and _unversioned(want):
                continue  # over the limits when captured: left as it is
            if want is not None and _same_kind(have, want) and ("dir" in have or have == want):
                continue
            _remove(os.path.join(base, rel))
            removed.add(rel)
        todo = [
            rel
            for rel in sorted(target)
            if not _unversioned(target[rel])
            and (rel in removed or rel not in current or current[rel] != target[rel])
        ]
        files = [rel for rel in todo if "hash" in target[rel]]
        if crash_point is not None:
            crash_point("env.half-written")
        for rel in todo:
            e = target[rel]
            path = _inside(base, rel)
            if "dir" in e:
                if not os.path.isdir(path) or os.path.islink(path):
                    os.mkdir(path, 0o700)
                _own(path, e)
                os.chmod(path, int(e["mode"]))
                for name in _OPAQUE[:1]:
                    if e.get("opaque"):
                        os.setxattr(path, name, b"y", follow_symlinks=False)
                    else:
                        with contextlib.suppress(OSError):
                            os.removexattr(path, name, follow_symlinks=False)
            elif "link" in e:
                os.symlink(str(e["link"]), path)
                _own(path, e)
            elif e.get("whiteout"):
                os.mknod(path, stat.S_IFCHR | 0o000, os.makedev(0, 0))
        for batch in _batches(files, target):
            blobs = fetch(sorted({str(target[rel]["hash"]) for rel in batch}))
            for rel in batch:
                e = target[rel]
                path = _inside(base, rel)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                try:
                    os.write(fd, blobs[str(e["hash"])])
                    _own(path, e, fd)
                    os.fchmod(fd, int(e["mode"]))
                finally:
                    os.close(fd)
        return len(todo)


def _owner(st: os.stat_result) -> dict[str, int]:
    """uid and gid when not root's (most of a package install is root's: kept short)."""
    out = {}
    if st.st_uid:
        out["uid"] = st.st_uid
    if st.st_gid:
        out["gid"] = st.st_gid
    return out


def _own(path: str, e: Mapping[str, Any], fd: int | None = None) -> None:
    uid, gid = int(e.get("uid", 0)), int(e.get("gid", 0))
    if fd is not None:
        os.fchown(fd, uid, gid)
    else:
        os.lchown(path, uid, gid)


def _opaque(dir_fd: int, name: str) -> bool:
    path = f"/proc/self/fd/{dir_fd}/{name}"
    for attr in _OPAQUE:
        try:
            if os.getxattr(path, attr, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _read(name: str, dir_fd: int) -> tuple[str, bytes]:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        return hashlib.sha256(data).hexdigest(), data
    finally:
        os.close(fd)


def _flush(store: SnapshotStore, pending: dict[str, bytes]) -> int:
    if not pending:
        return 0
    missing = store.missing_blobs(pending)
    added = store.put_blobs({h: pending[h] for h in missing}) if missing else 0
    pending.clear()
    return added


def _unversioned(e: Mapping[str, Any]) -> bool:
    return "skipped" in e and not e.get("whiteout")


def _same_kind(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def kind(e: Mapping[str, Any]) -> str:
        return next((k for k in ("dir", "hash", "link", "whiteout") if k in e), "skipped")

    return kind(a) == kind(b)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _inside(base: str, rel: str) -> str:
    """`rel` under `base`, its parent checked to be a real directory inside it (a manifest
    naming a path through a link is refused, never followed)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise WorkspaceError(f"bad path in a container layer: {rel!r}")
    parent = os.path.join(base, *parts[:-1]) if len(parts) > 1 else base
    real = os.path.realpath(parent)
    if real != parent or not os.path.isdir(real):
        raise WorkspaceError(f"container layer path {rel!r} does not lie in a real directory")
    return os.path.join(parent, parts[-1])


def _batches(files: list[str], target: Mapping[str, Any]) -> Iterable[list[str]]:
    batch: list[str] = []
    size = 0
    for rel in files:
        batch.append(rel)
        size += int(target[rel]["size"])
        if size >= _BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
