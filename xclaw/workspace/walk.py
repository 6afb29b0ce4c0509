"""[workspace] Walking a workspace without ever leaving it: ignore rules and a symlink-proof
directory walk.

The walk opens every directory relative to its parent's descriptor with O_NOFOLLOW and checks
that it is the directory the parent listed (device and inode), so a directory swapped for a
symlink mid-walk is skipped, never followed out of the workspace. Symlinks are reported as
links; nothing they point to is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import translate
from pathlib import Path
from stat import S_ISDIR

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
        # What a file is checked against (`name/` patterns are for directories only): with
        # the default patterns, nothing but its name's encoding.
        self._file_rules = [r for r in self._rules if not r[1]]

    def ignored(self, rel: str, name: str, is_dir: bool) -> bool:
        return self.ignored_in(rel[: len(rel) - len(name)], name, is_dir)

    def ignored_in(self, prefix: str, name: str, is_dir: bool) -> bool:
        """`ignored` for the entry `name` of the directory `prefix` ("a/b/", "" at the root)."""
        if not name.isascii():
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                return True
        for rx, _, anchored in self._rules if is_dir else self._file_rules:
            if rx.match(prefix + name if anchored else name):
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


@dataclass(frozen=True, slots=True)
class Listing:
    """One directory of the walk: its entries `(name, stat, ignored)` in sorted order, and
    its open descriptor, valid until the walk moves on (read files through it)."""

    dir_fd: int
    prefix: str  # its path from the root with a trailing "/" ("" for the root)
    entries: list[tuple[str, os.stat_result, bool]]


def walk(root: Path, rules: IgnoreRules) -> Iterator[Found]:
    """Every entry under `root`, parents before children, each directory's entries in sorted
    order. Ignored entries are yielded (ignored=True) but not descended into. A missing root
    yields nothing."""
    for listing in walk_dirs(root, rules):
        for name, st, ignored in listing.entries:
            yield Found(listing.prefix + name, name, st, listing.dir_fd, ignored)


def walk_dirs(root: Path, rules: IgnoreRules) -> Iterator[Listing]:
    """Every directory under `root` (the root first, then depth first), listed whole: the
    cheap way to look at many files (a snapshot of a 10,000-file tree). A directory is
    descended into after its listing has been handled; ignored ones never."""
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return
    # (descriptor, prefix, its subdirectories still to visit, owned): at most one open
    # descriptor per level, and no recursion (a deep tree cannot exhaust it).
    stack: list[tuple[int, str, Iterator[tuple[str, os.stat_result]], bool]] = []
    try:
        entries = _list(root_fd, "", rules)
        yield Listing(root_fd, "", entries)
        stack.append((root_fd, "", _subdirs(entries), False))
        while stack:
            dfd, pre, subdirs, _ = stack[-1]
            nxt = next(subdirs, None)
            if nxt is None:
                _, _, _, owned = stack.pop()
                if owned:
                    os.close(dfd)
                continue
            name, st = nxt
            child = _open_dir(dfd, name, st)
            if child is None:
                continue
            prefix = pre + name + "/"
            try:
                entries = _list(child, prefix, rules)
            except OSError:
                os.close(child)
                continue
            stack.append((child, prefix, _subdirs(entries), True))
            yield Listing(child, prefix, entries)
    finally:
        for dfd, _, _, owned in stack:  # the consumer stopped early: close what is open
            if owned:
                os.close(dfd)
        os.close(root_fd)


def _subdirs(
    entries: list[tuple[str, os.stat_result, bool]],
) -> Iterator[tuple[str, os.stat_result]]:
    return iter([(n, st) for n, st, ignored in entries if not ignored and S_ISDIR(st.st_mode)])


def _open_dir(parent: int, name: str, listed: os.stat_result) -> int | None:
    """The subdirectory `name` of `parent`, if it is still the directory the listing saw
    (not vanished, not replaced by a link or by another directory)."""
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None  # vanished, replaced by a link (ELOOP), unreadable: not descended
    cst = os.fstat(child)
    if (cst.st_dev, cst.st_ino) != (listed.st_dev, listed.st_ino):
        os.close(child)  # replaced since it was listed: not the directory we saw
        return None
    return child


def _list(fd: int, prefix: str, rules: IgnoreRules) -> list[tuple[str, os.stat_result, bool]]:
    out = []
    ask_of_files = bool(rules._file_rules)  # else a file with an ASCII name is never ignored
    with os.scandir(fd) as it:
        for entry in it:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted between listing and stat
            name = entry.name
            is_dir = S_ISDIR(st.st_mode)
            if is_dir or ask_of_files or not name.isascii():
                out.append((name, st, rules.ignored_in(prefix, name, is_dir)))
            else:
                out.append((name, st, False))
    out.sort()  # by name: names are unique in a directory
    return out
