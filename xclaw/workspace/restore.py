"""[workspace] Completing a journaled restore: the workspace becomes the target state, all at once.

The rollback/fork transaction wrote the target manifest into the journal (workspace_restores).
Here the files are materialised into a private directory beside the workspace, and swapped in
with two renames; the file system is flushed to disk (syncfs); then the journal row is
deleted (a durable commit). Every step can be redone, so a crash (even
SIGKILL) anywhere is completed by the next `recover`, and nothing in xclaw uses a workspace
with a pending restore (runs, rollback and fork recover first):

    root/.SID.restore   the new state being written          (crash: thrown away, redone)
    root/.SID.old       the previous workspace, swapped out  (exists: the swap happened)

Paths that snapshots do not version (ignore patterns such as .git/ and node_modules/, files
skipped for size) are moved over from the previous workspace on rollback, and copied from the
source's on fork. Nothing is ever written through a symlink: manifest paths are plain relative
paths, files are created with O_EXCL|O_NOFOLLOW, links are created last, and every parent
directory is checked to be a real directory.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from xclaw.errors import BlobStoreLost, MissingBlobs, WorkspaceError
from xclaw.store.base import SnapshotStore
from xclaw.store.snapshots.model import Manifest, PendingRestore, check_path
from xclaw.workspace.crash_points import CrashPoint, no_crash_point
from xclaw.workspace.env_layer import without_env
from xclaw.workspace.walk import IgnoreRules, walk

log = logging.getLogger("xclaw.workspace")

_FETCH_BYTES = 32 * 1024 * 1024  # blob contents fetched per store read
_WRITERS = 4  # threads writing the files of one batch
# Contents by hash (the store's get_blobs, or one that reads some from local files first).
Fetch = Callable[[list[str]], dict[str, bytes]]


def _load_syncfs() -> object | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):  # not Linux/glibc
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_syncfs = _load_syncfs()


def flush_to_disk(path: Path) -> None:
    """Everything written under `path` is on stable storage: one syncfs(2) of its file
    system (Linux) instead of an fsync per file and directory; sync(2) elsewhere."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _syncfs is not None and _syncfs(fd) == 0:  # type: ignore[operator]
            return
    finally:
        os.close(fd)
    os.sync()


@dataclass(frozen=True)
class RestoreReport:
    session_id: str
    kind: str
    files: int  # files and links written
    kept: int  # unversioned entries carried over (moved on rollback, copied on fork)


def side_paths(root: Path, session_id: str) -> tuple[Path, Path, Path]:
    """(workspace, restore dir, old dir). Session ids never start with '.', so these names
    cannot collide with another session's workspace."""
    return root / session_id, root / f".{session_id}.restore", root / f".{session_id}.old"


@contextmanager
def restore_lock(root: Path) -> Iterator[None]:
    """One restorer at a time under a workspace root, across processes (a CLI rollback
    beside a server). Restores are rare; one lock file keeps the root uncluttered."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(root / ".restore.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def complete_restore(
    store: SnapshotStore,
    root: Path,
    pending: PendingRestore,
    crash_point: CrashPoint = no_crash_point,
    written: dict[str, os.stat_result] | None = None,
    fetch: Fetch | None = None,
    source_dir: Path | None = None,
) -> RestoreReport:
    """Bring the workspace of `pending.session_id` to the journaled state and drop the
    journal row. The caller holds restore_lock. `crash_point` is told each moment a crash
    test may stop at (xclaw.workspace.crash_points). `written`, when given, gets the stat
    of each file written, by path (the snapshotter's cache trusts them without reading).
    `fetch` replaces `store.get_blobs` (a sync reusing the files already there).
    `source_dir`: a fork's source workspace when it is not `root/<source id>` (a session
    working in a directory of its own, xclaw/workspace/own_dir.py)."""
    pending = without_env(pending)  # a container's layer is written back elsewhere
    ws, tmp, old = side_paths(root, pending.session_id)
    rules = IgnoreRules(pending.ignore)
    manifest = pending.manifest
    files = kept = 0
    try:
        if old.exists() or old.is_symlink():
            # Crashed after the first rename: the new state was complete before it.
            if not ws.exists():
                if not tmp.is_dir():
                    files, kept = _build(
                        store, root, pending, tmp, rules, crash_point, written, fetch, source_dir
                    )
                os.rename(tmp, ws)
        else:
            _remove(tmp)
            files, kept = _build(
                store, root, pending, tmp, rules, crash_point, written, fetch, source_dir
            )
            crash_point("restore.materialised")
            if ws.exists() or ws.is_symlink():
                os.rename(ws, old)
            crash_point("restore.half-swapped")
            os.rename(tmp, ws)
            crash_point("restore.swapped")
        if pending.kind == "rollback" and old.is_dir() and manifest is not None:
            kept += _move_unversioned(old, ws, manifest, rules, crash_point)
        _remove(old)
        # The journal row goes only once the new files survive a power loss too: else a
        # crash of the machine could leave a half-written workspace with no restore pending.
        flush_to_disk(root)
        crash_point("restore.done")
    except BlobStoreLost as e:  # its own words and code (blob_store_lost): what to do
        raise e.during(
            f"could not restore the workspace of session {pending.session_id} ({ws}); the "
            "restore is journaled and is retried before the session runs again"
        ) from e
    except (OSError, MissingBlobs) as e:
        why = (
            f"the database lacks {len(e.hashes)} file content(s) of the target state"
            if isinstance(e, MissingBlobs)
            else str(e)
        )
        raise WorkspaceError(
            f"could not restore the workspace of session {pending.session_id} ({ws}): {why}. "
            "The restore is journaled and is retried before the session runs again."
        ) from e
    store.finish_restore(pending.session_id, pending.restore_id)
    return RestoreReport(pending.session_id, pending.kind, files, kept)


def _build(
    store: SnapshotStore,
    root: Path,
    pending: PendingRestore,
    tmp: Path,
    rules: IgnoreRules,
    crash_point: CrashPoint,
    written: dict[str, os.stat_result] | None = None,
    fetch: Fetch | None = None,
    source_dir: Path | None = None,
) -> tuple[int, int]:
    """Write the new state into `tmp` (private, 0700). Returns (files written, kept)."""
    source = root / pending.source_session_id if pending.source_session_id else None
    if source is not None and source_dir is not None:
        source = source_dir
    if pending.manifest is None:
        # A fork after the last snapshot: the source's files as they are now.
        if source is not None and source.is_dir():
            shutil.copytree(source, tmp, symlinks=True)
        else:
            tmp.mkdir(mode=0o700)
        os.chmod(tmp, 0o700)
        return 0, 0
    tmp.mkdir(mode=0o700)
    files = materialise(store, tmp, pending.manifest, crash_point, written, fetch)
    kept = 0
    if pending.kind == "fork" and source is not None and source.is_dir():
        kept = _copy_unversioned(source, tmp, pending.manifest, rules)
    return files, kept


def materialise(
    store: SnapshotStore,
    target: Path,
    manifest: Manifest,
    crash_point: CrashPoint = no_crash_point,
    written: dict[str, os.stat_result] | None = None,
    fetch: Fetch | None = None,
) -> int:
    """Create the manifest's directories, files and links inside the empty directory
    `target`. Returns the number of files and links written; `written` gets each file's
    stat as it was left."""
    entries = sorted((check_path(p), e) for p, e in manifest.items())
    dirs = [(p, e) for p, e in entries if "dir" in e]
    files = [(p, e) for p, e in entries if "hash" in e]
    links = [(p, e) for p, e in entries if "link" in e]
    for path, _ in dirs:
        _make_dirs(target, path)
    # Contents in batches: each blob fetched once, written to every path that has it; the
    # next batch is fetched while this one is written (an object store's GETs overlap the
    # disk's work).
    by_hash: dict[str, list[tuple[str, int]]] = {}
    for path, e in files:
        by_hash.setdefault(e["hash"], []).append((path, e["mode"]))
    sizes = {e["hash"]: e["size"] for _, e in files}
    batches: list[list[str]] = [[]]
    size = 0
    for h in by_hash:
        batches[-1].append(h)
        size += sizes[h]
        if size >= _FETCH_BYTES:
            batches.append([])
            size = 0
    batches = [b for b in batches if b]
    # Every directory first (files then never race to create one), in path order.
    made: dict[str, Path] = {"": target}  # directories made or checked in this target
    for folder in sorted({p.rpartition("/")[0] for p, _ in files} - {""}):
        made[folder] = _make_dirs(target, folder)
    stats: dict[str, os.stat_result] = {} if written is None else written
    count = 0
    with (
        ThreadPoolExecutor(1, thread_name_prefix="xclaw-fetch") as fetcher,
        ThreadPoolExecutor(_WRITERS, thread_name_prefix="xclaw-write") as writers,
    ):
        get = fetch or store.get_blobs
        ahead = fetcher.submit(get, batches[0]) if batches else None
        for i, batch in enumerate(batches):
            assert ahead is not None
            contents = ahead.result()
            ahead = fetcher.submit(get, batches[i + 1]) if i + 1 < len(batches) else None
            # The writes of one batch on a few threads (os.write and open release the GIL):
            # creating ten thousand files is the disk's work more than the network's.
            parts = [batch[k::_WRITERS] for k in range(_WRITERS)]
            write = partial(
                _write_batch, contents=contents, by_hash=by_hash, made=made, stats=stats
            )
            count += sum(writers.map(write, parts))
            if i == 0:
                crash_point("restore.materialising")
    written_n = count
    for path, e in links:
        parent = _make_dirs(target, path.rpartition("/")[0]) if "/" in path else target
        os.symlink(e["link"], parent / path.rpartition("/")[2])
        written_n += 1
    # Directory modes last: a read-only directory must not stop its own files being written.
    for path, e in reversed(dirs):
        os.chmod(target / path, stat.S_IMODE(e["mode"]), follow_symlinks=False)
    return written_n


def _write_batch(
    batch: list[str],
    contents: dict[str, bytes],
    by_hash: dict[str, list[tuple[str, int]]],
    made: dict[str, Path],
    stats: dict[str, os.stat_result],
) -> int:
    """Write every path of the contents in `batch`; their directories exist (`made`)."""
    n = 0
    for h in batch:
        for path, mode in by_hash[h]:
            folder, _, name = path.rpartition("/")
            # O_EXCL: never reuse what is there (a link planted under this name), and never
            # follow one; the mode is set exactly, whatever the umask.
            fd = os.open(
                made[folder] / name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                view = memoryview(contents[h])
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, stat.S_IMODE(mode))
                stats[path] = os.fstat(fd)
            finally:
                os.close(fd)
            n += 1
    return n


def _make_dirs(top: Path, rel: str) -> Path:
    """`top/rel` as a real directory, creating what is missing; a component that exists as
    anything but a directory (a symlink above all) is refused."""
    current = top
    for part in rel.split("/") if rel else ():
        current = current / part
        try:
            os.mkdir(current, 0o700)
            continue
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(current).st_mode):
            raise WorkspaceError(
                f"refusing to write under {str(current.relative_to(top))!r}: it is not a "
                "directory (a symlink is never written through)"
            )
    return current


def _unversioned(ws: Path, manifest: Manifest, rules: IgnoreRules) -> list[str]:
    """Paths of `ws` that snapshots do not version: ignored entries (topmost only) and files
    the manifest records as skipped."""
    skipped = {p for p, e in manifest.items() if "skipped" in e}
    # Found by the walk, which never goes through a symlink: `ws / path` could.
    return [f.rel for f in walk(ws, rules) if f.ignored or f.rel in skipped]


def _move_unversioned(
    old: Path, ws: Path, manifest: Manifest, rules: IgnoreRules, crash_point: CrashPoint
) -> int:
    """Rollback: what snapshots do not version stays as it was (moved, not copied)."""
    moved = 0
    for rel in _unversioned(old, manifest, rules):
        dest = _place(ws, rel)
        if dest is None:
            continue
        os.rename(old / rel, dest)
        moved += 1
        if moved == 1:
            crash_point("restore.moving")
    return moved


def _copy_unversioned(source: Path, tmp: Path, manifest: Manifest, rules: IgnoreRules) -> int:
    """Fork: the new workspace gets a copy of what snapshots do not version."""
    copied = 0
    for rel in _unversioned(source, manifest, rules):
        dest = _place(tmp, rel)
        if dest is None:
            continue
        src = source / rel
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dest, symlinks=True)
        else:
            shutil.copy2(src, dest, follow_symlinks=False)
        copied += 1
    return copied


def _place(top: Path, rel: str) -> Path | None:
    """Where an unversioned entry goes in the new tree; None when the new state already has
    something there (the versioned state wins) or a parent is not a real directory."""
    parent_rel, _, name = rel.rpartition("/")
    try:
        parent = _make_dirs(top, parent_rel)
    except WorkspaceError as e:
        log.warning("event=restore_keep_skipped path=%s why=%s", rel, e.message)
        return None
    dest = parent / name
    if os.path.lexists(dest):
        return None
    return dest


def remove_tree(path: Path) -> None:
    """Remove a file or a whole directory tree, read-only directories included."""
    _remove(path)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        # Make read-only directories writable first, or rmtree cannot empty them.
        for dirpath, dirnames, _ in os.walk(path):
            for d in dirnames:
                p = os.path.join(dirpath, d)
                if not os.path.islink(p):
                    os.chmod(p, 0o700)
        os.chmod(path, 0o700)
        shutil.rmtree(path)
