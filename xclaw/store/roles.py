"""[store] Roles: what `open_store` returns, the store as the roles its callers take.

Each role (store/base.py: the record, the snapshots, the leases, the teams, the budgets, the
schedules) is an object of its own, built over the backend's one connection layer (SQLite: the
writer thread and the per-thread readers; PostgreSQL: the pool), which this object owns and
closes. It carries no role's methods itself: a caller takes `store.record`, `store.leases`, …
and hands on only those (tests/test_layering.py checks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from xclaw.store.steps.writes import TxBodies, Writes, kind_of, prepare

if TYPE_CHECKING:
    from xclaw.store.base import (
        BudgetStore,
        LeaseStore,
        Record,
        ScheduleStore,
        SnapshotStore,
        TeamStore,
    )
    from xclaw.store.leases import Lease

D = TypeVar("D")
T = TypeVar("T")
R = TypeVar("R")


class DbBase:
    """What both connection layers share: the clock, and the one write path — a write value
    made into its transaction body by the roles' bodies (`bodies`, set by the store once its
    roles are made) and run as one transaction of its kind."""

    bodies: TxBodies

    def __init__(self, clock: Callable[[], int]) -> None:
        # Milliseconds since the epoch; tests pass a fixed clock to put steps in one ms.
        self._clock = clock

    def _now(self) -> int:
        return int(self._clock())

    def _write(self, fn: Callable[[Any], T], kind: Any) -> T:
        raise NotImplementedError

    def write(self, w: Writes[R], lease: Lease | None = None) -> R:
        """Apply one write value (store/steps/writes.py) as its own transaction, fenced by
        `lease` when given, committed as its kind's row of writes.SYNC says; its values
        encoded here, before the transaction. The one way the store is written."""
        body: Callable[[Any], R] = prepare(self.bodies, w, lease)
        return self._write(body, kind_of(w))


class StoreRoles(Generic[D]):
    """The roles of one database and the connection layer `db` they share."""

    def __init__(
        self,
        db: D,
        *,
        url: str,
        record: Record,
        snapshots: SnapshotStore,
        leases: LeaseStore,
        teams: TeamStore,
        budgets: BudgetStore,
        schedules: ScheduleStore,
    ) -> None:
        self.db = db
        self._url = url
        self._record = record
        self._snapshots = snapshots
        self._leases = leases
        self._teams = teams
        self._budgets = budgets
        self._schedules = schedules

    @property
    def url(self) -> str:
        return self._url

    @property
    def record(self) -> Record:
        """Sessions and steps, read and written (the StepWriter of a run among them)."""
        return self._record

    @property
    def snapshots(self) -> SnapshotStore:
        return self._snapshots

    @property
    def leases(self) -> LeaseStore:
        return self._leases

    @property
    def teams(self) -> TeamStore:
        return self._teams

    @property
    def budgets(self) -> BudgetStore:
        return self._budgets

    @property
    def schedules(self) -> ScheduleStore:
        return self._schedules

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._url!r})"
