"""[workspace] A session that works in a directory of its own choosing — an editor's project, given
by `xclaw acp`'s `session/new {cwd}` — instead of `<workspace root>/<session id>/`.

The directory is recorded with the session (`sessions.metadata["workspace"]`, an absolute
path) when the session is created, and never changes: every process that resolves the
session's workspace (`Workspaces.path`, the tools' directory, `xclaw diff … now`) reads it
from there. A fork does not inherit it: the fork gets a default workspace of its own, holding
the files as they were at the fork point (the project itself stays the source session's).
A rollback rewinds the directory in place (xclaw/workspace/in_place.py): the editor keeps the
same directory open, and what snapshots do not version (`.git/`, `node_modules/`) stays.

Some directories are refused, because snapshotting or rewinding them would reach far beyond
a project: `/`, the user's home itself, xclaw's home (or a directory holding it), the
workspace root, and a directory holding xclaw's SQLite database.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xclaw.errors import ConfigError
from xclaw.store.steps.model import OWN_WORKSPACE_KEY


def recorded_dir(metadata: Mapping[str, Any]) -> Path | None:
    """The session's own directory, as its metadata records it; None for a session with the
    default workspace (or a value that is not an absolute path: never trusted)."""
    value = metadata.get(OWN_WORKSPACE_KEY)
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        return None
    return Path(value)


def check_own_dir(
    given: str | Path, *, home: Path, workspace_root: Path, database: str | None = None
) -> Path:
    """`given` as a session's own workspace: an existing directory, absolute, resolved (no
    symlink left in it), and none of the refused ones (module docstring). ConfigError says
    why not."""
    text = str(given)
    if not text or "\0" in text:
        raise ConfigError("a session's directory must be a non-empty path")
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise ConfigError(f"a session's directory must be an absolute path, not {text!r}")
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"the session's directory {text!r} does not exist ({e})") from None
    if not real.is_dir():
        raise ConfigError(f"the session's directory {text!r} is not a directory")
    refusal = _refused(real, home=home, workspace_root=workspace_root, database=database)
    if refusal is not None:
        raise ConfigError(
            f"refusing to work in {str(real)!r}: {refusal}. Open a project directory instead "
            "(rollback and fork snapshot and rewind every file under it)"
        )
    return real


def _refused(real: Path, *, home: Path, workspace_root: Path, database: str | None) -> str | None:
    def resolved(p: Path) -> Path:
        return Path(os.path.realpath(p.expanduser()))

    if real == Path("/"):
        return "it is the root of the file system"
    user_home = Path(os.path.expanduser("~"))
    if real == resolved(user_home):
        return "it is your home directory itself"
    xclaw_home = resolved(home)
    if real == xclaw_home or _holds(real, xclaw_home) or _holds(xclaw_home, real):
        return f"it is, holds or lies in xclaw's home ({xclaw_home})"
    root = resolved(workspace_root)
    if real == root or _holds(real, root) or _holds(root, real):
        return f"it is, holds or lies in xclaw's workspace root ({root})"
    if database and "://" not in database:
        db = resolved(Path(database))
        if _holds(real, db):
            return f"it holds xclaw's database ({db})"
    return None


def _holds(outer: Path, inner: Path) -> bool:
    return inner != outer and inner.is_relative_to(outer)
