"""[store] The durable record: the Store protocol, its backends, and `open_store` to pick one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from xclaw.errors import StoreError
from xclaw.store.access import Access

if TYPE_CHECKING:
    from xclaw.store.base import RollbackResult, Store

__all__ = ["Access", "RollbackResult", "Store", "open_store"]


def __getattr__(name: str) -> Any:
    # The protocol (xclaw/store/base.py) imports the store's whole model; a process that only
    # reads its configuration (which imports xclaw.store.settings, hence this package), such
    # as `xclaw chat`, needs none of it.
    if name in ("RollbackResult", "Store"):
        from xclaw.store import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    url_or_path: str | Path,
    *,
    access: Access = Access.CREATE,
    blob_store: str | None = None,
    blob_grace_s: float | None = None,
) -> Store:
    """A path (or sqlite:///path) opens the embedded SQLite store, a postgresql:// URL the
    PostgreSQL store (several workers on one database). `access` says what may be done with
    what is there (store/access.py): READ opens an existing xclaw database and writes
    nothing; WRITE upgrades an existing one; CREATE also creates one where there is none.
    A file or database that is not xclaw's is refused (DatabaseRefused) under any access.
    `blob_store` (s3://BUCKET/PREFIX) keeps file contents in an object store instead of the
    database (store/blobs/objects.py)."""
    store = _open(url_or_path, access)
    try:
        store.snapshots.use_blob_store(blob_store, grace_s=blob_grace_s)
    except BaseException:
        store.close()
        raise
    return store


def _open(url_or_path: str | Path, access: Access) -> Store:
    text = str(url_or_path).strip()
    if text.startswith(("postgresql://", "postgres://")):
        try:
            from xclaw.store.postgres.store import PostgresStore
        except ImportError as e:  # psycopg is the optional extra `postgres`
            raise StoreError(
                "PostgreSQL support needs psycopg: pip install 'xclaw[postgres]' "
                f"({e.name or e} is missing)"
            ) from e
        return PostgresStore(text, access=access)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]  # sqlite:///rel.db, sqlite:////abs/path.db
    elif "://" in text:
        raise StoreError(f"unsupported database URL {text!r}: use a file path or postgresql://")
    if not text:
        raise StoreError("no database given: pass --db PATH or set XCLAW_DB")
    from xclaw.store.sqlite.store import SQLiteStore  # imported lazily: no work at import time

    return SQLiteStore(Path(text), access=access)
