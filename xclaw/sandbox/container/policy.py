"""[sandbox/container] The sandbox policy a session runs under, as it is recorded with the session
and compared by every worker that runs it (xclaw/runtime/sandbox_pin.py): where its shell commands
run (`host`: this machine's processes, under bubblewrap or not; `container`: the session's own
container) and, for a container, its image, limits and network."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xclaw.sandbox.settings import SandboxSettings


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    kind: str  # "host" or "container"
    image: str | None = None
    memory_mb: int = 0
    cpus: float = 0.0
    pids: int = 0
    network: bool = False

    @classmethod
    def from_settings(cls, sandbox: SandboxSettings) -> SandboxPolicy:
        if sandbox.isolation != "container":
            return cls("host")
        return cls(
            "container",
            sandbox.image,
            sandbox.memory_mb,
            float(sandbox.cpus),
            sandbox.pids,
            sandbox.network,
        )

    def to_json(self) -> dict[str, Any]:
        if self.kind != "container":
            return {"kind": self.kind}
        return {
            "kind": self.kind,
            "image": self.image,
            "memory_mb": self.memory_mb,
            "cpus": self.cpus,
            "pids": self.pids,
            "network": self.network,
        }

    @classmethod
    def from_json(cls, data: Any) -> SandboxPolicy | None:
        """None for anything that is not one (metadata is read as found)."""
        if not isinstance(data, Mapping) or data.get("kind") not in ("host", "container"):
            return None
        if data["kind"] == "host":
            return cls("host")
        try:
            return cls(
                "container",
                str(data["image"]),
                int(data["memory_mb"]),
                float(data["cpus"]),
                int(data["pids"]),
                bool(data["network"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def words(self) -> str:
        if self.kind != "container":
            return "shell commands on the worker's host (bubblewrap or a plain process)"
        net = "network on" if self.network else "network off"
        return (
            f"a container of image {self.image} ({self.memory_mb} MB, {self.cpus:g} CPUs, "
            f"{self.pids} processes, {net})"
        )
