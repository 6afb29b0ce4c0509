"""The durable record: the Store protocol, its backends, and `open_store` to pick one."""

from __future__ import annotations

from pathlib import Path

from xclaw.errors import StoreError
from xclaw.store.base import RollbackResult, Store

__all__ = ["RollbackResult", "Store", "open_store"]


def open_store(url_or_path: str | Path) -> Store:
    """A path (or sqlite:///path) opens the embedded SQLite store, creating or upgrading the
    database; a postgresql:// URL will select the PostgreSQL backend once it exists."""
    text = str(url_or_path).strip()
    if text.startswith(("postgresql://", "postgres://")):
        raise StoreError(
            "PostgreSQL support not installed yet: this xclaw only has the SQLite backend. "
            "Use a file path for --db / XCLAW_DB."
        )
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]  # sqlite:///rel.db, sqlite:////abs/path.db
    elif "://" in text:
        raise StoreError(f"unsupported database URL {text!r}: use a file path or postgresql://")
    if not text:
        raise StoreError("no database given: pass --db PATH or set XCLAW_DB")
    from xclaw.store.sqlite import SQLiteStore  # imported lazily: no work at import time

    return SQLiteStore(Path(text))
