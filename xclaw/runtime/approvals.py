"""[runtime] Approvals while a run waits for one: asked of every attached client, answered by any of
them (docs/approval.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from xclaw.agent.hooks import ApprovalRequest
from xclaw.errors import StepNotFound
from xclaw.llm.messages import ToolCall
from xclaw.people.answered_by import Answer, AnsweredBy
from xclaw.recorder.redact import Redactor
from xclaw.store.steps.model import APPROVAL_STEP_NAME as APPROVAL
from xclaw.store.steps.model import Step, StepType, parse_step_ref
from xclaw.wire.build import approval_request_frame
from xclaw.wire.shapes import ApprovalRequestJson

if TYPE_CHECKING:
    from xclaw.runtime.run import Run


def approval_frame(req: ApprovalRequest, redact: Redactor) -> ApprovalRequestJson:
    """The `approval_request` frame (without `sessionId`), redacted: the model's tool name,
    its input and a reason."""
    frame = approval_request_frame(
        req.step_id or req.call.id,
        req.call.name,
        req.call.input,
        req.reason,
        maybe_repeated=req.maybe_repeated,
        agent=req.agent,
        call_id=redact.ident(req.call.id),  # as the record holds it
    )
    clean: ApprovalRequestJson = redact(frame)
    return clean


def recorded_request(step: Step) -> ApprovalRequest | None:
    """The request an approval step still `running` in the record waits on (what a worker
    that does not drive the session knows of it), or None for another kind of step."""
    if step.step_type is not StepType.SYSTEM_ALERT or step.name != APPROVAL:
        return None
    data = step.input_data if isinstance(step.input_data, dict) else {}
    args = data.get("args")
    call = ToolCall(
        id=step.call_id or "",
        name=str(data.get("tool") or ""),
        input=args if isinstance(args, dict) else {},
    )
    return ApprovalRequest(
        step.display_id,
        call,
        str(data.get("reason", "")),
        bool(data.get("maybeRepeated")),
        step.agent,
    )


class WireApprover:
    """The run's Approver: asks every attached client (`ask` sends the request); any of them
    may answer (`answer`)."""

    def __init__(self, run: Run, ask: Callable[[ApprovalRequest], None]) -> None:
        self.run = run
        self.ask = ask

    async def decide(self, request: ApprovalRequest) -> Answer:
        key = request.step_id or request.call.id
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.run.approvals[key] = (request, future)
        self.ask(request)
        try:
            return await future
        finally:
            self.run.approvals.pop(key, None)


def waiting(run: Run) -> list[ApprovalRequest]:
    """The requests of `run` still waiting for an answer."""
    return [req for req, fut in run.approvals.values() if not fut.done()]


# What a person may say with an answer (the model reads it; the record keeps it).
MAX_MESSAGE = 2000


def checked_extras(
    message: Any, edited: Any, allow_edits: bool
) -> tuple[str | None, dict[str, Any] | None]:
    """An answer's message and edited input as they may be given: a message is text (at
    most MAX_MESSAGE characters), an edited input a JSON object, and edits only where the
    approval policy allows them (BadCommand, saying which, otherwise)."""
    from xclaw.errors import BadCommand

    if message is not None:
        if not isinstance(message, str):
            raise BadCommand("an approval's message must be text")
        message = " ".join(message.split())[:MAX_MESSAGE] or None
    if edited is None:
        return message, None
    if not allow_edits:
        raise BadCommand(
            "this server does not let an approval change a call's input "
            "(xclaw.yaml: approval.allow_edits is false)"
        )
    if not isinstance(edited, Mapping):
        raise BadCommand("an approval's edited input must be a JSON object")
    try:
        clean = json.loads(json.dumps(dict(edited)))
    except (TypeError, ValueError) as e:
        raise BadCommand(f"an approval's edited input is not JSON: {e}") from None
    return message, clean


def answer(
    run: Run,
    session_id: str,
    step_ref: str,
    approve: bool,
    by: AnsweredBy,
    message: str | None = None,
    edited: dict[str, Any] | None = None,
) -> bool:
    """Answer the request `step_ref` (a step id, or the call id of a request without a step)
    of `run`; False: none such is waiting."""
    try:
        key = f"s{parse_step_ref(step_ref, session_id):04d}"
    except StepNotFound:
        key = step_ref
    entry = run.approvals.get(key)
    if entry is None or entry[1].done():
        return False
    entry[1].set_result(Answer(bool(approve), by, message, edited if approve else None))
    return True
