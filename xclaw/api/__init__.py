"""[api] xclaw as a library (docs/python-api.md): `open` drives sessions in this process with the
runtime `xclaw serve` runs; `connect` drives them through a running gateway; both give the
same Agent and Session, and a run's events are the gateway's typed frames. `sync` is the
same for code without an event loop (scripts, notebooks).

Importing the package stays light: the terminal client stands on its reconnect loop
(xclaw/api/connection.py) without the runtime `open` brings; each name here is imported when
it is first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xclaw.api.base import Agent, Approve, Event, Events, RunResult, Session
    from xclaw.api.local import open

__all__ = ["Agent", "Approve", "Event", "Events", "RunResult", "Session", "open"]

_WHERE = {name: "xclaw.api.base" for name in __all__} | {"open": "xclaw.api.local"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'xclaw.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
