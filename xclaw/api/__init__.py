"""xclaw as a library (docs/python-api.md): `open` drives sessions in this process with the
runtime `xclaw serve` runs; `connect` drives them through a running gateway; both give the
same Agent and Session, and a run's events are the gateway's typed frames. `sync` is the
same for code without an event loop (scripts, notebooks)."""

from __future__ import annotations

from xclaw.api.base import Agent, Approve, Event, Events, RunResult, Session
from xclaw.api.local import open

__all__ = ["Agent", "Approve", "Event", "Events", "RunResult", "Session", "open"]
