"""[store/snapshots] Pure values of workspace snapshots: manifests, their deltas, snapshot
summaries, restores.

A manifest is the state of a workspace as JSON-ready data: `{relative path: entry}` with one
entry per file, directory, symlink or skipped file:

    file     {"hash": sha256 hex, "size": bytes, "mode": permission bits}
    dir      {"dir": true, "mode": permission bits}
    link     {"link": target}             (recorded as a link, never followed)
    skipped  {"skipped": reason, "size": bytes}   (too big, unreadable: not versioned)

Paths are POSIX, relative, without `.`/`..`/empty components. The store keeps most snapshots
as deltas against the previous one (a changed file costs its entry, not the whole manifest);
`apply_delta` / `diff_manifests` convert between the two forms.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from xclaw.store.steps.model import display_id

Entry = dict[str, Any]
Manifest = dict[str, Entry]

_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One saved snapshot: the workspace as it was just before step `seq` ran."""

    session_id: str
    seq: int
    files: int  # regular files and symlinks captured
    bytes: int  # their total size
    new_bytes: int  # bytes of file contents this snapshot added to the store
    skipped: int  # files recorded as skipped (too big, unreadable)
    created_at: int
    full: bool  # stored whole (True) or as a delta against an earlier snapshot

    @property
    def display_id(self) -> str:
        return display_id(self.seq)


@dataclass(frozen=True, slots=True)
class WorkspaceRestore:
    """Asks rollback/fork to journal a workspace restore in the same transaction as the
    trace change (files follow memory). `ignore` are the patterns not versioned by snapshots: the
    restore keeps (rollback) or copies (fork) whatever matches them."""

    ignore: tuple[str, ...] = ()
    # The workspace follows the session (an object store holds the contents): the snapshot
    # restored stays as the session's latest state (rollback keeps its row; fork copies it
    # as the state before its next step), so another worker syncs to it (docs/workspace.md).
    keep_state: bool = False


@dataclass(frozen=True, slots=True)
class PendingRestore:
    """A journaled restore not yet completed on disk (workspace_restores row)."""

    session_id: str  # whose workspace is (re)built
    restore_id: str
    kind: str  # rollback | fork
    source_session_id: str | None  # fork: the session whose workspace ignored paths come from
    snapshot_seq: int | None  # the snapshot restored; None: copy the source's workspace
    manifest: Manifest | None
    ignore: tuple[str, ...]
    created_at: int


def check_path(path: str) -> str:
    """A manifest path must be relative and plain: no way to name anything outside."""
    if (
        not isinstance(path, str)
        or not path
        or path.startswith("/")
        or "\0" in path
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        raise ValueError(f"bad path in a workspace manifest: {path!r}")
    return path


def check_entry(path: str, entry: Any) -> Entry:
    check_path(path)
    if not isinstance(entry, dict):
        raise TypeError(f"manifest entry of {path!r} must be an object")
    if "hash" in entry:
        h = entry["hash"]
        if not (isinstance(h, str) and _HASH.fullmatch(h)):
            raise ValueError(f"manifest entry of {path!r}: bad hash {h!r}")
        if not isinstance(entry.get("size"), int) or not isinstance(entry.get("mode"), int):
            raise ValueError(f"manifest entry of {path!r}: a file needs size and mode")
    elif "dir" in entry:
        if not isinstance(entry.get("mode"), int):
            raise ValueError(f"manifest entry of {path!r}: a directory needs a mode")
    elif "link" in entry:
        if not isinstance(entry["link"], str) or "\0" in entry["link"]:
            raise ValueError(f"manifest entry of {path!r}: bad link target")
    elif "skipped" not in entry:
        raise ValueError(f"manifest entry of {path!r} is not a file, dir, link or skipped file")
    return entry


def diff_manifests(
    base: Mapping[str, Entry], new: Mapping[str, Entry]
) -> tuple[Manifest, list[str]]:
    """(entries added or changed, paths removed) turning `base` into `new`. An entry that is
    the very object of `base` is equal without a look (a capture shares unchanged ones)."""
    get = base.get
    changed = {p: e for p, e in new.items() if (b := get(p)) is not e and b != e}
    removed = sorted(base.keys() - new.keys())
    return changed, removed


def apply_delta(
    base: Mapping[str, Entry], changed: Mapping[str, Entry], removed: Iterable[str]
) -> Manifest:
    state = dict(base)
    for p in removed:
        state.pop(p, None)
    state.update(changed)
    return state


def hashes_of(manifest: Mapping[str, Entry]) -> set[str]:
    return {e["hash"] for e in manifest.values() if "hash" in e}


def manifest_stats(manifest: Mapping[str, Entry]) -> tuple[int, int, int]:
    """(files and links, bytes of files, skipped files)."""
    files = size = skipped = 0
    for e in manifest.values():
        if "hash" in e:
            files += 1
            size += e["size"]
        elif "link" in e:
            files += 1
        elif "skipped" in e:
            skipped += 1
    return files, size, skipped


# --- blob encoding (pure, so every backend stores the same bytes) ------------------------------

_SAMPLE = 4 * 1024
_MIN_GAIN = 0.9  # keep zlib only when it saves at least 10%


def encode_blob(data: bytes) -> tuple[str, bytes]:
    """('zlib', compressed) when that is worth it, else ('raw', data). A 4 KiB sample decides
    first: compressing incompressible data (images, archives) costs ~20 ms per MB for
    nothing, and text shows that it compresses within its first page."""
    if len(data) < 256:
        return "raw", data
    if len(data) > _SAMPLE and len(zlib.compress(data[:_SAMPLE], 1)) > _SAMPLE * _MIN_GAIN:
        return "raw", data
    packed = zlib.compress(data, 1)
    if len(packed) > len(data) * _MIN_GAIN:
        return "raw", data
    return "zlib", packed


def decode_blob(encoding: str, payload: bytes) -> bytes:
    if encoding == "zlib":
        return zlib.decompress(payload)
    if encoding == "raw":
        return bytes(payload)
    raise ValueError(f"unknown blob encoding {encoding!r}")


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
