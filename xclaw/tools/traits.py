"""[tools] What a tool brought by the user (an MCP server's tool, a Python function) declares about
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

Effects (xclaw/tools/effects.py): a tool's effect class is declared (`effect`, a per-tool
`effect:` override) or follows from the rest: read-only from a trusted source reads; one
with a compensation (a Python tool's `compensate=`, an MCP tool's `compensate:` policy) is
compensable; any other is irreversible — an MCP tool nobody configured included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from xclaw.config.section import Default, Number, Section
from xclaw.tools.effects import DEFAULT_EFFECT_TIMEOUT_S, EffectClass

ApprovalRule = Literal["ask", "allow"]
ResumeRule = Literal["retry", "ask"]
EffectRule = Literal["read_only", "workspace", "compensable", "irreversible"]


class ServerCall(Section):
    """A call of another tool of the same MCP server, its arguments built from the recorded
    call: `{input.PATH}` and `{output.PATH}` (xclaw.tools.effects.fill_template)."""

    tool: Annotated[str, Field(min_length=1)]
    args: dict[str, Any] = Field(default_factory=dict)


class CompensatePolicy(ServerCall):
    """`tool_policies.<tool>.compensate`: the server's tool that undoes a call."""

    # Safe to run again when a crash cut it short (else a person decides).
    idempotent: bool = False


class SettlePolicy(ServerCall):
    """`tool_policies.<tool>.settle`: the server's lookup that says whether an interrupted
    call's effect is there."""

    # Where in the lookup's (JSON) answer the yes or no is; none: the whole answer (empty,
    # false, null: not done; anything else: done; an error: unknown).
    done_field: str | None = None


class ToolPolicy(Section):
    """A per-tool override from xclaw.yaml (`tool_policies: {<tool>: {approval, resume,
    effect, compensate, settle, idempotency_key, effect_timeout_s}}`)."""

    approval: Annotated[ApprovalRule | None, Default("the tool's traits")] = None
    resume: Annotated[ResumeRule | None, Default("the tool's traits")] = None
    effect: Annotated[EffectRule | None, Default("the tool's traits")] = None
    compensate: CompensatePolicy | None = None
    settle: SettlePolicy | None = None
    # The argument an MCP tool receives the call's idempotency key in (the remote side
    # deduplicates): an interrupted call is then run again automatically.
    idempotency_key: str | None = None
    effect_timeout_s: Annotated[Number, Field(gt=0)] = DEFAULT_EFFECT_TIMEOUT_S


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
    # Declared by the source (a Python tool's `effect=`); None: follows from the rest.
    declared_effect: EffectClass | None = None
    # A compensation is declared (a Python tool's `compensate=`, an MCP `compensate:` policy).
    compensable: bool = False
    # A settle check is declared (`settle=`, an MCP `settle:` policy).
    settle_check: bool = False
    # The tool receives an idempotency key the remote side deduplicates by.
    idempotency_key: bool = False

    @property
    def retry_on_resume(self) -> bool:
        if self.policy.resume is not None:
            return self.policy.resume == "retry"
        if self.idempotency_key:
            return True  # run again with the same key: the remote side deduplicates
        return self.trusted and (self.read_only or self.idempotent)

    @property
    def effect(self) -> EffectClass:
        """The effect class (xclaw/tools/effects.py): the policy's, the source's, or read-only
        (trusted), compensable (a compensation declared), else irreversible."""
        if self.policy.effect is not None:
            return EffectClass(self.policy.effect)
        if self.declared_effect is not None:
            return self.declared_effect
        if self.trusted_read_only:
            return EffectClass.READ_ONLY
        return EffectClass.COMPENSABLE if self.compensable else EffectClass.IRREVERSIBLE

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
        """Effects beyond the workspace, marked in the record before each call: a compensable
        or irreversible tool (an MCP tool that is not trusted read-only, a Python tool that is
        not read-only, unless declared `workspace`)."""
        return self.effect.outside

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
            "effect": self.effect.value,
            "settleCheck": self.settle_check,
            "idempotencyKey": self.idempotency_key,
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
