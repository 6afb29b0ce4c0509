"""[a2a] An xclaw session as A2A tasks, read from the record alone (docs/a2a.md).

The `contextId` is the session; a task is a turn — a user message and what followed it, up to
the next one — and its id is that message's step id (`SESSION:s0005`), so it is found again
after any restart; a message kept in the session's queue is a task before its turn opens, its
id `SESSION:MESSAGE-ID`, which it keeps once its turn has a step. Its state:

| the turn | task state |
|---|---|
| the latest, a run in flight | working (`input-required` while an approval waits) |
| the latest, session Init | submitted |
| the latest, session Paused (an approval waits, even with no run since a restart) | input-required |
| the latest, session Running, not waiting for input (a run cut short: it resumes) | working |
| the latest, session Running, waiting for input (the run was stopped) | canceled |
| the latest, Success / Failed | completed / failed |
| an earlier one | completed with its answer; else failed (its model call failed) or canceled |
| a message waiting in the session's queue (no turn yet) | submitted |

Pure: the caller reads the record (steps, session) and the files a turn changed
(xclaw/a2a/files.py) and hands them here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import APPROVAL_STEP_NAME, Session, Status, Step, StepStatus, StepType

ANSWER_ARTIFACT = "answer"
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# A stream ends at these: the task waits for someone, or is over.
STREAM_ENDS = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


@dataclass(frozen=True)
class Turn:
    message: Step  # the user_input step that opened it
    steps: Sequence[Step]  # what came after, up to the next turn
    latest: bool

    @property
    def task_id(self) -> str:
        """The message's step id; for a message that waited in the session's queue, the id
        its task had while it waited (`waiting_task_id`), which it keeps."""
        out = self.message.output_data
        if isinstance(out, dict) and out.get("queued") and isinstance(out.get("messageId"), str):
            return waiting_task_id(self.message.session_id, out["messageId"])
        return self.message.step_id

    def answers_to(self, task_id: str) -> bool:
        """`task_id` names this task: its id, or its message's step id."""
        return task_id in (self.task_id, self.message.step_id)

    def answer(self) -> str | None:
        """The turn's final answer: its last model call that asked for no tool."""
        for s in reversed(self.steps):
            if s.step_type is not StepType.LLM_CALL or s.status is not StepStatus.COMPLETED:
                continue
            out = s.output_data if isinstance(s.output_data, dict) else {}
            if out.get("compaction"):
                continue
            if not out.get("tool_calls"):
                return str(out.get("text") or "")
            return None
        return None

    def failed_call(self) -> Step | None:
        """The model call the turn ended on, when it failed."""
        calls = [s for s in self.steps if s.step_type is StepType.LLM_CALL]
        if calls and calls[-1].status is StepStatus.FAILED:
            return calls[-1]
        return None

    def waiting_approvals(self) -> list[Step]:
        return [
            s
            for s in self.steps
            if s.step_type is StepType.SYSTEM_ALERT
            and s.name == APPROVAL_STEP_NAME
            and s.status is StepStatus.RUNNING
        ]

    def first_seq_after(self) -> int | None:
        """The first step of the next turn (None: this is the latest)."""
        return None if self.latest else max(s.seq for s in (self.message, *self.steps)) + 1


def waiting_task_id(session_id: str, entry_id: str) -> str:
    """The task of a message waiting in the session's queue: `SESSION:ID`, ID the message id
    its turn will record (xclaw/store/queue/sql.py) — known before the turn has a step, and
    kept once it has one (the step records `"queued": true`)."""
    return f"{session_id}:{entry_id}"


def waiting_task(entry: QueuedInput, *, client_message_id: str | None) -> Task:
    """The task of a message waiting in the session's queue: `submitted`, its history the
    message."""
    sid = entry.session_id
    tid = waiting_task_id(sid, entry.id)
    user = text_message(
        entry.content,
        context_id=sid,
        task_id=tid,
        message_id=client_message_id or f"xclaw:{tid}",
        role=Role.ROLE_USER,
    )
    status = TaskStatus(
        state=TaskState.TASK_STATE_SUBMITTED, timestamp=_timestamp(entry.created_at)
    )
    return Task(id=tid, context_id=sid, status=status, history=[user])


def turns_of(steps: Sequence[Step]) -> list[Turn]:
    """The main agent's steps as turns, in order (steps before the first message belong to
    no task)."""
    starts = [
        i
        for i, s in enumerate(steps)
        if s.step_type is StepType.USER_INPUT and s.status is StepStatus.COMPLETED
    ]
    out = []
    for n, i in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(steps)
        out.append(Turn(steps[i], steps[i + 1 : end], latest=n == len(starts) - 1))
    return out


def state_of(turn: Turn, session: Session, *, busy: bool) -> int:
    """The task state (a TaskState value) of `turn`, see the module's table."""
    if turn.latest:
        status = session.status
        if status is Status.PAUSED:
            return TaskState.TASK_STATE_INPUT_REQUIRED
        if status is Status.SUCCESS:
            return TaskState.TASK_STATE_COMPLETED
        if status is Status.FAILED:
            return TaskState.TASK_STATE_FAILED
        if status is Status.RUNNING and session.awaiting_input:
            return TaskState.TASK_STATE_CANCELED
        if status is Status.INIT and not busy:
            return TaskState.TASK_STATE_SUBMITTED
        return TaskState.TASK_STATE_WORKING  # in flight, or cut short (it resumes)
    if turn.answer() is not None:
        return TaskState.TASK_STATE_COMPLETED
    if turn.failed_call() is not None:
        return TaskState.TASK_STATE_FAILED
    return TaskState.TASK_STATE_CANCELED


def text_message(
    text: str, *, context_id: str, task_id: str, message_id: str, role: int = Role.ROLE_AGENT
) -> Message:
    return Message(
        message_id=message_id,
        context_id=context_id,
        task_id=task_id,
        role=role,  # type: ignore[arg-type]
        parts=[Part(text=text)],
    )


def approval_message(step: Step, *, context_id: str, task_id: str) -> Message:
    """What an input-required task says it waits for: the approval, in words and as data.
    The answer is the task's next message: "approve" or "deny" (or data {"approved": …})."""
    data = step.input_data if isinstance(step.input_data, dict) else {}
    tool, args, reason = data.get("tool"), data.get("args"), data.get("reason")
    words = (
        f'Approval needed for {tool} {args}: {reason}. Reply to this task with "approve" or "deny".'
    )
    details = Struct()
    details.update(
        {
            "approval": {
                "stepId": step.display_id,
                "tool": tool,
                "input": args,
                "reason": reason,
                "maybeRepeated": bool(data.get("maybeRepeated")),
            }
        }
    )
    message = text_message(
        words, context_id=context_id, task_id=task_id, message_id=f"xclaw:{step.step_id}"
    )
    data_part = Part()
    data_part.data.struct_value.CopyFrom(details)
    message.parts.append(data_part)
    return message


def _timestamp(ms: int | None) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms or 0)
    return stamp


def task_of(
    turn: Turn,
    session: Session,
    *,
    busy: bool,
    client_message_id: str | None,
    artifacts: Sequence[Artifact] = (),
    error: str | None = None,
    answered: Collection[str] = (),
) -> Task:
    """The A2A task of `turn`; `answered`: approvals just answered (the record says so a
    moment later), so a task waiting only for them is working."""
    sid, tid = session.session_id, turn.task_id
    state = state_of(turn, session, busy=busy)
    waiting = {s.display_id for s in turn.waiting_approvals()}
    if state == TaskState.TASK_STATE_INPUT_REQUIRED and waiting and waiting <= set(answered):
        state = TaskState.TASK_STATE_WORKING
    text = turn.message.input_data if isinstance(turn.message.input_data, str) else ""
    user = text_message(
        text,
        context_id=sid,
        task_id=tid,
        message_id=client_message_id or f"xclaw:{tid}",
        role=Role.ROLE_USER,
    )
    history = [user]
    status_message: Message | None = None
    answer = turn.answer()
    if answer is not None and state == TaskState.TASK_STATE_COMPLETED:
        status_message = text_message(
            answer, context_id=sid, task_id=tid, message_id=f"xclaw:{tid}:answer"
        )
        history.append(status_message)
    elif state == TaskState.TASK_STATE_INPUT_REQUIRED and turn.waiting_approvals():
        status_message = approval_message(turn.waiting_approvals()[-1], context_id=sid, task_id=tid)
    elif state == TaskState.TASK_STATE_FAILED:
        failed = turn.failed_call()
        why = error or (failed.error_message if failed else None) or "the run failed"
        status_message = text_message(
            why, context_id=sid, task_id=tid, message_id=f"xclaw:{tid}:error"
        )
    last = turn.steps[-1] if turn.steps else turn.message
    status = TaskStatus(state=state, timestamp=_timestamp(last.end_time or last.start_time))  # type: ignore[arg-type]
    if status_message is not None:
        status.message.CopyFrom(status_message)
    task = Task(id=tid, context_id=sid, status=status, history=history)
    task.artifacts.extend(artifacts)
    return task


def answer_artifact(turn: Turn) -> list[Artifact]:
    answer = turn.answer()
    if answer is None:
        return []
    return [Artifact(artifact_id=ANSWER_ARTIFACT, name="answer", parts=[Part(text=answer)])]


def metadata_struct(data: dict[str, Any]) -> Struct:
    out = Struct()
    out.update(data)
    return out
