"""`sandbox:` in xclaw.yaml: how the tools run commands and read files (shell timeout, output
cap, OS isolation, network) and what workspace snapshots take (docs/workspace.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from xclaw.section import Default, Flag, Number, Section, Strings, Whole

# Patterns left out of workspace snapshots unless `sandbox.ignore` replaces them.
DEFAULT_IGNORE = (".git/", "node_modules/")

IsolationMode = Literal["auto", "bwrap", "none"]


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


# The defaults, for the tools and snapshot settings built without xclaw.yaml (tests, tools).
SANDBOX_DEFAULTS = SandboxSettings()
