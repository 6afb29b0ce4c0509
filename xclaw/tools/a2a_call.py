"""[tools] a2a_call: hand a task to another agent over A2A (docs/a2a.md) and get back its outcome.

The agents it may call are named in xclaw.yaml (`a2a.agents`). A call is an outside effect
like any other: its step is written before the message goes (write-ahead), and its ids are
chosen before that and derived from what that step records — the session and the tool
call's id (xclaw/tools/a2a_remote.py `call_ids`): the message id, which the message carries
as its idempotency key, and, unless the call continues a context, a context of its own.

Never sent twice. A stream cut off, or the remote agent restarting, is followed by asking
about the task (GetTask, SubscribeToTask). A call cut short by a crash here is settled on
resume by asking the remote agent, before anything is asked of a person (`check_effect`,
xclaw/runtime/settle.py): its task is found by the message that made it (ListTasks in the
call's context), followed to its end, and recorded as the call's result; only a remote
that has no such task, or does not answer, leaves the call "may or may not have run", for
the model to re-issue and a person to approve.

A remote task that needs input (input-required) ends the call with its question. The
answer is another a2a_call naming that task (`task_id`, `message`), and that call is asked
of a person in every approval mode (xclaw/tools/approval.py): the remote agent asked for
a person, not for a model's guess.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from xclaw.errors import ToolError
from xclaw.tools.a2a_settings import RemoteAgent
from xclaw.tools.base import Tool, ToolContext, ToolResult, cap_result_text
from xclaw.tools.schema import check_args

NAME = "a2a_call"
# How long a settlement on resume waits for a task found still working.
SETTLE_WAIT_S = 120.0


def answers_remote(args: Any) -> bool:
    """The call answers a remote task that waits for input (asked of a person, always)."""
    return isinstance(args, dict) and bool(args.get("task_id")) and bool(args.get("message"))


class A2aCallTool(Tool):
    name = NAME
    read_only = False
    outside_effects = True  # the remote agent acts; rollback and fork cannot undo it

    def __init__(self, agents: Mapping[str, RemoteAgent]) -> None:
        self.agents = dict(agents)
        listed = ", ".join(sorted(self.agents))
        self.description = (
            "Hand a task to another AI agent over the A2A protocol and get back its answer "
            f"(agents: {listed}). The remote agent works on its own and may take a while. "
            "If it needs input, the result says so with its task_id: answer with another "
            "call giving that task_id and your message (a person approves it). With a "
            "task_id and no message, the call waits for that task's outcome."
        )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": sorted(self.agents)},
                "message": {"type": "string", "description": "What to ask of the agent."},
                "task_id": {
                    "type": "string",
                    "description": "A task of that agent to answer or to wait for.",
                },
                "context_id": {
                    "type": "string",
                    "description": "Continue a conversation with the agent (a contextId an "
                    "earlier call returned).",
                },
            },
            "required": ["agent"],
        }

    def _read(self, args: dict[str, Any]) -> tuple[str, RemoteAgent, str, str, str]:
        args = check_args(self.name, self.input_schema, args)
        agent = str(args["agent"])
        if agent not in self.agents:
            raise ToolError(f"no agent {agent!r} (configured: {', '.join(sorted(self.agents))})")
        message = str(args.get("message") or "")
        task_id = str(args.get("task_id") or "")
        context_id = str(args.get("context_id") or "")
        if not message.strip() and not task_id:
            raise ToolError("a2a_call needs a message (or a task_id to wait for)")
        return agent, self.agents[agent], message, task_id, context_id

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        from xclaw.tools.a2a_remote import RemoteAgentClient, RemoteErrors, RemoteUnreachable

        try:
            agent, config, text, task_id, context_id = self._read(args)
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        if ctx.call_id is None:
            return ToolResult("a2a_call needs its call id (its idempotency key)", is_error=True)
        deadline = time.monotonic() + config.timeout_s
        try:
            async with RemoteAgentClient(agent, config) as remote:
                if task_id and not text:
                    task = await remote.follow(task_id, deadline)
                else:
                    message = await _message(remote, ctx, text, task_id, context_id, deadline)
                    task = await remote.send(message, deadline)
        except RemoteUnreachable as e:
            return ToolResult(str(e), is_error=True)
        except RemoteErrors as e:
            said = getattr(e, "message", None) or str(e) or type(e).__name__
            return ToolResult(f"{agent} refused the call: {said}", is_error=True)
        return outcome(agent, task)

    def check_effect(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """Settled by asking the remote agent (in a thread, on resume): the task the call's
        message made, followed to its end; None when the remote has no such task or does
        not answer (then a person decides, as for any call that may have run)."""
        try:
            return asyncio.run(self._settle(args, ctx))
        except Exception:  # noqa: BLE001 - no evidence either way: the usual rule applies
            return None

    async def _settle(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        from a2a.types.a2a_pb2 import TaskState

        from xclaw.tools.a2a_remote import RemoteAgentClient, RemoteUnreachable, call_ids

        try:
            agent, config, text, task_id, context_id = self._read(args)
        except ToolError:
            return None
        if ctx.call_id is None:
            return None
        ids = call_ids(ctx.session_id, ctx.call_id)
        deadline = time.monotonic() + min(config.timeout_s, SETTLE_WAIT_S)
        try:
            async with RemoteAgentClient(agent, config) as remote:
                if task_id:
                    now = await remote.get(task_id, deadline)
                    if text and now.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                        return None  # still waiting for input: the answer never arrived
                    found_id = task_id
                else:
                    found = await remote.find(
                        context_id or ids.context_id, ids.message_id, deadline
                    )
                    if found is None:
                        return None
                    found_id = found.id
                task = await remote.follow(found_id, deadline)
        except RemoteUnreachable:
            return None
        result = outcome(agent, task)
        return ToolResult(
            f"[settled by asking {agent} after a restart: the message had arrived]\n"
            + result.content,
            data=result.data,
        )


async def _message(
    remote: Any, ctx: ToolContext, text: str, task_id: str, context_id: str, deadline: float
) -> Any:
    from a2a.types.a2a_pb2 import Message, Part, Role
    from google.protobuf.struct_pb2 import Struct

    from xclaw.tools.a2a_remote import call_ids

    assert ctx.call_id is not None
    ids = call_ids(ctx.session_id, ctx.call_id)
    if task_id and not context_id:
        context_id = (await remote.get(task_id, deadline)).context_id
    metadata = Struct()
    metadata.update({"idempotencyKey": ids.message_id})
    return Message(
        message_id=ids.message_id,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id or ids.context_id,
        task_id=task_id,
        metadata=metadata,
    )


def outcome(agent: str, task: Any) -> ToolResult:
    """What the model reads of a remote task: its state, its answer or question, and what it
    made; the ids (to answer it, to continue its context) in words and in `data`."""
    from a2a.types.a2a_pb2 import TaskState

    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    said = "\n".join(p.text for p in task.status.message.parts if p.WhichOneof("content") == "text")
    made = []
    for artifact in task.artifacts:
        texts = [p.text for p in artifact.parts if p.WhichOneof("content") == "text"]
        if artifact.name == "answer" and texts:
            continue  # the same as the status message's answer
        made.append(
            f"- {artifact.name or artifact.artifact_id}" + (f": {texts[0]}" if texts else "")
        )
    lines = [f"{agent}: task {task.id or '(none)'} {state} (contextId {task.context_id})"]
    if said:
        lines.append(said)
    if made:
        lines.append("It made:\n" + "\n".join(made))
    if state == "input-required":
        lines.append(
            f"To answer, call a2a_call with agent {agent!r}, task_id {task.id!r} and your message."
        )
    failed = state in ("failed", "rejected", "canceled")
    return ToolResult(
        cap_result_text("\n".join(lines)),
        is_error=failed,
        data={"taskId": task.id, "contextId": task.context_id, "state": state},
    )
