"""What open_store returns is the store's roles, each an object of its own over the backend's
connection layer (xclaw/store/roles.py), on both backends: no role's method on the store itself
(the hub is gone), and no role carries another's."""

from __future__ import annotations

from xclaw.store import base
from xclaw.store.base import Store

ROLES = {
    "record": base.Record,
    "snapshots": base.SnapshotStore,
    "leases": base.LeaseStore,
    "teams": base.TeamStore,
    "budgets": base.BudgetStore,
    "schedules": base.ScheduleStore,
}
# Names a role and a method share (LeaseStore.leases, ScheduleStore.schedules), and what
# every role has: where its data is, and the one write path.
SHARED = {"url", "write", *ROLES}


def methods(protocol: type) -> set[str]:
    return {n for c in protocol.__mro__ for n in vars(c) if not n.startswith("_")} - {"url"}


def test_the_store_carries_no_role_method(store: Store) -> None:
    flat = {m for p in ROLES.values() for m in methods(p)} - SHARED
    assert sorted(m for m in flat if hasattr(store, m)) == []
    assert isinstance(store, Store)


def test_each_role_is_an_object_of_its_own(store: Store) -> None:
    roles = {name: getattr(store, name) for name in ROLES}
    assert len({id(r) for r in roles.values()} | {id(store)}) == len(ROLES) + 1
    for name, role in roles.items():
        assert isinstance(role, ROLES[name])
        others = {m for n, p in ROLES.items() if n != name for m in methods(p)}
        others -= methods(ROLES[name]) | SHARED
        assert sorted(m for m in others if hasattr(role, m)) == [], name


def test_every_role_writes_through_the_one_write_path(store: Store) -> None:
    """`write` is the connection layer's, the same from the record, the budgets and the
    schedules (base.WritePath): a value written through one is read through another."""
    from xclaw.store.steps.writes import SetBudget

    store.budgets.write(SetBudget(target="total", caps={"total_tokens_day": 10}))
    assert store.budgets.budget_rows()["total"].caps == {"total_tokens_day": 10}
    sid = store.record.create_session(title="t").session_id
    assert store.schedules.write.__func__ is store.record.write.__func__  # type: ignore[attr-defined]
    assert store.record.get_session(sid).title == "t"
