"""[runtime] A session runs under the sandbox policy it started with (docs/containers.md, "The
pinned policy"): where its shell commands run — on the worker's host, or in the session's own
container — and, for a container, its image, limits and network. A container worker records its
policy in `sessions.metadata["sandbox"]` at the session's first run there; every later run, here or
on a worker that takes it over, runs under exactly that policy or refuses with the reason: a worker
without podman never runs a container session's commands on its host, nor under another image or
other limits. Host workers record nothing (nothing recorded reads as the host, and the default path
costs no write); between two host workers nothing is refused — which of bubblewrap or a plain
process runs a command is the approval policy's business there, as before. Pure: the runtime reads
the record and acts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xclaw.sandbox.container.policy import SandboxPolicy

SANDBOX_KEY = "sandbox"


def recorded_policy(metadata: Mapping[str, Any]) -> SandboxPolicy | None:
    return SandboxPolicy.from_json(metadata.get(SANDBOX_KEY))


def with_policy(metadata: Mapping[str, Any], policy: SandboxPolicy) -> dict[str, Any]:
    return {**metadata, SANDBOX_KEY: policy.to_json()}


def refusal(recorded: SandboxPolicy | None, mine: SandboxPolicy, worker: str) -> str | None:
    """Why this worker (running `mine`) may not run a session recorded with `recorded`;
    None: it may (nothing recorded yet, the same policy, or two host policies)."""
    if recorded is None or recorded == mine:
        return None
    if recorded.kind == "host" and mine.kind == "host":
        return None
    return (
        f"[worker] this session runs under its sandbox policy, {recorded.words()}; worker "
        f"{worker} runs {mine.words()}, so it does not drive it: run it on a worker with the "
        "session's policy (the same sandbox settings in xclaw.yaml), or fork it there"
    )
