"""[sandbox] Workspace confinement: every path a tool touches is resolved here, and must stay
inside.

The model names files relative to its session's workspace. A path may not be absolute, may not
climb out with `..`, and may not pass through a symlink whose target lies outside the workspace
(wherever the symlink sits in the path, dangling or not). The check walks the path one component
at a time the way the kernel does, so `..` after a symlink means the symlink target's parent,
exactly as the file operation will see it.

This guards the file tools. The shell tool runs arbitrary commands and is confined only by the
approval policy (and, where available, OS isolation); see xclaw.tools.approval.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from xclaw.errors import PathEscape, ToolError
from xclaw.security.private_files import private_parent


def workspace_dir(root: Path, session_id: str) -> Path:
    """The session's workspace `root/session_id`, created private (0700) if missing."""
    if (
        not session_id
        or session_id in (".", "..")
        or "/" in session_id
        or "\\" in session_id
        or "\0" in session_id
    ):
        raise PathEscape(f"session id {session_id!r} cannot name a workspace directory")
    private_parent(root / session_id)  # a missing root is made 0700 too
    path = root / session_id
    path.mkdir(exist_ok=True, mode=0o700)
    # mkdir's mode is filtered by the umask and ignored for an existing directory.
    os.chmod(path, 0o700)
    return path


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def resolve_in_workspace(root: Path, user_path: str) -> Path:
    """The real path that `user_path` names inside `root`, or PathEscape saying why not.

    The returned path has every existing symlink resolved, so the caller opens exactly what was
    checked. Components that do not exist yet (a file about to be written) are kept as given.
    """
    if not isinstance(user_path, str):
        raise ToolError(f"path must be a string, got {type(user_path).__name__}")
    if user_path == "":
        raise ToolError("path is empty; use '.' for the workspace itself")
    if "\0" in user_path:
        raise ToolError("path contains a NUL byte")
    real_root = root.resolve()
    pure = PurePosixPath(user_path)
    if pure.is_absolute():
        hint = ""
        candidate = Path(os.path.normpath(user_path))
        for base in (real_root, root.absolute()):
            if _inside(candidate, base):
                hint = f" (here: {str(candidate.relative_to(base)) or '.'!r})"
                break
        raise PathEscape(
            f"absolute paths are not allowed; use a path relative to the workspace{hint}"
        )
    if pure.parts and pure.parts[0].startswith("~"):
        raise PathEscape(
            f"{user_path!r}: '~' is not expanded; use a path relative to the workspace"
        )

    current = real_root
    walked: list[str] = []  # the components of user_path consumed so far, for messages
    for part in pure.parts:
        walked.append(part)
        if part == ".":
            continue
        if part == "..":
            if current == real_root:
                raise PathEscape(f"{user_path!r} leaves the workspace")
            current = current.parent
            continue
        candidate = current / part
        if candidate.is_symlink():
            target = _follow(candidate, user_path)
            if not _inside(target, real_root):
                shown = str(PurePosixPath(*walked))
                raise PathEscape(f"{shown!r} is a symlink pointing outside the workspace")
            current = target
        else:
            current = candidate
    return current


def _follow(link: Path, user_path: str) -> Path:
    """Where a symlink finally points (resolved as far as it exists; dangling is fine)."""
    try:
        # Non-strict: a dangling link resolves to where its target would be.
        return link.resolve(strict=False)
    except (RuntimeError, OSError) as e:  # RuntimeError: symlink loop (Python 3.11)
        raise ToolError(f"{user_path!r}: cannot follow symlink {link.name!r}: {e}") from e
