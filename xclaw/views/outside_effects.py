"""[views] Steps whose effects reach outside the workspace.

Before a tool with effects outside the workspace runs (a compensable or irreversible tool:
xclaw/tools/effects.py), the agent loop records a `system_alert` step named `outside_effects`
naming the call and its effect class. Rollback restores the workspace files and deletes steps;
what a call did outside is undone only by its compensation (xclaw/runtime/rollbacks.py), and an
email sent stays sent. Fork copies a prefix of the steps and none of the world: the effects it
copies stay the original session's. Every client says so, listing these steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from xclaw.store.steps.model import Step, StepType

OUTSIDE_EFFECTS = "outside_effects"  # the alert's name (xclaw.agent.loop records it)


def outside_steps(steps: Iterable[Step], from_seq: int) -> list[Step]:
    """The outside-effect marks at or after `from_seq`."""
    return [
        s
        for s in steps
        if s.step_type is StepType.SYSTEM_ALERT and s.name == OUTSIDE_EFFECTS and s.seq >= from_seq
    ]


def outside_note(marks: list[Step]) -> str:
    """`2 steps had effects outside the workspace; they are not undone: s0004 mcp__…, …`
    or "" when there are none."""
    return describe_outside([(m.display_id, m.input_data) for m in marks])


def outside_marks_json(steps: Iterable[dict[str, Any]], from_seq: int) -> list[tuple[str, Any]]:
    """The marks at or after `from_seq` among steps as the HTTP API lists them (the terminal
    client checks before it sends a rollback or fork)."""
    return [
        (str(s.get("id")), s.get("input"))
        for s in steps
        if s.get("type") == StepType.SYSTEM_ALERT.value
        and s.get("name") == OUTSIDE_EFFECTS
        and int(s.get("seq") or 0) >= from_seq
    ]


def describe_outside(marks: list[tuple[str, Any]]) -> str:
    """The note for (display id, mark input) pairs; "" when there are none."""
    if not marks:
        return ""
    names = ", ".join(
        f"{display} {data.get('tool', '?') if isinstance(data, dict) else '?'}"
        for display, data in marks[:10]
    )
    more = f" and {len(marks) - 10} more" if len(marks) > 10 else ""
    n = len(marks)
    return (
        f"{n} step{'s' if n != 1 else ''} had effects outside the workspace; "
        f"{'they are' if n != 1 else 'it is'} not undone: {names}{more}"
    )


def owned_note(steps: Iterable[Step], fork_seq: int, original: str) -> str:
    """What a fork at `fork_seq` says of the outside effects it copies: they stay the
    original session's (only a rollback of that one undoes them); "" when it copies none."""
    marks = [
        s
        for s in steps
        if s.step_type is StepType.SYSTEM_ALERT and s.name == OUTSIDE_EFFECTS and s.seq <= fork_seq
    ]
    if not marks:
        return ""
    names = ", ".join(
        f"{m.display_id} {m.input_data.get('tool', '?') if isinstance(m.input_data, dict) else '?'}"
        for m in marks[:10]
    )
    more = f" and {len(marks) - 10} more" if len(marks) > 10 else ""
    n = len(marks)
    return (
        f"the new session holds {n} outside effect{'s' if n != 1 else ''} of the original "
        f"({names}{more}); the original session {original} still owns "
        f"{'them' if n != 1 else 'it'}: rolling back the fork leaves "
        f"{'them' if n != 1 else 'it'} in place, rolling back the original undoes what can be "
        "undone"
    )


def describe_effect(effect: Mapping[str, Any]) -> str:
    """One effect of a rollback's preview (`OutsideEffectInfo`'s JSON) in words."""
    head = f"{effect.get('stepId', '?')} {effect.get('tool', '?')}"
    comp = effect.get("compensation")
    if effect.get("undoneBy"):
        return f"{head}: undone already ({effect['undoneBy']})"
    if isinstance(comp, Mapping):
        given = comp.get("args")
        args: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        shown = ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:6])
        return f"{head}: undone by {comp.get('action', '?')}({shown})"
    return f"{head}: not undone ({effect.get('why') or 'irreversible'})"


def describe_preview(preview: Mapping[str, Any]) -> str:
    """A rollback's preview (`rollback_preview`, GET …/rollback/{step}) in words: what it
    undoes, in order, and what it leaves done."""
    undo = [e for e in preview.get("compensable") or () if isinstance(e, Mapping)]
    stay = [e for e in preview.get("irreversible") or () if isinstance(e, Mapping)]
    done = [e for e in preview.get("undoneAlready") or () if isinstance(e, Mapping)]
    lines = [f"[rollback] to before {preview.get('stepId', '?')}: outside effects after it"]
    if undo:
        lines.append(f"  undone, in this order ({len(undo)}):")
        lines += [f"    {describe_effect(e)}" for e in undo]
    if stay:
        lines.append(f"  NOT undone — they stay done ({len(stay)}):")
        lines += [f"    {describe_effect(e)}" for e in stay]
    lines += [f"  {describe_effect(e)}" for e in done]
    return "\n".join(lines)
