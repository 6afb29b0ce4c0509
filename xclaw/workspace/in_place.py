"""[workspace] Rolling back a session's own directory (an editor's project,
xclaw/workspace/own_dir.py) in place, instead of building the state beside it and swapping it in.

The project directory is the editor's: it stays the same directory (same inode, the editor's
file watchers keep working), it may lie on another file system than xclaw's workspace root,
and it holds what snapshots do not version (`.git/`, `node_modules/`, files skipped for size),
which stays exactly where it is. So the versioned entries are made to match the target
manifest one by one: extra files and links removed, changed or missing files written to a
temporary name in their directory and renamed over the old one (each file is replaced
atomically), links re-made, emptied directories removed, modes set.

Redoable, as the swap is: each call compares what is there now with the target and changes
only the differences, and the journal row goes only once the directory matches and is flushed
to disk. A crash (even SIGKILL) half-way leaves the row, and the next `recover` — which runs
before anything uses the workspace — completes it. Nothing is ever written through a symlink:
parents are checked to be real directories (`_make_dirs`), files are created O_EXCL|O_NOFOLLOW
and renamed onto their name (a rename replaces a link, never follows it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from xclaw.errors import MissingBlobs, WorkspaceError
from xclaw.store.base import SnapshotStore
from xclaw.store.snapshots.model import Manifest, PendingRestore, check_path
from xclaw.workspace.crash_points import CrashPoint, no_crash_point
from xclaw.workspace.restore import RestoreReport, _make_dirs, flush_to_disk, remove_tree

_FETCH_BYTES = 32 * 1024 * 1024
# Files half-written by a restore a crash cut short: removed by the next one (never versioned
# by it: the capture before a redo lists them as extra entries).
TEMP_PREFIX = ".xclaw-restore-"


def restore_in_place(
    store: SnapshotStore,
    ws: Path,
    pending: PendingRestore,
    current: Manifest,
    crash_point: CrashPoint = no_crash_point,
) -> RestoreReport:
    """Make the versioned entries of `ws` (as `current`, a capture of it now, lists them) the
    journaled target state, then drop the journal row. The caller holds restore_lock."""
    target = pending.manifest
    files = 0
    try:
        if target is not None and ws.is_dir():
            files = _apply(store, ws, current, target, crash_point)
            flush_to_disk(ws)
        crash_point("restore.done")
    except (OSError, MissingBlobs) as e:
        why = (
            f"the database lacks {len(e.hashes)} file content(s) of the target state"
            if isinstance(e, MissingBlobs)
            else str(e)
        )
        raise WorkspaceError(
            f"could not restore the directory of session {pending.session_id} ({ws}): {why}. "
            "The restore is journaled and is retried before the session runs again."
        ) from e
    store.finish_restore(pending.session_id, pending.restore_id)
    return RestoreReport(pending.session_id, pending.kind, files, 0)


def _versioned(manifest: Manifest) -> Manifest:
    return {check_path(p): e for p, e in manifest.items() if "skipped" not in e}


def _kind(entry: dict[str, object]) -> str:
    return "dir" if "dir" in entry else "link" if "link" in entry else "file"


def _apply(
    store: SnapshotStore, ws: Path, current: Manifest, target: Manifest, crash_point: CrashPoint
) -> int:
    now, want = _versioned(current), _versioned(target)
    # Paths skipped in the target were not versioned then: whatever is there stays.
    keep = {p for p, e in target.items() if "skipped" in e}
    # 1. What the target does not have (or has as another kind): files and links first,
    # then directories deepest first, each only once empty (unversioned content stays).
    gone = [p for p in now if p not in keep and (p not in want or _kind(want[p]) != _kind(now[p]))]
    for path in sorted(gone, key=lambda p: p.count("/"), reverse=True):
        if _kind(now[path]) == "dir":
            if path in want:  # a directory where the target has a file or a link
                remove_tree(ws / path)
            else:
                with contextlib.suppress(OSError):  # holds what is not versioned: it stays
                    os.rmdir(ws / path)
        else:
            parent = _make_dirs(ws, path.rpartition("/")[0])
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parent / path.rpartition("/")[2])
    crash_point("restore.materialising")
    # 2. Directories, then files whose content or mode differ, then links.
    for path, e in sorted(want.items()):
        if "dir" in e:
            _make_dirs(ws, path)
    changed = [
        (p, e)
        for p, e in want.items()
        if "hash" in e
        and not (p in now and now[p].get("hash") == e["hash"] and now[p].get("mode") == e["mode"])
    ]
    written = _write_files(store, ws, changed, now)
    for path, e in sorted(want.items()):
        if "link" not in e or (path in now and now[path].get("link") == e["link"]):
            continue
        folder, _, name = path.rpartition("/")
        parent = _make_dirs(ws, folder)
        temp = parent / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        os.symlink(str(e["link"]), temp)
        os.replace(temp, parent / name)
        written += 1
    for path, e in sorted(want.items(), reverse=True):
        if "dir" in e:
            os.chmod(ws / path, stat.S_IMODE(int(e["mode"])), follow_symlinks=False)
    return written


def _write_files(
    store: SnapshotStore, ws: Path, changed: list[tuple[str, dict[str, object]]], now: Manifest
) -> int:
    written = 0
    batch: list[tuple[str, dict[str, object]]] = []
    size = 0
    for item in sorted(changed):
        batch.append(item)
        size += int(str(item[1].get("size", 0)))
        if size >= _FETCH_BYTES:
            written += _write_batch(store, ws, batch, now)
            batch, size = [], 0
    if batch:
        written += _write_batch(store, ws, batch, now)
    return written


def _write_batch(
    store: SnapshotStore, ws: Path, batch: list[tuple[str, dict[str, object]]], now: Manifest
) -> int:
    hashes = sorted({str(e["hash"]) for _, e in batch})
    contents = store.get_blobs(hashes)
    missing = [h for h in hashes if h not in contents]
    if missing:
        raise MissingBlobs(set(missing))
    for path, e in batch:
        folder, _, name = path.rpartition("/")
        parent = _make_dirs(ws, folder)
        dest = parent / name
        if path in now and now[path].get("hash") == e["hash"]:
            os.chmod(dest, stat.S_IMODE(int(str(e["mode"]))), follow_symlinks=False)
            continue  # only the mode differed
        temp = parent / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            view = memoryview(contents[str(e["hash"])])
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, stat.S_IMODE(int(str(e["mode"]))))
        finally:
            os.close(fd)
        if os.path.isdir(dest) and not os.path.islink(dest):
            remove_tree(dest)  # an unversioned directory in the way of a versioned file
        os.replace(temp, dest)
    return len(batch)
