"""[workspace] What changed in a workspace between two points: files added, removed and changed,
with a unified diff for text. A point is a snapshot (the state before a step) or the files now."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xclaw.store.snapshots.model import Entry, Manifest

MAX_TEXT_DIFF_BYTES = 256 * 1024  # larger files are reported as changed, without a diff


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # added | removed | changed | mode | type
    old: Entry | None
    new: Entry | None


@dataclass(frozen=True)
class State:
    """A workspace state with a way to read the content of a file entry."""

    label: str
    manifest: Manifest
    read: Callable[[str, Entry], bytes]


def _kind_of(e: Entry) -> str:
    return next(k for k in ("hash", "dir", "link", "skipped") if k in e)


def compare(old: Manifest, new: Manifest) -> list[Change]:
    """Differences in path order; directories count only when added or removed."""
    out = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if a is None:
            out.append(Change(path, "added", None, b))
        elif b is None:
            out.append(Change(path, "removed", a, None))
        elif _kind_of(a) != _kind_of(b):
            out.append(Change(path, "type", a, b))
        elif "hash" in a and a["hash"] == b["hash"]:
            out.append(Change(path, "mode", a, b))
        elif "dir" in a:
            if a.get("mode") != b.get("mode"):
                out.append(Change(path, "mode", a, b))
        else:
            out.append(Change(path, "changed", a, b))
    return out


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def unified(change: Change, old: State, new: State) -> str | None:
    """A unified diff of a text file; None for binary, large or non-file entries."""
    sides: list[list[str]] = []
    for entry, state in ((change.old, old), (change.new, new)):
        if entry is None:
            sides.append([])
            continue
        if "hash" not in entry or entry["size"] > MAX_TEXT_DIFF_BYTES:
            return None
        lines = _text(state.read(change.path, entry))
        if lines is None:
            return None
        sides.append(lines)
    a_name = "/dev/null" if change.old is None else f"a/{change.path}"
    b_name = "/dev/null" if change.new is None else f"b/{change.path}"
    text = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(sides[0], sides[1], a_name, b_name)
    )
    return text or None


def describe(e: Entry | None) -> str:
    if e is None:
        return ""
    if "hash" in e:
        return f"{e['size']} B, mode {e['mode']:o}"
    if "dir" in e:
        return "directory"
    if "link" in e:
        return f"symlink -> {e['link']}"
    return f"skipped: {e['skipped']}"


def change_json(change: Change, diff: str | None) -> dict[str, Any]:
    return {
        "path": change.path,
        "change": change.kind,
        "old": change.old,
        "new": change.new,
        "diff": diff,
    }
