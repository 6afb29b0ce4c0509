"""Walking a workspace without ever leaving it: ignore rules and a symlink-proof directory walk.

The walk opens every directory relative to its parent's descriptor with O_NOFOLLOW and checks
that it is the directory the parent listed (device and inode), so a directory swapped for a
symlink mid-walk is skipped, never followed out of the workspace. Symlinks are reported as
links; nothing they point to is read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import translate
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class IgnoreRules:
    """gitignore-like patterns: `name/` matches directories only; a pattern without `/`
    matches a name at any depth (`*.pyc`, `node_modules/`); one with `/` inside matches the
    path from the workspace root (`build/out`, `/dist/`). Names that are not valid UTF-8 are
    treated as ignored too: a manifest cannot name them."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(p for p in (str(x).strip() for x in patterns) if p)
        self._rules: list[tuple[re.Pattern[str], bool, bool]] = []
        for p in self.patterns:
            dir_only = p.endswith("/")
            body = p.strip("/")
            if not body:
                continue
            anchored = "/" in body or p.startswith("/")
            self._rules.append((re.compile(translate(body)), dir_only, anchored))

    def ignored(self, rel: str, name: str, is_dir: bool) -> bool:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return True
        for rx, dir_only, anchored in self._rules:
            if dir_only and not is_dir:
                continue
            if rx.match(rel if anchored else name):
                return True
        return False


@dataclass(frozen=True, slots=True)
class Found:
    """One entry of the walk. `dir_fd` is the open descriptor of its parent directory, valid
    only while the walk is at this entry: read files through it (no path re-resolution)."""

    rel: str
    name: str
    st: os.stat_result
    dir_fd: int
    ignored: bool


def walk(root: Path, rules: IgnoreRules) -> Iterator[Found]:
    """Every entry under `root` in sorted order, parents before children. Ignored entries
    are yielded (ignored=True) but not descended into. A missing root yields nothing."""
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        yield from _walk_dir(root_fd, rules)
    finally:
        os.close(root_fd)


def _walk_dir(fd: int, rules: IgnoreRules) -> Iterator[Found]:
    # Explicit stack of (fd, prefix, entries, owned) so that deep trees cannot exhaust
    # recursion; at most one open descriptor per level.
    stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]], bool]] = [
        (fd, "", iter(_list(fd)), False)
    ]
    try:
        yield from _drain(stack, rules)
    finally:
        for dfd, _, _, owned in stack:  # the consumer stopped early: close what is open
            if owned:
                os.close(dfd)


def _drain(
    stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]], bool]], rules: IgnoreRules
) -> Iterator[Found]:
    while stack:
        dfd, pre, entries, owned = stack[-1]
        nxt = next(entries, None)
        if nxt is None:
            stack.pop()
            if owned:
                os.close(dfd)
            continue
        name, st = nxt
        rel = pre + name
        is_dir = stat.S_ISDIR(st.st_mode)
        ignored = rules.ignored(rel, name, is_dir)
        yield Found(rel, name, st, dfd, ignored)
        if is_dir and not ignored:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue  # vanished, replaced by a link (ELOOP), unreadable: not descended
            cst = os.fstat(child)
            if (cst.st_dev, cst.st_ino) != (st.st_dev, st.st_ino):
                os.close(child)  # replaced since it was listed: not the directory we saw
                continue
            try:
                listing = _list(child)
            except OSError:
                os.close(child)
                continue
            stack.append((child, rel + "/", iter(listing), True))


def _list(fd: int) -> list[tuple[str, os.stat_result]]:
    out = []
    with os.scandir(fd) as it:
        for entry in it:
            try:
                out.append((entry.name, entry.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue  # deleted between listing and stat
    out.sort(key=lambda x: x[0])
    return out
