"""[store] Role: what every role of the store stands on — the backend's one connection layer
(store/roles.py `Db`: SQLite's writer thread and readers, PostgreSQL's pool), its dialect and
its clock, and the store's one write path, `write(value)`, reached from every role the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from xclaw.store.dialect import Dialect
    from xclaw.store.leases import Lease
    from xclaw.store.steps.stream import WriteStream
    from xclaw.store.steps.writes import Kind, Writes

T = TypeVar("T")
R = TypeVar("R")


class Db(Protocol):
    """The connection layer of one backend: one transaction per call, each on the backend's
    own connections (SqliteDb in store/sqlite/store.py, PgDb in store/postgres/store.py)."""

    _dialect: Dialect

    @property
    def url(self) -> str: ...

    @property
    def commits(self) -> int: ...

    @property
    def writer_busy_s(self) -> float | None: ...

    def _write(self, fn: Callable[[Any], T], kind: Kind) -> T:
        """fn in one write transaction, committed as `kind`'s row of writes.SYNC says."""
        ...

    def _read(self, fn: Callable[[Any], T], *, snapshot: bool = False) -> T:
        """fn on a read connection; `snapshot`: its statements see one commit."""
        ...

    def _now(self) -> int: ...

    def write(self, w: Writes[R], lease: Lease | None = None) -> R:
        """The one write path (store/base.py WritePath)."""
        ...

    def write_stream(self, lease: Lease | None = None) -> WriteStream: ...


class Role:
    """One role of the store (the record, the snapshots, the leases, …) over the connection
    layer `db`, which the store that made it owns and closes."""

    def __init__(self, db: Db) -> None:
        self._db = db
        self._dialect: Dialect = db._dialect

    @property
    def url(self) -> str:
        """Where the data lives, for banners and messages (a path or a redacted URL)."""
        return self._db.url

    def write(self, w: Writes[R], lease: Lease | None = None) -> R:
        """Apply one write value (store/steps/writes.py): the connection layer's one write
        path, whichever role it is reached from."""
        return self._db.write(w, lease)

    def _write(self, fn: Callable[[Any], T], kind: Kind) -> T:
        return self._db._write(fn, kind)

    def _read(self, fn: Callable[[Any], T], *, snapshot: bool = False) -> T:
        return self._db._read(fn, snapshot=snapshot)

    def _now(self) -> int:
        return self._db._now()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db.url!r})"
