"""What a tool brought by the user (an MCP server's tool, a Python function) declares about
itself, and the approval and resume policies that follow from it.

Built-in tools keep their own rules (xclaw/tools/approval.py). A declared tool carries a
`traits` attribute; the approval policy and the resume rules read it, so an MCP tool and a
Python tool follow the same write-ahead, approval and resume rules as `shell` does.

Approval (docs/tools.md):
    per-tool override `approval: ask | allow`   wins over everything below
    destructive                                  asked in every mode, yolo included
    yolo                                         runs
    read-only, from a trusted source             runs (ask and auto-edits)
    anything else                                asked
An MCP server not marked `trusted: true` cannot loosen approval with its annotations: its
`readOnlyHint` does not spare a question, its `destructiveHint` still adds one.

Resume: a read-only or idempotent call from a trusted source interrupted by a crash is run
again automatically; anything else gets the "may or may not have run" result and is asked
again if re-issued. An untrusted MCP server's `readOnlyHint` and `idempotentHint` do not
count here either: running a call twice is as much a loosening as running it unasked.
A per-tool `resume: retry | ask` overrides that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from xclaw.section import Default, Section

ApprovalRule = Literal["ask", "allow"]
ResumeRule = Literal["retry", "ask"]


class ToolPolicy(Section):
    """A per-tool override from xclaw.yaml (`tool_policies: {<tool>: {approval, resume}}`)."""

    approval: Annotated[ApprovalRule | None, Default("the tool's traits")] = None
    resume: Annotated[ResumeRule | None, Default("the tool's traits")] = None


NO_OVERRIDE = ToolPolicy()


@dataclass(frozen=True, slots=True)
class ToolTraits:
    source: str  # "mcp:<server>" | "python:<module:function>"
    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    open_world: bool = False
    # The source's hints may loosen approval (Python tools: your own code; MCP: trusted: true).
    trusted: bool = False
    policy: ToolPolicy = NO_OVERRIDE

    @property
    def retry_on_resume(self) -> bool:
        if self.policy.resume is not None:
            return self.policy.resume == "retry"
        return self.trusted and (self.read_only or self.idempotent)

    @property
    def resume_note(self) -> str:
        """Why hints that would have a call run again after a crash do not count (or "")."""
        if self.policy.resume is not None or self.trusted:
            return ""
        hints = [
            h for h, on in (("read-only", self.read_only), ("idempotent", self.idempotent)) if on
        ]
        if not hints:
            return ""
        said = " and ".join(hints) + (" hints do" if len(hints) > 1 else " hint does")
        return f"{self.source} is not trusted: its {said} not count"

    @property
    def trusted_read_only(self) -> bool:
        """Read-only as far as xclaw acts on it (no snapshot, no side-effect turn, no outside
        effects mark): the hint counts only from a trusted source, like every loosening."""
        return self.read_only and self.trusted

    @property
    def outside_effects(self) -> bool:
        """Effects that rollback and fork cannot undo: an MCP tool that is not (trusted)
        read-only, or one that reaches the open world. (A Python tool runs in-process: it is
        marked only when it says it is not read-only.)"""
        return not self.trusted_read_only or self.open_world

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "readOnly": self.read_only,
            "idempotent": self.idempotent,
            "destructive": self.destructive,
            "openWorld": self.open_world,
            "trusted": self.trusted,
            "approval": self.policy.approval,
            "resume": "retry" if self.retry_on_resume else "ask",
            "outsideEffects": self.outside_effects,
        }


def approval_for(traits: ToolTraits, tool_name: str, mode: str) -> tuple[str, str]:
    """(kind, reason): kind is allow | ask for a declared tool under approval `mode`."""
    if traits.policy.approval == "allow":
        return "allow", ""
    if traits.policy.approval == "ask":
        return "ask", f"{tool_name}: xclaw.yaml says always ask"
    if traits.destructive:
        return "ask", f"{tool_name} is marked destructive by {traits.source}"
    if mode == "yolo":
        return "allow", ""
    if traits.trusted_read_only:
        return "allow", ""
    if traits.read_only:
        return "ask", (
            f"{traits.source} is not trusted: its read-only hint does not spare this question "
            "(trusted: true in xclaw.yaml)"
        )
    return "ask", f"{tool_name} may change things outside the workspace ({traits.source})"
