"""Approvals while a run waits for one: asked of every attached client, answered by any of
them (docs/approval.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xclaw.agent.hooks import ApprovalRequest
from xclaw.answered_by import Answer, AnsweredBy
from xclaw.errors import StepNotFound
from xclaw.recorder.redact import Redactor
from xclaw.store.model import MAIN_AGENT, parse_step_ref

if TYPE_CHECKING:
    from xclaw.runtime.runs import Run


def approval_frame(req: ApprovalRequest, redact: Redactor) -> dict[str, Any]:
    """The `approval_request` frame (without `sessionId`), redacted: the model's tool name,
    its input and a reason."""
    frame: dict[str, Any] = {
        "type": "approval_request",
        "stepId": req.step_id,
        "name": req.call.name,
        "input": req.call.input,
        "reason": req.reason,
        "maybeRepeated": req.maybe_repeated,
        "callId": redact.ident(req.call.id),  # as the record holds it
    }
    if req.agent != MAIN_AGENT:
        frame["agent"] = req.agent
    clean: dict[str, Any] = redact(frame)
    return clean


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


def answer(run: Run, session_id: str, step_ref: str, approve: bool, by: AnsweredBy) -> bool:
    """Answer the request `step_ref` (a step id, or the call id of a request without a step)
    of `run`; False: none such is waiting."""
    try:
        key = f"s{parse_step_ref(step_ref, session_id):04d}"
    except StepNotFound:
        key = step_ref
    entry = run.approvals.get(key)
    if entry is None or entry[1].done():
        return False
    entry[1].set_result(Answer(bool(approve), by))
    return True
