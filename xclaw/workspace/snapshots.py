"""[workspace] Capturing a workspace before a side effect: cheap when little changed.

A snapshot is a manifest (xclaw.store.snapshots.model) plus the file contents the store does
not hold yet. Unchanged files are recognised WITHOUT reading them: per workspace, an in-memory
cache maps each path to the (size, mtime, ctime, inode, device, mode) it had when it was last
hashed; a file whose stat still matches keeps its hash. A file modified within the timestamp
granularity of the walk ("racy", as git calls it) is hashed but not cached, so a second write
in the same clock tick cannot hide. Files are read through their parent directory's descriptor
with O_NOFOLLOW (xclaw.workspace.walk): nothing outside the workspace is ever read.

Limits never make a snapshot fail: a file over `max_file_bytes`, files beyond
`max_total_bytes`, unreadable files and special files are recorded as skipped with the reason
(not versioned: a restore keeps whatever is there).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from stat import S_IMODE, S_ISDIR, S_ISLNK, S_ISREG
from typing import Any

from xclaw.errors import MissingBlobs, WorkspaceError
from xclaw.sandbox.settings import SANDBOX_DEFAULTS, SandboxSettings
from xclaw.store.base import SnapshotStore
from xclaw.store.leases import Lease
from xclaw.store.snapshots.model import Entry, Manifest, SnapshotInfo
from xclaw.workspace.crash_points import CrashPoint, no_crash_point
from xclaw.workspace.walk import IgnoreRules, walk, walk_dirs

log = logging.getLogger("xclaw.workspace")

MB = 1024 * 1024
# Contents read but not yet stored are flushed to the store at this size: bounded memory.
_BATCH_BYTES = 32 * MB
_READ_CHUNK = 1 * MB
# Kernel file timestamps come from a coarse clock (one tick, up to 10 ms, behind the fine
# clock): a file stamped within this margin of the walk's start could be written again with
# the same stamp, so it is not trusted from the cache next time.
_RACY_NS = 20_000_000
_MAX_CACHED_WORKSPACES = 64
_SAVE_ATTEMPTS = 3


@dataclass(frozen=True)
class SnapshotConfig:
    """`sandbox:` in xclaw.yaml: snapshots (on/off), ignore, max_file_mb, max_snapshot_mb;
    and the crash-test hook (xclaw.workspace.crash_points), which does nothing by default."""

    enabled: bool = SANDBOX_DEFAULTS.snapshots
    ignore: tuple[str, ...] = SANDBOX_DEFAULTS.ignore
    max_file_bytes: int = int(SANDBOX_DEFAULTS.max_file_mb * MB)
    max_total_bytes: int = int(SANDBOX_DEFAULTS.max_snapshot_mb * MB)
    crash_point: CrashPoint = field(default=no_crash_point, compare=False)

    @classmethod
    def from_settings(cls, sandbox: SandboxSettings) -> SnapshotConfig:
        """From `sandbox:` in the settings (checked when xclaw.yaml was read)."""
        return cls(
            enabled=sandbox.snapshots,
            ignore=sandbox.ignore,
            max_file_bytes=int(sandbox.max_file_mb * MB),
            max_total_bytes=int(sandbox.max_snapshot_mb * MB),
        )


@dataclass
class CaptureStats:
    """What the last capture cost: how many files had to be read, what was stored."""

    files: int = 0
    files_read: int = 0
    bytes_read: int = 0
    new_bytes: int = 0
    skipped: int = 0
    seconds: float = 0.0


@dataclass
class _Pending:
    """Contents read in this capture, waiting to be stored in one batch."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    size: int = 0


_Key = tuple[int, int, int, int, int, int]
# Entries captured beside the workspace: (entries, bytes stored) from (store, retrying).
Extra = Callable[[SnapshotStore, bool], tuple[Manifest, int]]

# A file's identity in the stat cache (in C: it runs once per file of the tree).
_key: Callable[[os.stat_result], _Key] = attrgetter(
    "st_size", "st_mtime_ns", "st_ctime_ns", "st_ino", "st_dev", "st_mode"
)


class Snapshotter:
    """Captures workspaces into a store; one per process (it owns the stat caches)."""

    def __init__(self, config: SnapshotConfig | None = None) -> None:
        self.config = config = config or SnapshotConfig()
        self.rules = IgnoreRules(config.ignore)
        # Per workspace: path -> (the stat it had when hashed, its manifest entry).
        self._caches: OrderedDict[str, dict[str, tuple[_Key, Entry]]] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.last = CaptureStats()  # of the latest capture, for logs, tests and the benchmark
        # A top-level name the workspace's own entries may not use (set when a session's
        # container layer is recorded under it in the same manifest).
        self.reserved: str | None = None

    def _lock(self, ws: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(ws, threading.Lock())

    def _cache(self, ws: str) -> dict[str, tuple[_Key, Entry]]:
        with self._guard:
            cache = self._caches.pop(ws, None) or {}
            self._caches[ws] = cache
            while len(self._caches) > _MAX_CACHED_WORKSPACES:
                self._caches.popitem(last=False)
            return cache

    def _keep(self, ws: str, cache: dict[str, tuple[_Key, Entry]]) -> None:
        """`cache` is the workspace's stat cache from now on."""
        with self._guard:
            self._caches.pop(ws, None)
            self._caches[ws] = cache

    def forget(self, workspace: Path) -> None:
        """Drop the stat cache of a workspace (its files were replaced wholesale)."""
        with self._guard:
            self._caches.pop(str(workspace), None)

    # --- the whole operation ------------------------------------------------------------------
    def snapshot(
        self,
        store: SnapshotStore,
        session_id: str,
        seq: int,
        workspace: Path,
        *,
        lease: Lease | None = None,
        replace: bool = False,
        extra: Extra | None = None,
    ) -> SnapshotInfo:
        """Capture `workspace` and save it as the snapshot before step `seq`. Blocking: call
        it from a worker thread. Contents are stored first, then the manifest (durable), in
        the transaction fenced by `lease` when given (store.save_snapshot). `extra` adds
        entries captured elsewhere (a session container's layer, env_layer.py): called with
        the store and whether an earlier attempt found contents missing."""
        ws = str(workspace)
        with self._lock(ws):
            started = time.perf_counter()
            for attempt in range(_SAVE_ATTEMPTS):
                manifest, stats = self._capture(store, workspace)
                if extra is not None:
                    entries, added = extra(store, attempt > 0)
                    manifest.update(entries)
                    stats.new_bytes += added
                self.config.crash_point("snapshot.stored")
                try:
                    info = store.save_snapshot(
                        session_id,
                        seq,
                        manifest,
                        new_bytes=stats.new_bytes,
                        lease=lease,
                        replace=replace,
                    )
                except MissingBlobs as e:
                    # Swept meanwhile (a rollback elsewhere), or a cached hash whose content
                    # never reached this store: read those files again and store them.
                    cache = self._cache(ws)
                    for path, (_, entry) in list(cache.items()):
                        if entry["hash"] in e.hashes:
                            del cache[path]
                    continue
                stats.seconds = time.perf_counter() - started
                self.last = stats
                log.debug(
                    "event=snapshot session=%s step=s%04d files=%d read=%d read_bytes=%d "
                    "new_bytes=%d skipped=%d ms=%.1f",
                    session_id,
                    seq,
                    stats.files,
                    stats.files_read,
                    stats.bytes_read,
                    stats.new_bytes,
                    stats.skipped,
                    stats.seconds * 1000,
                )
                return info
            raise WorkspaceError(
                f"could not snapshot the workspace of session {session_id} before s{seq:04d}: "
                "its file contents kept disappearing from the store"
            )

    def prime(
        self,
        workspace: Path,
        manifest: Manifest,
        written: dict[str, os.stat_result] | None = None,
    ) -> None:
        """Trust the files just written from `manifest` (a restore) without reading them:
        each regular file whose size matches its entry gets the entry's hash in the stat
        cache, so the next capture after a takeover reads only what changes after it.
        `written`: their stats as the restore left them (else the workspace is walked)."""
        ws = str(workspace)
        # Past the racy margin first: a later write then stamps a newer time (see _RACY_NS).
        time.sleep(_RACY_NS / 1e9)
        racy_after = time.time_ns() - _RACY_NS
        if written is None:
            written = {
                f.rel: f.st
                for f in walk(workspace, self.rules)
                if not f.ignored and S_ISREG(f.st.st_mode)
            }
        with self._lock(ws):
            cache = self._cache(ws)
            cache.clear()
            for rel, st in written.items():
                e = manifest.get(rel)
                if e is None or "hash" not in e or not S_ISREG(st.st_mode):
                    continue
                if st.st_size == e["size"] and max(st.st_mtime_ns, st.st_ctime_ns) < racy_after:
                    cache[rel] = (_key(st), e)

    def capture(self, workspace: Path) -> Manifest:
        """The manifest of a workspace as it is now, without storing anything (for diffs)."""
        ws = str(workspace)
        with self._lock(ws):
            manifest, _ = self._capture(None, workspace)
            return manifest

    # --- capture --------------------------------------------------------------------------------
    def _capture(
        self, store: SnapshotStore | None, workspace: Path
    ) -> tuple[Manifest, CaptureStats]:
        """The manifest of `workspace` now. The loop below runs once per file of the tree, so
        it does as little as it can for a file whose stat matches the cache: no read, no new
        entry (the cached one is shared, entries are never changed in place), no new key."""
        cfg = self.config
        ws = str(workspace)
        cache = self._cache(ws)
        cached = cache.get
        seen: dict[str, tuple[_Key, Entry]] = {}
        manifest: Manifest = {}
        stats = CaptureStats()
        pending = _Pending()
        racy_after = time.time_ns() - _RACY_NS
        total = files = skipped = 0
        max_file, max_total = cfg.max_file_bytes, cfg.max_total_bytes
        reserved = self.reserved
        for listing in walk_dirs(workspace, self.rules):
            pre = listing.prefix
            for name, st, ignored in listing.entries:
                if ignored:
                    continue
                rel = pre + name
                if reserved is not None and (rel == reserved or rel.startswith(reserved + "/")):
                    continue  # the name a container's layer is recorded under (env_layer.py)
                key = _key(st)
                mode = key[5]
                if S_ISREG(mode):
                    size = key[0]
                    hit = cached(rel)
                    if hit is not None and hit[0] == key and total + size <= max_total:
                        # Unchanged (so within the per-file limit, and not racy when it was
                        # cached: still not racy). The common case: nothing else to do.
                        seen[rel] = hit
                        manifest[rel] = hit[1]
                        total += size
                        files += 1
                        continue
                    if size > max_file:
                        manifest[rel] = _skipped(
                            f"larger than the {_mb(max_file)} per-file limit (sandbox.max_file_mb)",
                            size,
                        )
                        skipped += 1
                        continue
                    if total + size > max_total:
                        manifest[rel] = _skipped(
                            f"the snapshot reached its {_mb(max_total)} total limit "
                            "(sandbox.max_snapshot_mb)",
                            size,
                        )
                        skipped += 1
                        continue
                    try:
                        digest, data, key = _read(listing.dir_fd, name)
                    except OSError as e:
                        manifest[rel] = _skipped(f"unreadable: {e.strerror or e}", size)
                        skipped += 1
                        continue
                    stats.files_read += 1
                    stats.bytes_read += len(data)
                    if store is not None:
                        pending.blobs[digest] = data
                        pending.size += len(data)
                        if pending.size >= _BATCH_BYTES:
                            stats.new_bytes += _flush(store, pending)
                    entry: Entry = {"hash": digest, "size": key[0], "mode": S_IMODE(key[5])}
                    if max(key[1], key[2]) < racy_after:
                        seen[rel] = (key, entry)
                    total += key[0]
                    files += 1
                    manifest[rel] = entry
                elif S_ISDIR(mode):
                    manifest[rel] = _dir_entry(S_IMODE(mode))
                elif S_ISLNK(mode):
                    try:
                        manifest[rel] = {"link": os.readlink(name, dir_fd=listing.dir_fd)}
                        files += 1
                    except OSError as e:
                        manifest[rel] = _skipped(f"unreadable link: {e.strerror}", 0)
                        skipped += 1
                else:
                    manifest[rel] = _skipped("not a regular file (fifo, socket or device)", 0)
                    skipped += 1
        if store is not None:
            stats.new_bytes += _flush(store, pending)
        # The cache now describes exactly this capture: deleted paths drop out.
        self._keep(ws, seen)
        stats.files, stats.skipped = files, skipped
        return manifest, stats


_DIR_ENTRIES: dict[int, Entry] = {}


def _dir_entry(mode: int) -> Entry:
    """A directory's entry, one shared object per mode (entries are never changed)."""
    entry = _DIR_ENTRIES.get(mode)
    if entry is None:
        entry = _DIR_ENTRIES[mode] = {"dir": True, "mode": mode}
    return entry


def _read(dir_fd: int, name: str) -> tuple[str, bytes, _Key]:
    """Hash and content of a regular file, read through its parent's descriptor without
    following links; the key is taken from the open file, so it describes what was read."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(name, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            raise OSError(0, "replaced by something that is not a regular file")
        h = hashlib.sha256()
        parts = []
        while chunk := os.read(fd, _READ_CHUNK):
            h.update(chunk)
            parts.append(chunk)
        data = b"".join(parts)
        # The size from the read, the times from before it: a write during the read leaves a
        # newer mtime, which makes the next capture read the file again.
        key = (len(data), st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode)
        return h.hexdigest(), data, key
    finally:
        os.close(fd)


def _flush(store: SnapshotStore, pending: _Pending) -> int:
    if not pending.blobs:
        return 0
    missing = store.missing_blobs(pending.blobs)
    added = store.put_blobs({h: pending.blobs[h] for h in missing}) if missing else 0
    pending.blobs.clear()
    pending.size = 0
    return added


def _skipped(reason: str, size: int) -> dict[str, Any]:
    return {"skipped": reason, "size": size}


def _mb(n: int) -> str:
    return f"{n / MB:g} MB"
