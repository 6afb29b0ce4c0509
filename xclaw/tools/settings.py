"""[tools] What xclaw.yaml says about the tools: `approval:` (docs/approval.md), `tools:` (Python
tools) and `tool_policies:` (per-tool overrides for MCP and Python tools, docs/tools.md)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from xclaw.config.section import Default, Flag, Number, Section, Strings
from xclaw.tools.traits import ToolPolicy

ApprovalMode = Literal["ask", "auto-edits", "yolo"]

# Commands the shell tool may run without asking (first word), unless approval mode says more.
DEFAULT_SAFE_COMMANDS = (
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "grep",
    "find",
    "sort",
    "uniq",
    "date",
    "whoami",
    "stat",
    "file",
    "diff",
    "du",
    "df",
    "tree",
    "true",
    "sleep",
)
# Refused outright, never even asked.
DEFAULT_DENY = (
    r"rm\s+-[a-zA-Z]*r[a-zA-Z]*f?\s+/(\s|$)",
    r"mkfs",
    r":\(\)\s*\{",
    r"dd\s+.*of=/dev/",
    r"shutdown|reboot|halt\b",
)


class ApprovalSettings(Section):
    mode: ApprovalMode = "ask"
    # An unanswered approval counts as a denial after this long (None: wait).
    timeout_s: Annotated[Number, Field(gt=0)] | None = None
    # A person who approves a call may give the input it runs with instead of the model's
    # (recorded as edited, the original kept; docs/approval.md).
    allow_edits: Flag = True
    safe_commands: Annotated[Strings, Default("`ls`, `cat`, `grep`, …")] = DEFAULT_SAFE_COMMANDS
    deny: Annotated[Strings, Default("`mkfs`, `rm -rf /`, …")] = DEFAULT_DENY

    @field_validator("deny")
    @classmethod
    def _patterns(cls, deny: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in deny:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(
                    f"holds {pattern!r}, which is not a regular expression: {e}"
                ) from e
        return deny


class ToolSettings(Section):
    """The top-level keys the tools read."""

    approval: ApprovalSettings = ApprovalSettings()
    # Python tools, 'module:function' (docs/tools.md).
    tools: Strings = ()
    tool_policies: dict[str, ToolPolicy] = Field(default_factory=dict)
