"""One `Containers` per workspace root and policy in a process: the shell tool, the workspace
snapshots and the runtime's takeover must see the same per-session epoch and step."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from xclaw.errors import ConfigError
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy

if TYPE_CHECKING:
    from xclaw.config import Settings

_lock = threading.Lock()
_shared: dict[tuple[Path, SandboxPolicy], Containers] = {}


def containers_for(settings: Settings, root: Path | None = None) -> Containers:
    """The containers of `settings` (sandbox.isolation: container), or ConfigError naming
    what is missing: an image, podman, a runtime that works here."""
    policy = SandboxPolicy.from_settings(settings.sandbox)
    if not policy.image:
        raise ConfigError(
            "sandbox.isolation is container, but sandbox.image names no image "
            "(an OCI image podman has, e.g. one made with podman import: docs/containers.md)"
        )
    podman = find_podman()
    where = Path(root or settings.workspace_root).expanduser().resolve()
    with _lock:
        found = _shared.get((where, policy))
        if found is None:
            found = _shared[(where, policy)] = Containers(podman, policy, where)
        return found
