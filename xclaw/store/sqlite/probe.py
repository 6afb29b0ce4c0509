"""[store/sqlite] What is at a SQLite database path, found without writing to it: nothing, an empty
file, a file that is not SQLite, another program's database, or xclaw's at some schema version.

Looked at before the store opens the file for writing (or at all, for a reading command),
so xclaw never creates, chmods, switches to WAL or migrates a file that is not its own
(xclaw/store/access.py). Only a regular file's first bytes are read, then, if it is SQLite,
its table list through a read-only connection (`mode=ro`: SQLite can neither create nor
write the file through it; nor, when no -wal is there, create one).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from xclaw.errors import DatabaseRefused, StoreError
from xclaw.store.access import not_xclaw
from xclaw.store.migrations import sqlite_history
from xclaw.store.sqlite.wal import wal_problem
from xclaw.store.sqlite.writer import read_only_uri, retry_while_busy

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100


def probe_sqlite(path: Path, where: str) -> int | None:
    """None: nothing at `path`; 0: an empty file or a SQLite database without tables; n: an
    xclaw database at schema version n. Anything else raises DatabaseRefused, saying what
    it is; StoreError when the file cannot be read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"cannot open database {where}: {e}") from e
    if stat.S_ISDIR(st.st_mode):
        raise not_xclaw(where, "it is a directory; --db takes the database file's path")
    if not stat.S_ISREG(st.st_mode):
        raise not_xclaw(where, "it is not a regular file")  # a FIFO or device: never opened
    if st.st_size == 0:
        return 0
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_SIZE)
    except OSError as e:
        raise StoreError(f"cannot open database {where}: {e}") from e
    if not head.startswith(SQLITE_MAGIC):
        raise not_xclaw(where, "it is not a SQLite database file")
    if len(head) < HEADER_SIZE:
        raise not_xclaw(where, "it is a SQLite file cut short (no whole header)")
    uri = read_only_uri(path)
    if head[18:20] == b"\x02\x02" and not os.path.exists(f"{path}-wal"):
        # A WAL database nobody has open (no -wal): its file holds every commit. Read as
        # immutable, SQLite creates no -wal/-shm beside a file that may not be ours. (A
        # writer starting now writes its WAL; the file changes only at its first
        # checkpoint, long after these few reads.)
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open database {where}: {e}") from e
    try:
        version = retry_while_busy(lambda: sqlite_history(conn, where), where)
        if version == 0:
            # No tables yet, but a program that set its own marks on the file owns it.
            marks = [
                f"{name} {value}"
                for name in ("application_id", "user_version")
                if (value := conn.execute(f"PRAGMA {name}").fetchone()[0])
            ]
            if marks:
                raise not_xclaw(
                    where,
                    f"it is an empty SQLite database that another program has marked as its "
                    f"own ({', '.join(marks)})",
                )
        return version
    except sqlite3.DatabaseError as e:
        raise not_xclaw(where, f"SQLite cannot read it ({e})") from e
    except DatabaseRefused as e:
        # SQLite reads the file through its WAL: one of another database's makes it so.
        wal = wal_problem(path)
        if wal is not None:
            raise DatabaseRefused(f"{e.message}; {wal[1]}") from e
        raise
    finally:
        conn.close()
