"""[mcp_server] MCP server, the `rollback` tool's answers: the same for `xclaw mcp` (over the Python
API) and `/mcp` on the gateway. A rollback past outside effects is shown before it is done — what it
would undo and what it would leave done — as every other client shows it; the answer of a rollback
done lists the compensations that ran."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xclaw.views.outside_effects import describe_preview
from xclaw.wire.session_commands import needs_confirmation


def preview_needs_confirmation(preview: Mapping[str, Any]) -> bool:
    """Effects outside the workspace after the step (or a rollback stopped half-way): the
    rollback waits for `confirm`. Without any, it is the plain rewind, done at once."""
    return needs_confirmation(preview)


def preview_answer(session_id: str, preview: Mapping[str, Any]) -> dict[str, Any]:
    step = preview.get("stepId", "?")
    if preview.get("pending"):
        then = (
            "a rollback of this session stopped half-way: finish it with the `rollback` tool "
            "of its own step and confirm=true, or leave what is done with "
            "accept_irreversible=true"
        )
    elif preview.get("irreversible"):
        then = (
            f"nothing is done yet: call rollback({step!r}, accept_irreversible=true) to roll "
            "back leaving the irreversible effects done"
        )
    else:
        then = f"nothing is done yet: call rollback({step!r}, confirm=true) to undo and rewind"
    return {
        "session_id": session_id,
        "step_id": step,
        "rolled_back": False,
        "preview": dict(preview),
        "text": describe_preview(preview) + "\n" + then,
    }


def rolled_back_answer(
    session_id: str,
    step_id: str,
    deleted: int,
    compensated: list[dict[str, Any]],
    not_undone: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "step_id": step_id,
        "deleted": deleted,
        "rolled_back": True,
        "compensated": compensated,
        "not_undone": not_undone,
    }
