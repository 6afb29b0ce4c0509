"""What every gateway endpoint shares: settings, store, runtime, the access token, and the hub
of sockets attached to each session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xclaw.config import Settings
from xclaw.gateway.commands import CommandRunner
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.store.base import Store

Sink = Callable[[dict[str, Any]], None]


class Hub:
    """Sockets attached per session, so frames the gateway itself produces (a rollback's new
    history, made by a slash command or the HTTP API) reach every client of that session.
    The runtime's own frames travel through Runtime.subscribe instead."""

    def __init__(self) -> None:
        self._sinks: dict[str, set[Sink]] = {}

    def add(self, session_id: str, sink: Sink) -> None:
        self._sinks.setdefault(session_id, set()).add(sink)

    def remove(self, session_id: str, sink: Sink) -> None:
        sinks = self._sinks.get(session_id)
        if sinks is None:
            return
        sinks.discard(sink)
        if not sinks:
            del self._sinks[session_id]

    def broadcast(self, session_id: str, frame: dict[str, Any]) -> None:
        for sink in list(self._sinks.get(session_id, ())):
            sink(frame)

    def sockets(self) -> int:
        return sum(len(s) for s in self._sinks.values())


@dataclass
class Gateway:
    settings: Settings
    store: Store
    runtime: GatewayRuntime
    token: str
    hub: Hub = field(default_factory=Hub)
    commands: CommandRunner = field(init=False)

    def __post_init__(self) -> None:
        self.commands = CommandRunner(self.runtime, self.store)
