"""[store] Roles: what `open_store` returns, the store as the roles its callers take.

Each role (store/base.py: the record, the snapshots, the leases, the teams, the budgets, the
schedules) is an object of its own, built over the backend's one connection layer (SQLite: the
writer thread and the per-thread readers; PostgreSQL: the pool), which this object owns and
closes. It carries no role's methods itself: a caller takes `store.record`, `store.leases`, …
and hands on only those (tests/test_layering.py checks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Self, TypeVar

if TYPE_CHECKING:
    from xclaw.store.base import (
        BudgetStore,
        LeaseStore,
        Record,
        ScheduleStore,
        SnapshotStore,
        TeamStore,
    )

D = TypeVar("D")


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
