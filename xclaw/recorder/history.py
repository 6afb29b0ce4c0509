"""[recorder] Reading back through the glass: rebuild the main agent's `messages` from its trace
rows.

The result is always a valid provider history ("valid history", docs/architecture.md): every
assistant tool call is answered by exactly one tool result, synthetic where the record has
none to give.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from xclaw.agent.hooks import ResumeState
from xclaw.agents.hooks import WITHHELD
from xclaw.llm.context import compacted_message
from xclaw.llm.messages import (
    INTERRUPTED_RESULT,
    AssistantMessage,
    ImageBlock,
    Message,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    call_signature,
)
from xclaw.store.steps.model import APPROVAL_STEP_NAME as APPROVAL
from xclaw.store.steps.model import Step, StepStatus, StepType

NOT_RUN_RESULT = "[not run] This tool call was never executed: {why}."

# What a declared agent's steps add to an llm_call's output or an approval's (docs/agents.md):
# what the model was told when its answer did not validate, an input a person edited.
OUTPUT_FEEDBACK = "outputFeedback"
EDITED = "edited"
# The system_alert steps of a declared agent's decisions (xclaw/agent/steering.py).
HOOK_ALERT = "hook"
INSTRUCTIONS_ALERT = "instructions"

RESUME_NOTE = (
    "[System: the previous run was interrupted (the agent process stopped). Continue the task "
    "from the conversation above; do not start over and do not repeat steps that already "
    "completed. Tool calls marked [interrupted] may or may not have run: check before "
    "issuing them again. Re-issue any unfinished tool call that is still needed.]"
)


@dataclass
class History:
    messages: list[Message]
    # The step that asked for each tool call (parent of its tool_call step).
    call_parents: dict[str, str] = field(default_factory=dict)
    # Display ids of calls interrupted mid-run, split by whether they are safe to re-run.
    interrupted_retry: list[str] = field(default_factory=list)
    interrupted_unsafe: list[str] = field(default_factory=list)
    pending_approvals: dict[str, Step] = field(default_factory=dict)
    suspect_calls: set[str] = field(default_factory=set)
    last_user_step: str | None = None
    # Interrupted calls of resumable tools (spawn_agent) that run again and continue: call
    # id -> the agent id of their branch (the display id of the call's first tool_call step,
    # kept across several interruptions).
    resumable_calls: dict[str, str] = field(default_factory=dict)
    # A declared agent's record of its last turn: the instructions it began with, the hook
    # decisions taken before the calls still to run (by key), inputs a person edited.
    instructions: str | None = None
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)
    edited: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resume_state(self, *, with_note: bool) -> ResumeState:
        return ResumeState(
            note=RESUME_NOTE if with_note else None,
            suspect_calls=set(self.suspect_calls),
            pending_approvals=set(self.pending_approvals),
            instructions=self.instructions,
            decided=dict(self.decided),
            edited=dict(self.edited),
        )


def tool_args(step: Step) -> dict[str, Any]:
    data = step.input_data
    return dict(data) if isinstance(data, dict) else {}


def tool_output_text(step: Step) -> str:
    out = step.output_data
    if isinstance(out, str):
        return out
    if out is None:
        return step.error_message or ""
    if isinstance(out, dict) and "content" in out:
        return str(out["content"])
    return str(out)


def tool_output_images(step: Step) -> tuple[ImageBlock, ...]:
    """The images a tool step returned, by blob hash (bytes: `with_image_bytes`)."""
    out = step.output_data
    if not isinstance(out, dict):
        return ()
    found = []
    for ref in out.get("images") or ():
        if isinstance(ref, dict) and isinstance(ref.get("hash"), str):
            found.append(ImageBlock(media_type=str(ref.get("media_type") or ""), hash=ref["hash"]))
    return tuple(found)


IMAGE_GONE = "[the image {hash} is no longer in the blob store]"


def with_image_bytes(
    messages: list[Message], load: Callable[[list[str]], dict[str, bytes]]
) -> list[Message]:
    """Messages whose images carry their bytes again (`load`: the store's get_blobs). An
    image whose blob is gone becomes a note in the result text rather than a broken block."""
    wanted = sorted(
        {
            i.hash
            for m in messages
            if isinstance(m, ToolResultMessage)
            for i in m.images
            if i.hash and not i.data
        }
    )
    if not wanted:
        return messages
    blobs = load(wanted)
    out: list[Message] = []
    for m in messages:
        if not isinstance(m, ToolResultMessage) or not m.images:
            out.append(m)
            continue
        kept = []
        notes = []
        for i in m.images:
            data = i.data or blobs.get(i.hash, b"")
            if data:
                kept.append(replace(i, data=data))
            else:
                notes.append(IMAGE_GONE.format(hash=i.hash[:12]))
        content = "\n".join([m.content, *notes]) if notes else m.content
        out.append(replace(m, content=content, images=tuple(kept)))
    return out


def build_history(
    steps: Iterable[Step],
    *,
    read_only: Callable[[str], bool],
    resumable: Callable[[str], bool] = lambda name: False,
    new_input: bool = False,
    rerun: Collection[str] = (),
) -> History:
    """Messages of one agent from its steps (seq order). `new_input`: a user message is about
    to follow, so calls still unanswered are settled as not run rather than left pending.
    `resumable`: tools whose interrupted call runs again and continues (spawn_agent).
    `rerun`: call ids whose interrupted attempt a settle check found never took effect: run
    again at once, like a read-only call (xclaw/runtime/settle.py)."""
    hist = History(messages=[])
    # Latest result per call id (a retried call supersedes its interrupted attempt).
    results: dict[str, Step] = {}
    first_attempt: dict[str, str] = {}  # call id -> display id of its first tool_call step
    approvals: dict[str, Step] = {}
    # After-tool hooks that changed what the model was told of a result, by call id.
    told: dict[str, str] = {}
    order: list[tuple[str, Any]] = []  # ("user", text) | ("assistant", (AssistantMessage, step))
    for st in steps:
        if st.step_type is StepType.USER_INPUT and st.status is StepStatus.COMPLETED:
            text = st.input_data if isinstance(st.input_data, str) else str(st.input_data)
            order.append(("user", text))
            hist.last_user_step = st.step_id
            out = st.output_data if isinstance(st.output_data, dict) else {}
            if not out.get("steer"):  # (a message that steered a run is no new turn)
                # A new turn: what the last one decided does not carry over.
                hist.instructions = None
                hist.decided.clear()
                hist.edited.clear()
        elif st.step_type is StepType.SYSTEM_ALERT and st.name in (HOOK_ALERT, INSTRUCTIONS_ALERT):
            _declared(st, hist, told)
        elif st.step_type is StepType.LLM_CALL and st.status is StepStatus.COMPLETED:
            out = st.output_data if isinstance(st.output_data, dict) else {}
            if out.get("compaction"):
                # A summary replaced everything before it: the conversation restarts there.
                order = [("user", compacted_message(str(out.get("text") or "")).text)]
                continue
            calls = tuple(ToolCall.from_json(c) for c in out.get("tool_calls") or ())
            msg = AssistantMessage(
                text=str(out.get("text") or ""), tool_calls=calls, thinking=recorded_thinking(out)
            )
            order.append(("assistant", msg))
            for c in calls:
                hist.call_parents[c.id] = st.step_id
            feedback = out.get(OUTPUT_FEEDBACK)
            if isinstance(feedback, str):  # the answer did not validate: the model was told
                order.append(("user", feedback))
        elif st.step_type is StepType.TOOL_CALL and st.call_id:
            results[st.call_id] = st
            first_attempt.setdefault(st.call_id, st.display_id)
        elif st.step_type is StepType.SYSTEM_ALERT and st.name == APPROVAL and st.call_id:
            if st.status is StepStatus.RUNNING:
                approvals[st.call_id] = st
            elif (
                isinstance(st.output_data, dict)
                and isinstance((edited := st.output_data.get(EDITED)), dict)
                and isinstance(edited.get("input"), dict)
            ):
                hist.edited[st.call_id] = edited["input"]

    last = len(order) - 1
    for i, (kind, value) in enumerate(order):
        if kind == "user":
            hist.messages.append(UserMessage(value))
            continue
        reply: AssistantMessage = value
        hist.messages.append(reply)
        # Only the very last entry may leave calls open for the loop to run now.
        open_turn = i == last and not new_input
        for call in reply.tool_calls:
            step = results.get(call.id)
            if step is None:
                if open_turn:
                    if call.id in approvals:
                        hist.pending_approvals[call.id] = approvals[call.id]
                    continue  # never started: safe to run now, exactly once
                why = "the conversation moved on before it ran"
                hist.messages.append(_result(call, NOT_RUN_RESULT.format(why=why), True))
            elif step.status is StepStatus.RUNNING or step.interrupted:
                if open_turn and resumable(call.name):
                    hist.interrupted_retry.append(step.display_id)
                    hist.resumable_calls[call.id] = first_attempt[call.id]
                    continue  # runs again and continues from its own record
                if open_turn and (read_only(call.name) or call.id in rerun):
                    hist.interrupted_retry.append(step.display_id)
                    continue  # read-only, or found not done: re-run automatically
                if open_turn:
                    hist.interrupted_unsafe.append(step.display_id)
                hist.suspect_calls.add(call_signature(call.name, call.input))
                hist.messages.append(_result(call, INTERRUPTED_RESULT, True))
            else:
                failed = step.status is StepStatus.FAILED
                content = tool_output_text(step)
                if not failed and call.id in told:  # an after_tool hook's say
                    content = told[call.id]
                result = _result(call, content, failed)
                images = tool_output_images(step)
                if images:
                    result = replace(result, images=images)
                hist.messages.append(result)
    return hist


def _declared(st: Step, hist: History, told: dict[str, str]) -> None:
    """A declared agent's recorded decision (xclaw/agent/steering.py): the instructions its
    turn began with; a hook's decision, replayed for the call (or model call) it was taken
    for; what an after_tool hook told the model instead of a result."""
    data = st.input_data if isinstance(st.input_data, dict) else {}
    if st.name == INSTRUCTIONS_ALERT:
        if isinstance(data.get("text"), str):
            hist.instructions = data["text"]
        return
    phase, key = data.get("hook"), data.get("key")
    if not isinstance(key, str):
        return
    if phase == "after_tool":
        if data.get("decision") == "deny":
            told[key] = WITHHELD.format(reason=data.get("reason") or "")
        elif data.get("decision") == "rewrite" and isinstance(data.get("value"), str):
            told[key] = data["value"]
        return
    if phase in ("before_tool", "before_model"):
        hist.decided[f"{phase}:{key}"] = data


def recorded_thinking(output: dict[str, Any]) -> tuple[ThinkingBlock, ...]:
    """The thinking blocks of an llm_call's output, exactly as recorded (the provider checks
    signatures byte for byte); a malformed entry is skipped rather than failing the rebuild."""
    blocks: list[ThinkingBlock] = []
    for raw in output.get("thinking") or ():
        if isinstance(raw, dict):
            try:
                blocks.append(ThinkingBlock.from_json(raw))
            except ValueError:
                continue
    return tuple(blocks)


def _result(call: ToolCall, content: str, is_error: bool) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id, name=call.name, content=content, is_error=is_error
    )


def seed_history(messages: list[Message]) -> list[dict[str, str]]:
    """The original tutorial's `history` content (*the seed*, docs/architecture.md glossary):
    [{role, content}] of user text and assistant text."""
    out: list[dict[str, str]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage) and m.text:
            out.append({"role": "assistant", "content": m.text})
    return out
