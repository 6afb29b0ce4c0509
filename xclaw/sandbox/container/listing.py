"""[sandbox/container] The processes a session left running between steps, as every client shows
them: the one function that computes the list (`session_processes`), whatever asks — the HTTP API,
the Python API, `/ps` in any chat client, the web page's session view, `xclaw container`.

Only a session's container keeps processes between steps (docs/containers.md); with
bubblewrap or no isolation every process a command starts ends with its step
(docs/security.md), so such a session answers an empty list and says why — an answer, not an
error. An empty list always comes with its reason; a non-empty one never needs one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xclaw.sandbox.container.procs import ContainerProcess

if TYPE_CHECKING:
    from xclaw.sandbox.container.lifecycle import Containers


@dataclass(frozen=True, slots=True)
class SessionProcesses:
    """What runs in a session's container that its commands started, as seen from this
    worker's host; `reason`: why the list is empty (None when it is not)."""

    session_id: str
    isolation: str  # sandbox.isolation here: container, bwrap, auto, none
    container: str | None = None  # its name; None: sessions run no container here
    state: str | None = None  # podman's word (running, exited, …); None: not on this host
    processes: list[ContainerProcess] = field(default_factory=list)
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire's object (xclaw/wire/http_bodies.py `SessionProcesses`)."""
        return {
            "sessionId": self.session_id,
            "isolation": self.isolation,
            "container": self.container,
            "state": self.state,
            "processes": [
                {
                    "pid": p.pid,
                    "stepId": step_id(p.seq),
                    "epoch": p.epoch,
                    "command": p.command,
                }
                for p in self.processes
            ],
            "reason": self.reason,
        }

    def text(self) -> str:
        """The list in words, as `/ps` shows it."""
        return processes_text(self.to_json())


def processes_text(listing: Mapping[str, Any]) -> str:
    """A list in words from the wire's object (`to_json`, or the Python API's
    `SessionProcesses.wire()`): what `/ps` answers, in any chat client and in an editor."""
    found = listing.get("processes") or []
    if not found:
        return f"[ps] no background process: {listing.get('reason')}"
    lines = [
        f"[ps] {len(found)} background process(es) in the session's container "
        f"{listing.get('container')}, each with the step that started it:"
    ]
    for p in found:
        lines.append(f"  {p.get('stepId') or '?':<6} pid {p.get('pid')!s:<8} {p.get('command')}")
    return "\n".join(lines)


def step_id(seq: int | None) -> str | None:
    """`s0005`; None for a process no step of xclaw's started."""
    return None if not seq else f"s{seq:04d}"


def session_processes(
    containers: Containers | None, session_id: str, isolation: str
) -> SessionProcesses:
    """The processes the commands of `session_id` left running in its container on this host,
    oldest first, with the reason when there is none. Blocking (podman, /proc): call it from
    a worker thread. The caller has checked the session exists and who may see it."""
    if containers is None:
        return SessionProcesses(
            session_id,
            isolation,
            reason=(
                f"this session runs no container (sandbox.isolation is {isolation}): every "
                "process a shell command starts ends with its step; with sandbox.isolation: "
                "container, background processes keep running between steps"
            ),
        )
    name = containers.name(session_id)
    info = containers.inspect(session_id)
    if info is None:
        return SessionProcesses(
            session_id,
            isolation,
            name,
            reason=(
                "the session has no container on this host: its first shell command makes one "
                "(on another worker's host, that worker's view lists its processes)"
            ),
        )
    if not info.running:
        return SessionProcesses(
            session_id,
            isolation,
            name,
            info.status,
            reason=(
                f"the session's container is stopped ({info.status}), and its processes with "
                "it; it starts again with the session's next command"
            ),
        )
    found = containers.processes(session_id, info)
    return SessionProcesses(
        session_id,
        isolation,
        name,
        info.status,
        found,
        None if found else "nothing its commands started runs in its container now",
    )
