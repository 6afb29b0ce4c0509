"""[sandbox] What the sandbox is built from: its own settings section and the few places it must
hide.

The isolation, the containers and the workspaces receive this value, never the whole
`Settings` (xclaw/config/settings.py builds it: `Settings.sandbox_setup()`), so the sandbox does not
reach up into the configuration it is part of.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xclaw.sandbox.settings import SANDBOX_DEFAULTS, SandboxSettings


@dataclass(frozen=True, slots=True)
class SandboxSetup:
    """`sandbox:` of xclaw.yaml, and where xclaw keeps what a command must not read.

    `home`, `workspace_root`, `database`: hidden from a sandboxed command (None or "": none
    known, as for tools built without settings); `workspace_root` is also where the
    containers' sessions live."""

    sandbox: SandboxSettings = SANDBOX_DEFAULTS
    home: Path | None = None
    workspace_root: Path | None = None
    database: str = ""


# The defaults: tools and snapshots built without xclaw.yaml (tests, `xclaw tools`).
SANDBOX_SETUP_DEFAULTS = SandboxSetup()
