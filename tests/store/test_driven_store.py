"""DrivenStore writes out every Store method (no attribute proxy): each one reaches the
store with its arguments, and exactly the methods that write a session's record
(FENCED_METHODS) carry the view's lease."""

from __future__ import annotations

import inspect
from typing import Any

from xclaw.store.base import Store
from xclaw.store.leases import FENCED_METHODS, DrivenStore, Lease


class _Recording:
    """Stands in for a store: every method call is recorded, not run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args, kwargs))
            return name

        return call


def _protocol_methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in inspect.getmembers(Store, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_method_passes_through_and_only_record_writes_carry_the_lease() -> None:
    lease = Lease("sid", "worker-a", 7, 0)
    fake = _Recording()
    view = DrivenStore(fake, lease)
    methods = _protocol_methods()
    assert set(methods) >= FENCED_METHODS
    for name, sig in methods.items():
        args, kwargs = [], {}
        for p in list(sig.parameters.values())[1:]:
            if p.name == "lease" and name in FENCED_METHODS:
                continue  # the view supplies it
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = f"<{p.name}>"
            else:
                args.append(f"<{p.name}>")
        fake.calls.clear()
        result = getattr(view, name)(*args, **kwargs)
        if sig.return_annotation != "None":
            assert result == name  # the store's answer comes back
        [(called, got_args, got_kwargs)] = fake.calls
        assert called == name
        forwarded = dict(got_kwargs)
        if name in FENCED_METHODS:
            assert forwarded.pop("lease") is lease, name
        else:
            assert "lease" not in forwarded, name
        # Every argument given reaches the store (positionally or by name), nothing else.
        given = set(args) | set(kwargs.values())
        assert set(got_args) | set(forwarded.values()) >= given, name


def test_a_lease_named_by_the_caller_wins() -> None:
    mine, other = Lease("sid", "a", 7, 0), Lease("sid", "b", 8, 0)
    fake = _Recording()
    DrivenStore(fake, mine).begin_step("sid", object(), lease=other)
    assert fake.calls[0][2]["lease"] is other


def test_url_is_the_stores() -> None:
    class _WithUrl(_Recording):
        url = "db.sqlite"

    assert DrivenStore(_WithUrl(), Lease("s", "a", 1, 0)).url == "db.sqlite"
