"""[tools] What the built-in tools and the approval policy are built from: their own settings, not
the whole `Settings` (xclaw/config/settings.py builds it: `Settings.tool_setup()`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xclaw.sandbox.setup import SANDBOX_SETUP_DEFAULTS, SandboxSetup
from xclaw.tools.a2a_settings import RemoteAgent
from xclaw.tools.settings import ApprovalSettings

# `approval:` as xclaw.yaml leaves it.
APPROVAL_DEFAULTS = ApprovalSettings()


@dataclass(frozen=True, slots=True)
class ToolSetup:
    """`approval:`, the sandbox the shell runs in, what the shell must not pass on or print
    (`secret_env` names, `secret_values` scrubbed), and a2a_call's remote agents."""

    sandbox: SandboxSetup = SANDBOX_SETUP_DEFAULTS
    approval: ApprovalSettings = APPROVAL_DEFAULTS
    secret_env: tuple[str, ...] = ()
    secret_values: tuple[str, ...] = ()
    a2a_agents: Mapping[str, RemoteAgent] = field(default_factory=dict)
