"""[tools] Where git, run in a workspace, could take a program to run from — and the configuration
every git the shell tool starts gets on top of the repository's own.

The write-then-run chain: the model writes files that git reads as a repository's
configuration (a bare repository's `config`/`HEAD`/`objects`/`refs` at the workspace root, a
git directory behind a `.git` file, a file a human's `include.path` names, a hook under a
human's `core.hooksPath`, the script a human's textconv driver runs…), then asks for a git
command that looks read-only; git runs the program. Which files git reads is decided by git,
not by their names, so the check follows git: every git directory in the workspace — a
directory named `.git`, one that git could take for a bare repository (HEAD with objects and
refs, or a commondir), the target of a `.git` file — has its `config` and `config.worktree`
read (xclaw/tools/git_config.py: only keys known to hold data pass) and its `hooks/` listed.
A git command runs unasked only when nothing is found; a question about a command that runs
git names what was found, so a human never approves an innocent-looking `git status` that
would run the model's program.

`git_env` is the second net, for every command the shell tool runs, asked or not: git's own
protected configuration (given through the environment, as `git -c` would be, which a
repository's files cannot override) refuses a repository found without a `.git`
(`safe.bareRepository=explicit`) and never starts an fsmonitor; discovery stops at the
workspace (`GIT_CEILING_DIRECTORIES`); a command run confined also runs no hooks.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path

from xclaw.tools.git_config import Entry, program_keys

# Beyond this many directory entries the workspace is not walked further: a git command
# there is asked (and the question says why) rather than judged on part of the tree.
MAX_ENTRIES = 200_000
_MAX_FILE = 1 << 20
# Inside a git directory: where objects, refs and reflogs live (many files, no programs).
_GITDIR_BULK = frozenset({"objects", "refs", "logs", "lfs"})
# `git` as a word of a command's text, quotes and backslashes taken out: `/usr/bin/git`,
# `g'i't`, `git-upload-pack`; not `.git/config`, `.gitignore` or `digit`.
_GIT_WORD = re.compile(r"(?<![A-Za-z0-9_.-])git(?![A-Za-z0-9_.])")

# Protected configuration for every git the shell tool starts (git reads GIT_CONFIG_COUNT as
# command-line configuration: after every file, and trusted where only protected
# configuration is, as safe.bareRepository is).
ALWAYS = (("safe.bareRepository", "explicit"), ("core.fsmonitor", "false"))
CONFINED = (("core.hooksPath", "/dev/null"),)


def runs_git(words: Iterable[str]) -> bool:
    """Whether a simple command (its literal words) starts git."""
    first = next(iter(words), "")
    return first.rsplit("/", 1)[-1] == "git" or first.rsplit("/", 1)[-1].startswith("git-")


def mentions_git(command: str) -> bool:
    """Whether a shell command's text may start git (a word `git` anywhere, quotes and
    backslashes removed): for a command xclaw cannot read, which is asked anyway."""
    return _GIT_WORD.search(re.sub(r"[\\'\"]", "", command)) is not None


def git_env(env: Mapping[str, str], workspace: Path, *, confined: bool) -> dict[str, str]:
    """The variables to add to `env` for a command run in `workspace` (see the docstring)."""
    out: dict[str, str] = {}
    try:
        start = int(env.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        start = 0
    pairs = ALWAYS + (CONFINED if confined else ())
    for i, (key, value) in enumerate(pairs, start):
        out[f"GIT_CONFIG_KEY_{i}"] = key
        out[f"GIT_CONFIG_VALUE_{i}"] = value
    out["GIT_CONFIG_COUNT"] = str(start + len(pairs))
    ceiling = str(Path(workspace).resolve().parent)
    prior = env.get("GIT_CEILING_DIRECTORIES", "")
    out["GIT_CEILING_DIRECTORIES"] = f"{prior}:{ceiling}" if prior else ceiling
    return out


def program_sources(workspace: Path) -> list[str]:
    """What in `workspace` git could take a program to run from, one line each (a path
    relative to the workspace, and what it holds); empty when nothing."""
    return _Walk(Path(workspace)).run()


class _Walk:
    def __init__(self, workspace: Path) -> None:
        self.root = workspace.resolve()
        self.found: list[str] = []
        self.inspected: set[Path] = set()

    def run(self) -> list[str]:
        stack = [self.root]
        entries = 0
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as it:
                    children = list(it)
            except OSError:
                continue  # git, run as the same user, cannot read it either
            entries += len(children)
            if entries > MAX_ENTRIES:
                self.found.append(
                    f"the workspace has more than {MAX_ENTRIES} files and directories: "
                    "not all of it was checked for git configuration"
                )
                break
            names = {c.name for c in children}
            gitdir = directory.name == ".git" or _looks_like_gitdir(names)
            if gitdir:
                self._gitdir(directory)
            for child in children:
                if child.name == ".git" and not child.is_dir(follow_symlinks=False):
                    self._gitfile(Path(child.path))
                elif child.is_dir(follow_symlinks=False):
                    if gitdir and child.name in _GITDIR_BULK | {"hooks"}:
                        continue
                    stack.append(Path(child.path))
        return self.found

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def _inside(self, path: Path) -> bool:
        return path == self.root or path.is_relative_to(self.root)

    def _gitdir(self, directory: Path) -> None:
        real = directory.resolve()
        if real in self.inspected:
            return
        self.inspected.add(real)
        if not self._inside(real):
            self.found.append(f"{self._shown(directory)}: a git directory outside the workspace")
            return
        for name in ("config", "config.worktree"):
            path = real / name
            if not os.path.lexists(path):
                continue
            data = self._read(path)
            if data is None:
                continue
            for what in program_keys(data, partial(self._worktree_inside, gitdir=real)):
                self.found.append(f"{self._shown(path)}: {what}")
        hooks = real / "hooks"
        if hooks.is_symlink():
            self.found.append(f"{self._shown(hooks)}: a symlink (hooks git may run)")
        elif hooks.is_dir():
            try:
                names = sorted(os.listdir(hooks))
            except OSError:
                names = []
            for name in names:
                if not name.endswith(".sample"):
                    self.found.append(f"{self._shown(hooks / name)}: a hook git may run")
        commondir = real / "commondir"
        if os.path.lexists(commondir):
            data = self._read(commondir)
            if data is not None:
                target = data.decode("utf-8", "replace").strip()
                self._pointer(commondir, (real / target) if target else None)

    def _worktree_inside(self, entry: Entry, gitdir: Path) -> bool:
        """`core.worktree` names a directory, not a program: data when it stays inside the
        workspace (a submodule's git directory has one); elsewhere git would work on files
        the question does not show, so it is named."""
        if (entry.section, entry.subsection, entry.name) != ("core", None, "worktree"):
            return False
        value = (entry.value or "").strip()
        if not value or any(c in value for c in '"\\#;'):
            return False  # quoted, escaped or commented: not read here
        return self._inside((gitdir / value).resolve())

    def _gitfile(self, path: Path) -> None:
        """A `.git` that is a file (`gitdir: PATH`) or a symlink: git uses what it names."""
        if path.is_symlink():
            self._pointer(path, path.resolve())
            return
        data = self._read(path)
        if data is None:
            return
        text = data.decode("utf-8", "replace")
        if not text.startswith("gitdir: "):
            self.found.append(f"{self._shown(path)}: not a `gitdir:` line xclaw can read")
            return
        target = text[len("gitdir: ") :].strip()
        self._pointer(path, (path.parent / target) if target else None)

    def _pointer(self, source: Path, target: Path | None) -> None:
        if target is None:
            self.found.append(f"{self._shown(source)}: names no git directory")
            return
        real = target.resolve()
        if not self._inside(real):
            self.found.append(f"{self._shown(source)}: points outside the workspace, to {real}")
        elif real.is_dir():
            self._gitdir(real)

    def _read(self, path: Path) -> bytes | None:
        """The file as git would read it (symlinks followed); None, with a finding, when it
        is not a regular file or is too large to check."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None  # git cannot read it either
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.found.append(f"{self._shown(path)}: not a regular file")
                return None
            if info.st_size > _MAX_FILE:
                self.found.append(f"{self._shown(path)}: too large to check")
                return None
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)


def _looks_like_gitdir(names: set[str]) -> bool:
    """What git's is_git_directory looks for (HEAD, and objects with refs or a commondir),
    read loosely: a false positive costs a question, a miss a program run."""
    return "HEAD" in names and (("objects" in names and "refs" in names) or "commondir" in names)


def describe(sources: list[str], limit: int = 6) -> str:
    """The first few sources for a question, and how many more."""
    shown = "; ".join(sources[:limit])
    more = len(sources) - limit
    return shown + (f"; and {more} more" if more > 0 else "")
