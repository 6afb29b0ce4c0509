"""[acp] An xclaw approval request as `session/request_permission`, and the answer back.

The four ACP options map onto xclaw's approval flow (docs/approval.md) thus:

- allow once / reject once: this call only (`Session.approve(step, yes)`);
- allow always / reject always: this call, and from then on every call of the same tool in
  this session on this connection is answered the same way without asking — a standing
  answer the ACP agent keeps (it is not written into xclaw.yaml, nor into the session: a
  new `xclaw acp` process asks again, the safe direction). Each call so answered is still
  an approval step of the record, answered by a person through `acp`.

A call that may already have happened (interrupted by a crash, issued again by the model:
`maybe_repeated`) is always asked, with that warning, and offers no "always".
Every answer is recorded with `by: {"kind": "person", "client": "acp", …}`.
"""

from __future__ import annotations

from pathlib import Path

from acp import text_block, tool_content
from acp.interfaces import Client
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from xclaw.acp.updates import edit_content, tool_kind, tool_title
from xclaw.wire.frames import ApprovalRequestFrame

ALLOW, ALLOW_ALWAYS, REJECT, REJECT_ALWAYS = "allow", "allow-always", "reject", "reject-always"
MAY_HAVE_RUN = (
    "This call was running when xclaw stopped: it may already have happened. Run it again?"
)


def options(repeated: bool) -> list[PermissionOption]:
    once = [
        PermissionOption(option_id=ALLOW, name="Allow once", kind="allow_once"),
        PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
    ]
    if repeated:
        return once
    return [
        once[0],
        PermissionOption(
            option_id=ALLOW_ALWAYS, name="Always allow this tool", kind="allow_always"
        ),
        once[1],
        PermissionOption(
            option_id=REJECT_ALWAYS, name="Always reject this tool", kind="reject_always"
        ),
    ]


async def ask(
    conn: Client,
    session_id: str,
    frame: ApprovalRequestFrame,
    standing: dict[str, bool],
    root: Path | None,
) -> tuple[bool, str] | None:
    """(approved, why) — from a standing answer or the person; None when the request was
    cancelled (the run's cancel answers it)."""
    repeated = frame.maybe_repeated
    if not repeated and frame.name in standing:
        yes = standing[frame.name]
        return yes, f"{'allowed' if yes else 'rejected'} always for {frame.name} in this session"
    why = MAY_HAVE_RUN if repeated else frame.reason
    title = tool_title(frame.name, frame.input, frame.agent)
    content = [tool_content(text_block(why)), *(edit_content(frame.name, frame.input, root) or [])]
    call = ToolCallUpdate(
        tool_call_id=frame.step_id,
        title=("⚠ may have run already: " + title) if repeated else title,
        kind=tool_kind(frame.name),
        status="pending",
        raw_input=frame.input,
        content=content,
    )
    answer = await conn.request_permission(
        session_id=session_id, tool_call=call, options=options(repeated)
    )
    outcome = answer.outcome
    if not isinstance(outcome, AllowedOutcome):
        return None
    chosen = outcome.option_id
    yes = chosen in (ALLOW, ALLOW_ALWAYS)
    if chosen in (ALLOW_ALWAYS, REJECT_ALWAYS) and not repeated:
        standing[frame.name] = yes
    if chosen not in (ALLOW, ALLOW_ALWAYS, REJECT, REJECT_ALWAYS):
        return False, f"unknown option {chosen[:40]!r}: taken as a rejection"
    return yes, "rejected in the editor"
