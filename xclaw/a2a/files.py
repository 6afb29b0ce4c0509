"""[a2a] The files a turn changed, as A2A artifacts: the workspace as the snapshot before the
turn's first side effect kept it, against the workspace as it is after the turn (the next
turn's first snapshot, or the files now for the latest turn).

Blocking (manifests, blobs and files are read): called on a thread, only for a task that is
over, and cached by the caller.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import Artifact, Part

from xclaw.a2a.tasks import Turn, metadata_struct
from xclaw.store.base import SnapshotStore
from xclaw.store.snapshots.model import Entry, Manifest
from xclaw.workspace.diff import compare
from xclaw.workspace.snapshots import SnapshotConfig, Snapshotter

# A file larger than this is named in the artifact, its content left out.
MAX_FILE_BYTES = 1024 * 1024
MAX_FILES = 100


def changed_files(
    store: SnapshotStore,
    turn: Turn,
    workspace: Path,
    config: SnapshotConfig,
) -> list[Artifact]:
    sid = turn.message.session_id
    found = store.snapshot_from(sid, turn.message.seq)
    if found is None:
        return []
    seq, before = found
    after_seq = turn.first_seq_after()
    if after_seq is not None and seq >= after_seq:
        return []  # the turn wrote nothing: the first snapshot after it is a later turn's
    later = None if after_seq is None else store.snapshot_from(sid, after_seq)
    if later is not None:
        after: Manifest = later[1]
        read = _from_blobs(store)
    else:
        after = Snapshotter(config).capture(workspace)
        read = _from_disk(workspace)
    changes = compare(before, after)
    out: list[Artifact] = []
    for change in changes[:MAX_FILES]:
        entry = change.new
        described: dict[str, Any] = {"path": change.path, "change": change.kind}
        parts: list[Part] = []
        if entry is not None and "hash" in entry:
            size = int(entry.get("size", 0))
            described["size"] = size
            if size <= MAX_FILE_BYTES:
                data = read(change.path, entry)
                media = mimetypes.guess_type(change.path)[0] or "application/octet-stream"
                parts.append(Part(raw=data, filename=change.path, media_type=media))
        if not parts:
            parts.append(Part(text=f"{change.path}: {change.kind}"))
        out.append(
            Artifact(
                artifact_id=f"file:{change.path}",
                name=change.path,
                parts=parts,
                metadata=metadata_struct(described),
            )
        )
    return out


def _from_blobs(store: SnapshotStore) -> Any:
    def read(path: str, entry: Entry) -> bytes:
        got: Mapping[str, bytes] = store.get_blobs([entry["hash"]])
        return got.get(entry["hash"], b"")

    return read


def _from_disk(workspace: Path) -> Any:
    def read(path: str, entry: Entry) -> bytes:
        target = (workspace / path).resolve()
        if not target.is_relative_to(workspace.resolve()) or not target.is_file():
            return b""
        return target.read_bytes()[:MAX_FILE_BYTES]

    return read
