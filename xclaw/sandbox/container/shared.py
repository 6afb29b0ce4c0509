"""[sandbox/container] One `Containers` per workspace root and policy in a process: the shell tool,
the workspace snapshots and the runtime's takeover must see the same per-session epoch and step."""

from __future__ import annotations

import threading
from pathlib import Path

from xclaw.errors import ConfigError
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy
from xclaw.sandbox.setup import SandboxSetup

_lock = threading.Lock()
_shared: dict[tuple[Path, SandboxPolicy], Containers] = {}


def containers_for(setup: SandboxSetup, root: Path | None = None) -> Containers:
    """The containers of the sandbox's setup (sandbox.isolation: container) under `root` (by
    default its workspace root), or ConfigError naming what is missing: an image, podman, a
    runtime that works here."""
    policy = SandboxPolicy.from_settings(setup.sandbox)
    if not policy.image:
        raise ConfigError(
            "sandbox.isolation is container, but sandbox.image names no image "
            "(an OCI image podman has, e.g. one made with podman import: docs/containers.md)"
        )
    podman = find_podman()
    place = root or setup.workspace_root
    if place is None:
        raise ConfigError("sandbox.isolation is container, but no workspace root is known")
    where = Path(place).expanduser().resolve()
    with _lock:
        found = _shared.get((where, policy))
        if found is None:
            found = _shared[(where, policy)] = Containers(podman, policy, where)
        return found
