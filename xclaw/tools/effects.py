"""[tools] Effect classes, compensations and settle checks: what a tool's call does beyond reading,
how a rollback undoes it, and how its outcome is found after a crash (docs/tools.md,
"Effects outside the workspace").

Every tool has an effect class:

    read_only      no effect (reads)
    workspace      changes the session's workspace files: undone by its snapshots
    compensable    reaches outside the workspace; a declared compensation undoes it
    irreversible   reaches outside the workspace; nothing undoes it (an email sent)

A tool may declare a *settle check*: after a crash cut one of its calls short, the check says
whether its effect happened (done), did not (not done) or cannot tell (unknown). The runtime
asks it before anyone is asked (xclaw/runtime/settle.py), and records its answer as a step.

The seam is general (a `Tool` says it through `find_outcome`, `compensation`, `compensate`):
Python tools declare them with `@xclaw.tool(...)`, MCP tools through `tool_policies`, and any
other tool (a remote agent's call) may implement them itself.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xclaw.tools.base import Tool

# How long a compensation or a settle check may take before it counts as failed (unknown).
DEFAULT_EFFECT_TIMEOUT_S = 60.0


class EffectClass(enum.StrEnum):
    READ_ONLY = "read_only"
    WORKSPACE = "workspace"
    COMPENSABLE = "compensable"
    IRREVERSIBLE = "irreversible"

    @property
    def outside(self) -> bool:
        """Reaches beyond the workspace: marked in the record before the call runs."""
        return self in (EffectClass.COMPENSABLE, EffectClass.IRREVERSIBLE)


class Outcome(enum.StrEnum):
    """What a settle check found of an interrupted call's effect."""

    DONE = "done"
    NOT_DONE = "not_done"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Evidence:
    """A settle check's answer: the outcome, what was asked in words (recorded with it), and
    for a done call the result the model is told."""

    outcome: Outcome
    detail: str
    result: str | None = None


@dataclass(frozen=True, slots=True)
class Compensation:
    """What undoes one recorded call, known before it runs (the rollback's preview shows it,
    the plan records it): `action` names what runs, `args` what it is given, `idempotent`
    whether a compensation cut short by a crash may simply run again."""

    action: str
    args: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"action": self.action, "args": dict(self.args), "idempotent": self.idempotent}

    @classmethod
    def from_json(cls, data: Any) -> Compensation:
        if not isinstance(data, Mapping) or not isinstance(data.get("action"), str):
            raise ValueError(f"not a compensation: {data!r}")
        args = data.get("args")
        return cls(
            data["action"],
            dict(args) if isinstance(args, Mapping) else {},
            bool(data.get("idempotent")),
        )


class CompensationUnavailable(Exception):
    """The tool declares a compensation, but it cannot be built for this call (the recorded
    output lacks what its arguments name): the effect is then one nothing undoes."""


def effect_of(tool: Tool) -> EffectClass:
    """A tool's effect class: declared (`effect`), else derived from what it says of itself."""
    declared = getattr(tool, "effect", None)
    if declared is not None:
        return EffectClass(declared)
    if tool.read_only:
        return EffectClass.READ_ONLY
    if getattr(tool, "outside_effects", False):
        return EffectClass.IRREVERSIBLE
    return EffectClass.WORKSPACE


def recorded_output(text: Any) -> Any:
    """A call's recorded output as a compensation receives it: the JSON object or list a tool
    returned (recorded as its JSON text), otherwise the text itself."""
    import json

    if isinstance(text, Mapping) and "content" in text:  # a result with images
        text = text["content"]
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict | list) else text


def outcome_of(answer: Any) -> Outcome | None:
    """A settle check's answer in the words it may use: True / "done", False / "not_done",
    None / "unknown". Anything else: None (the check's answer is not understood)."""
    if answer is True:
        return Outcome.DONE
    if answer is False:
        return Outcome.NOT_DONE
    if answer is None:
        return Outcome.UNKNOWN
    if isinstance(answer, Outcome):
        return answer
    if isinstance(answer, str):
        word = answer.strip().lower().replace(" ", "_").replace("-", "_")
        try:
            return Outcome(word)
        except ValueError:
            return None
    return None


_PLACE = re.compile(r"\{(input|output)((?:\.[A-Za-z0-9_\-]+)*)\}")


def fill_template(value: Any, call_input: Any, call_output: Any) -> Any:
    """`{input.x.y}` / `{output.id}` in a configured argument, from a call's recorded input
    and output: a string that is one placeholder takes the value as it is (a number stays a
    number), placeholders inside a string are written into it; dicts and lists are filled
    throughout. KeyError naming the path when the call has no such value."""
    if isinstance(value, Mapping):
        return {k: fill_template(v, call_input, call_output) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_template(v, call_input, call_output) for v in value]
    if not isinstance(value, str):
        return value
    whole = _PLACE.fullmatch(value)
    if whole:
        return _lookup(whole, call_input, call_output)
    return _PLACE.sub(lambda m: _as_text(_lookup(m, call_input, call_output)), value)


def _lookup(m: re.Match[str], call_input: Any, call_output: Any) -> Any:
    where, path = m.group(1), m.group(2)
    node = call_input if where == "input" else call_output
    for part in [p for p in path.split(".") if p]:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(f"{where}{path}")
    return node


def _as_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
