"""[store] How a command may use the database it is pointed at, and the words for each refusal.

A database is touched only when the user means to write to it: a reading command (sessions,
steps, fsck without --repair, …) opens an existing xclaw database at this xclaw's schema
version and writes nothing — no schema, no WAL switch, no chmod, no directories. Writing
commands upgrade an older xclaw database; only those meant to start one (serve, run, import)
create a database where there is none. No command writes into a database, or a file, that
is not xclaw's. Both backends decide through `check_found` (docs/storage.md, "Who may write").
"""

from __future__ import annotations

import enum

from xclaw.errors import DatabaseRefused, SchemaTooNew
from xclaw.store import migrations


class Access(enum.Enum):
    READ = "read"  # an existing xclaw database at this version; nothing is written
    WRITE = "write"  # an existing xclaw database; an older one is upgraded in place
    CREATE = "create"  # as WRITE, or a new database where there is none (or an empty one)


# The command that upgrades an older database in place, named in the refusal.
UPGRADE_COMMAND = "xclaw fsck --repair"


def check_found(where: str, version: int | None, access: Access) -> None:
    """Whether `access` may go on with what is at `where`: no database (`version` None), an
    empty one (0: an empty file, a SQLite file or PostgreSQL schema without tables), or
    xclaw's at `version`. Raises DatabaseRefused (SchemaTooNew) with the reason; the
    caller has written nothing yet."""
    created_by = (
        "A database is created by the first `xclaw serve`, `xclaw run` or `xclaw import`; "
        "other commands never create one."
    )
    if version is None:
        if access is not Access.CREATE:
            raise DatabaseRefused(f"no database at {where}; check --db (or XCLAW_DB). {created_by}")
        return
    if version == 0:
        if access is not Access.CREATE:
            raise DatabaseRefused(f"{where} holds no xclaw tables. {created_by}")
        return
    latest = migrations.LATEST_VERSION
    if version > latest:
        raise too_new(where, version)
    if version < latest and access is Access.READ:
        raise DatabaseRefused(
            f"{where} was written by an older xclaw (schema version {version}; this xclaw "
            f"reads version {latest}) and a reading command does not upgrade it. "
            f"Upgrade it in place with `{UPGRADE_COMMAND} --db {where}` (or start "
            "`xclaw serve` on it), then run this command again."
        )


def too_new(where: str, version: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"{where} has schema version {version}, but this xclaw only knows versions up to "
        f"{migrations.LATEST_VERSION}: it was written by a newer xclaw. Upgrade xclaw "
        "(pip install -U xclaw) or point --db at another database."
    )


def not_xclaw(where: str, why: str) -> DatabaseRefused:
    """A file or database that is not xclaw's: refused before anything is written to it."""
    return DatabaseRefused(f"{where} is not a usable xclaw database: {why}")
