"""[agents] What a hook sees and what it may decide (docs/agents.md, "Hooks").

A hook is a function (sync or async) the agent calls before a tool call (`before_tool`),
after one (`after_tool`) or before a model call (`before_model`). It gets the event and
returns a decision — `allow()` (or None), `deny(reason)`, `rewrite(value)` or `ask(reason)`
(defer to a person) — which is recorded as a step before it is acted on, and read back from
the record on resume instead of asking the hook again: a crash never turns an answer into
another.

    def no_deletes(event: xclaw.BeforeTool) -> xclaw.HookDecision | None:
        if event.tool == "shell" and "rm " in event.input.get("command", ""):
            return xclaw.deny("this agent does not delete files")
        return None
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from xclaw.tools.base import ToolContext

DecisionKind = Literal["allow", "deny", "rewrite", "ask"]
Phase = Literal["before_tool", "after_tool", "before_model"]
PHASES: tuple[Phase, ...] = ("before_tool", "after_tool", "before_model")


@dataclass(frozen=True, slots=True)
class HookDecision:
    """A hook's answer. `reason`: what the model (deny) or the person (ask) is told;
    `value`: the new input of a tool call (before_tool), the new output the model sees
    (after_tool), or the instructions of this model call (before_model)."""

    kind: DecisionKind
    reason: str = ""
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": self.kind}
        if self.reason:
            out["reason"] = self.reason
        if self.kind == "rewrite":
            out["value"] = self.value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HookDecision:
        kinds: dict[Any, DecisionKind] = {
            "allow": "allow",
            "deny": "deny",
            "rewrite": "rewrite",
            "ask": "ask",
        }
        # A record this version cannot read never loosens anything: it denies.
        kind = kinds.get(data.get("decision"), "deny")
        return cls(kind, str(data.get("reason") or ""), data.get("value"))


ALLOW = HookDecision("allow")
# What the model is told of a result an after_tool hook withheld (the loop says it; the
# history rebuilt from the record says it again).
WITHHELD = "[withheld by a hook: {reason}]"


def allow() -> HookDecision:
    """No objection: the call goes on (the approval policy still applies)."""
    return ALLOW


def deny(reason: str) -> HookDecision:
    """Not run: the model is told `reason` (after a tool: instead of its output; before a
    model call: the turn ends with it)."""
    return HookDecision("deny", str(reason))


def rewrite(value: Any) -> HookDecision:
    """Go on with `value` instead: a tool call's new input (a mapping), the output the model
    sees after a tool (text), or the instructions of this model call (text)."""
    return HookDecision("rewrite", "", value)


def ask(reason: str = "") -> HookDecision:
    """Before a tool call: a person decides (an approval request, whatever the approval
    mode), told `reason`."""
    return HookDecision("ask", str(reason))


@dataclass(frozen=True, slots=True)
class BeforeTool:
    """A tool call about to run (its input already checked against the tool's schema)."""

    ctx: ToolContext
    tool: str
    input: Mapping[str, Any]
    call_id: str


@dataclass(frozen=True, slots=True)
class AfterTool:
    """A tool call that ran: `output` is what the model would be told."""

    ctx: ToolContext
    tool: str
    input: Mapping[str, Any]
    call_id: str
    output: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class BeforeModel:
    """A model call about to be made: the `iteration`-th of this turn (from 0), with these
    instructions; `last_message` is the user's message, or the last tool result's text."""

    ctx: ToolContext
    instructions: str
    iteration: int
    last_message: str = ""
    messages: int = 0


HookEvent: TypeAlias = BeforeTool | AfterTool | BeforeModel
HookFunction: TypeAlias = Callable[[Any], "HookDecision | Awaitable[HookDecision | None] | None"]


HookSpec: TypeAlias = "HookFunction | str | Iterable[HookFunction | str]"


class Hooks:
    """The hooks of an agent, by phase: each a function, a `module:function` path, or a list
    of them. Each phase's run in order; the first `deny` or `ask` decides, and a `rewrite`
    passes its value on to the next."""

    __slots__ = ("after_tool", "before_model", "before_tool", "refs")

    def __init__(
        self,
        *,
        before_tool: HookSpec = (),
        after_tool: HookSpec = (),
        before_model: HookSpec = (),
    ) -> None:
        self.refs: dict[int, str] = {}
        self.before_tool = self._functions("before_tool", before_tool)
        self.after_tool = self._functions("after_tool", after_tool)
        self.before_model = self._functions("before_model", before_model)

    def _functions(self, phase: str, given: HookSpec) -> tuple[HookFunction, ...]:
        from xclaw.agents.refs import function_ref, import_ref

        items: list[Any] = [given] if callable(given) or isinstance(given, str) else list(given)
        out: list[HookFunction] = []
        for item in items:
            if isinstance(item, str):
                fn = import_ref(item, f"hooks.{phase}")
                ref = item
            elif callable(item):
                fn, ref = item, function_ref(item)
            else:
                from xclaw.errors import ConfigError

                raise ConfigError(
                    f"hooks.{phase}: {item!r} is neither a function nor 'module:function'"
                )
            self.refs[id(fn)] = ref
            out.append(fn)
        return tuple(out)

    def __bool__(self) -> bool:
        return bool(self.before_tool or self.after_tool or self.before_model)

    def of(self, phase: Phase) -> tuple[HookFunction, ...]:
        fns: tuple[HookFunction, ...] = getattr(self, phase)
        return fns

    def ref(self, fn: HookFunction) -> str:
        """The function's import path (what the record and the digest name it by)."""
        return self.refs.get(id(fn), "?")

    def describe(self) -> dict[str, list[str]]:
        return {phase: [self.ref(fn) for fn in self.of(phase)] for phase in PHASES}


NO_HOOKS = Hooks()
