"""DrivenStore is the step writer of one lease holder: it has exactly the methods of the
StepWriter role (the writes of a session's record), each written out (no attribute proxy),
each reaching the store with its arguments and the view's lease. Reads and everything else
go to the store itself: they need no fencing token."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from xclaw.store.base import StepWriter
from xclaw.store.leases import DrivenStore, Lease
from xclaw.store.steps.writes import BeginStep


class _Recording:
    """Stands in for a store: every method call is recorded, not run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return name

        return call


def _role_methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in inspect.getmembers(StepWriter, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_view_is_the_step_writer_and_nothing_more() -> None:
    public = {n for n in vars(DrivenStore) if not n.startswith("_")} - {"store", "lease"}
    assert public == set(_role_methods())
    assert isinstance(DrivenStore(_Recording(), Lease("s", "a", 1, 0)), StepWriter)


def test_every_write_passes_through_with_the_lease() -> None:
    lease = Lease("sid", "worker-a", 7, 0)
    fake = _Recording()
    view = DrivenStore(fake, lease)
    for name, sig in _role_methods().items():
        args, kwargs = [], {}
        for p in list(sig.parameters.values())[1:]:
            if p.name == "lease":
                continue  # the view supplies it
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = f"<{p.name}>"
            else:
                args.append(f"<{p.name}>")
        fake.calls.clear()
        result = getattr(view, name)(*args, **kwargs)
        assert result == name  # the store's answer comes back
        [(called, got_args, got_kwargs)] = fake.calls
        assert called == name
        forwarded = dict(got_kwargs)
        got_lease = forwarded.pop("lease") if "lease" in forwarded else got_args[-1]
        assert got_lease is lease, name
        # Every argument given reaches the store (positionally or by name), nothing else.
        given = set(args) | set(kwargs.values())
        assert set(got_args) | set(forwarded.values()) >= given, name


def test_a_lease_named_by_the_caller_wins() -> None:
    mine, other = Lease("sid", "a", 7, 0), Lease("sid", "b", 8, 0)
    fake = _Recording()
    DrivenStore(fake, mine).write(BeginStep(session_id="sid", step=object()), other)
    assert fake.calls[0][2]["lease"] is other


def test_reads_are_not_the_view_s() -> None:
    with pytest.raises(AttributeError):
        DrivenStore(_Recording(), Lease("s", "a", 1, 0)).steps  # noqa: B018 - the test
