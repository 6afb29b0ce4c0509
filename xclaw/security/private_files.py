"""[security] Files only the owner may read: xclaw's home, the database (and its WAL/SHM), the
token, the workspaces. Every conversation is in them, so a permissive umask (0022 makes 0755/0644)
must not let other local users read it. Modes are set explicitly, never left to the umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
# SQLite keeps these beside the database; it creates them with the database file's mode.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents, each 0700) and make it 0700 even if it existed.

    Only for directories xclaw owns (its home, the workspace root): an existing directory's
    mode is changed, so never call it on a directory the user merely chose to put a file in.
    """
    path = Path(path).expanduser()
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        try:
            os.mkdir(p, DIR_MODE)
        except FileExistsError:
            pass
        else:
            os.chmod(p, DIR_MODE)  # mkdir's mode is filtered by the umask
    if stat.S_IMODE(os.stat(path).st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def private_parent(path: Path) -> None:
    """The directories above a file xclaw creates: the missing ones are made 0700; existing
    ones (a directory the user chose) are left as they are."""
    parent = Path(path).expanduser().parent
    missing = [p for p in (parent, *parent.parents) if not p.exists()]
    for p in reversed(missing):
        try:
            os.mkdir(p, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(p, DIR_MODE)


def private_file(path: Path) -> None:
    """Make an existing file 0600 (no-op when it does not exist)."""
    try:
        if stat.S_IMODE(os.stat(path).st_mode) != FILE_MODE:
            os.chmod(path, FILE_MODE)
    except FileNotFoundError:
        pass


def private_sqlite(path: Path) -> None:
    """The database file created (or fixed) 0600 before SQLite opens it, and any WAL/SHM left
    by an older version too; SQLite then gives new WAL/SHM files the database's mode. Only
    for a file that is xclaw's — new, or found to be an xclaw database by
    store/sqlite/probe.py — opened by a command that writes (store/access.py): a file the
    user merely pointed a reading command at keeps its mode."""
    path = Path(path).expanduser()
    private_parent(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    for suffix in SQLITE_COMPANIONS:
        private_file(Path(str(path) + suffix))
