"""[views] Branch comparison by content, shared by `xclaw diff A B` and the demo (the web page has
the same rule in xclaw/web/static/compare.js).

After the fork point two branches are aligned by a diff (longest common subsequence) over step
signatures — type, name, input — rather than by step number, so a step both took lines up
even when one branch did more before it. Each row is `same`, `changed` (the same kind of step
at the same place with a different input or result), `only-left` or `only-right`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xclaw.store.steps.model import MAIN_AGENT, Step, StepType

MARKS = {"same": "=", "changed": "≠", "only-left": "◀", "only-right": "▶"}


def signature(step: Step) -> str:
    """What makes two steps "the same step". An LLM call's input is only its parameters."""
    data = None if step.step_type is StepType.LLM_CALL else step.input_data
    return json.dumps([step.step_type.value, step.name, data], sort_keys=True, default=str)


def _result(step: Step) -> Any:
    out = step.output_data
    if step.step_type is StepType.LLM_CALL and isinstance(out, dict):
        calls = [
            [c.get("name"), c.get("input")]
            for c in out.get("tool_calls") or ()
            if isinstance(c, dict)
        ]
        out = {"text": out.get("text", ""), "calls": calls}
    return [out, step.status.value]


@dataclass(frozen=True, slots=True)
class Row:
    kind: str  # same | changed | only-left | only-right
    left: Step | None
    right: Step | None


def align(a: Sequence[Step], b: Sequence[Step]) -> list[Row]:
    """Rows of the two branches aligned by content (main-agent steps)."""
    a = [s for s in a if s.agent == MAIN_AGENT]
    b = [s for s in b if s.agent == MAIN_AGENT]
    matcher = difflib.SequenceMatcher(
        None, [signature(s) for s in a], [signature(s) for s in b], autojunk=False
    )
    rows: list[Row] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for x, y in zip(a[i1:i2], b[j1:j2], strict=True):
                rows.append(Row("same" if _result(x) == _result(y) else "changed", x, y))
            continue
        xs, ys = list(a[i1:i2]), list(b[j1:j2])
        while xs or ys:  # unmatched steps of the same kind at the same place: one changed row
            if xs and ys and _same_kind(xs[0], ys[0]):
                rows.append(Row("changed", xs.pop(0), ys.pop(0)))
            elif xs and not any(_same_kind(xs[0], y) for y in ys):
                rows.append(Row("only-left", xs.pop(0), None))
            else:
                rows.append(Row("only-right", None, ys.pop(0)))
    return rows


def _same_kind(x: Step, y: Step) -> bool:
    """Comparable side by side: the same type and name (the same tool, the same model)."""
    return x.step_type is y.step_type and x.name == y.name


def final_answer(steps: Sequence[Step]) -> str | None:
    for s in reversed(steps):
        out = s.output_data
        if (
            s.step_type is StepType.LLM_CALL
            and s.agent == MAIN_AGENT
            and isinstance(out, dict)
            and not out.get("tool_calls")
        ):
            return str(out.get("text") or "")
    return None


def describe(step: Step, limit: int = 70) -> str:
    """One line for a row: what the step was, approvals in words."""

    def clip(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"

    if step.step_type is StepType.USER_INPUT:
        return f"{step.display_id} user: {clip(str(step.input_data))}"
    if step.step_type is StepType.LLM_CALL:
        out = step.output_data if isinstance(step.output_data, dict) else {}
        calls = [str(c.get("name")) for c in out.get("tool_calls") or () if isinstance(c, dict)]
        said = clip(str(out.get("text") or ""))
        if step.status.value == "failed" and not said and not calls:
            return f"{step.display_id} llm: [failed: {clip(step.error_message or 'error')}]"
        return f"{step.display_id} llm: {said}" + (f" → {', '.join(calls)}" if calls else "")
    if step.step_type is StepType.TOOL_CALL:
        state = "interrupted" if step.interrupted else step.status.value
        data = step.input_data
        shown = data.get("command") or data.get("path") if isinstance(data, dict) else None
        return f"{step.display_id} {step.name}: {clip(str(shown or json.dumps(data, default=str)))} [{state}]"
    if step.name == "approval":
        data = step.input_data if isinstance(step.input_data, dict) else {}
        given = data.get("args")
        args = given if isinstance(given, dict) else {}
        what = args.get("command") or args.get("path") or ""
        out = step.output_data if isinstance(step.output_data, dict) else {}
        verdict = out.get("why") or (
            "approved"
            if out.get("approved")
            else "waiting"
            if step.status.value == "running"
            else "denied"
        )
        return f"{step.display_id} approval: {data.get('tool', 'a tool')} {clip(str(what))} — {verdict}"
    return f"{step.display_id} {step.name}"


def answer_diff(left: str | None, right: str | None, labels: tuple[str, str]) -> str:
    """A unified diff of the two final answers ("" when equal or one is missing)."""
    if left is None or right is None or left == right:
        return ""
    lines = difflib.unified_diff(
        left.splitlines(),
        right.splitlines(),
        fromfile=labels[0],
        tofile=labels[1],
        lineterm="",
        n=2,
    )
    return "\n".join(lines)


def format_rows(rows: Sequence[Row]) -> str:
    counts = {k: sum(1 for r in rows if r.kind == k) for k in MARKS}
    head = (
        f"steps after the fork: {counts['same']} same, {counts['changed']} changed, "
        f"{counts['only-left']} only left, {counts['only-right']} only right"
    )
    lines = [head]
    for r in rows:
        left = describe(r.left) if r.left else ""
        right = describe(r.right) if r.right else ""
        lines.append(f"  {MARKS[r.kind]} {left:<60.60}  | {right}")
    return "\n".join(lines)
