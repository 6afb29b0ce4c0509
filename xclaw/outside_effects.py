"""Steps whose effects rollback and fork cannot undo.

Before a tool with effects outside the workspace runs (an MCP tool that is not read-only, or
reaches the open world; a Python tool that is not read-only), the agent loop records a
`system_alert` step named `outside_effects` naming the call. Rollback restores the workspace
files and deletes steps, fork copies a prefix of them; neither can take back an email sent or
a commit pushed. Both say so, listing these steps, in every client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xclaw.store.model import Step, StepType

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
