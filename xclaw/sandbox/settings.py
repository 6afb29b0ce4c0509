"""[sandbox] `sandbox:` in xclaw.yaml: how the tools run commands and read files (shell timeout,
output cap, OS isolation, network) and what workspace snapshots take (docs/workspace.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from xclaw.config.section import Default, Flag, Number, Section, Strings, Text, Whole

# Patterns left out of workspace snapshots unless `sandbox.ignore` replaces them.
DEFAULT_IGNORE = (".git/", "node_modules/")

IsolationMode = Literal["auto", "bwrap", "none", "container"]


class SandboxSettings(Section):
    shell_timeout_s: Annotated[Number, Field(gt=0)] = 120.0
    # Characters of a tool's output kept (the rest is cut, saying so).
    output_cap: Annotated[Whole, Field(ge=1)] = 30_000
    # Parallel sub-agents' side-effecting tools overlap (snapshots then inexact).
    parallel_side_effects: Flag = False
    isolation: IsolationMode = "auto"
    network: Flag = False
    snapshots: Flag = True
    ignore: Annotated[Strings, Default("`.git/`, `node_modules/`")] = DEFAULT_IGNORE
    max_file_mb: Annotated[Number, Field(gt=0)] = 50.0
    max_snapshot_mb: Annotated[Number, Field(gt=0)] = 500.0
    # `isolation: container` (docs/containers.md): the OCI image each session's container is
    # made from, and its limits. Recorded with the session (its pinned sandbox policy).
    image: Text | None = None
    memory_mb: Annotated[Whole, Field(ge=16)] = 2048
    cpus: Annotated[Number, Field(gt=0)] = 2.0
    pids: Annotated[Whole, Field(ge=16)] = 512
    # A session's container is stopped this long after its lease expired with no run.
    container_grace_s: Annotated[Number, Field(ge=0)] = 900.0


# The defaults, for the tools and snapshot settings built without xclaw.yaml (tests, tools).
SANDBOX_DEFAULTS = SandboxSettings()
