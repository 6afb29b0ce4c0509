"""[recorder] The glass: turns the agent loop's events into trace rows and live events (write-ahead,
the trace tree: docs/architecture.md). Live events are typed (xclaw/recorder/events.py); the
runtime turns them into wire frames.

Every event becomes one write — a value of xclaw/store/steps/writes.py, built here — put on the
run's WriteStream (xclaw/store/steps/stream.py) in event order, so the order on disk is the order of
events. Whether a write is synced is the table's business (writes.SYNC), not the recorder's:
`before_tool` puts the tool's `running` row and awaits it, and the table makes that a synced
commit of it and of every earlier write of the run (the proof: xclaw/store/steps/writes.py).
The loop also waits for a tool's result (durable before any client hears of it), approvals
and the final answer; the other writes (an LLM call starting, its answer when tool calls
follow) are put without waiting and share a commit with the next one.
A sub-agent interrupted mid-run is continued from its own steps (`resume_child`).

Every value a model, a tool or a user can fill is redacted here, once, on the event loop,
before the write is built or an event made (docs/security.md): a step's name (a tool name the model chose), input,
output, error message and call id (`Redactor.ident`), the agent id, an approval's reason, an
image's media type — and the streamed answer text as a stream (`StreamRedactor`), so that
the deltas a client joins never hold a secret split across two of them. Events are built
only from these redacted values (the runtime sends their frames as they are).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, Protocol

from xclaw.agent.hooks import ResumeState
from xclaw.budgets.ledger import Gate, Reached
from xclaw.errors import BudgetReached
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.messages import Message, ThinkingBlock, ToolCall, call_signature
from xclaw.people.answered_by import AnsweredBy, answer_output
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.events import (
    EventSink,
    Notice,
    StatusChanged,
    StepCommitted,
    TextDelta,
    ThinkingDiscarded,
    ThinkingShown,
    ToolChanged,
    ToolState,
)
from xclaw.recorder.history import EDITED, OUTPUT_FEEDBACK, History
from xclaw.recorder.redact import Redactor, StreamRedactor
from xclaw.store.base import RecordReader
from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import APPROVAL_STEP_NAME as APPROVAL
from xclaw.store.steps.model import (
    MAIN_AGENT,
    Completion,
    NewStep,
    Status,
    Step,
    StepStatus,
    StepType,
)
from xclaw.store.steps.stream import WriteStream
from xclaw.store.steps.writes import (
    AddStep,
    BeginStep,
    FinishStep,
    Hold,
    Refused,
    ReturnAllowance,
    Spent,
    Unqueue,
)
from xclaw.tools.base import ToolResult

__all__ = ["Recorder", "StoreCaller"]

Emit = EventSink
# Given by the runtime: runs after a side-effecting tool's write-ahead row is committed and
# before the tool starts (the workspace snapshot "before step N": files follow memory).
BeforeSideEffect = Callable[[Step], Awaitable[Any]]
# Given by the runtime: an agent's History from its steps (with the toolbox's tool kinds).
Rebuild = Callable[[Iterable[Step]], History]

_ERROR_SUMMARY_CHARS = 500
_CANCELLED = "cancelled by the user"


# A step still being written, or written: a queued write whose slot will hold its step.
Queued = BeginStep | AddStep | FinishStep


class SteerInbox(Protocol):
    """Where a run finds the messages sent to steer it (xclaw/runtime/inputs.py)."""

    async def take(self) -> list[QueuedInput]:
        """The steering messages waiting (not yet recorded), in the order sent."""
        ...

    def delivered(self) -> None:
        """They are recorded and off the queue: its clients are told."""
        ...


# A parent step: its id, or the queued write that makes it (resolved on the writer's thread).
ParentRef = str | Queued | None


def _provider_ids(response: LLMResponse) -> dict[str, str]:
    """The provider's ids an llm_call step keeps when it sent them: `request_id`, of the HTTP
    request (what its support asks for), and `response_id`, of the reply itself (`msg_…`,
    `chatcmpl-…`: OpenTelemetry's gen_ai.response.id)."""
    ids = {"request_id": response.request_id, "response_id": response.response_id}
    return {k: v for k, v in ids.items() if v}


def _endpoint(response: LLMResponse) -> dict[str, str]:
    """`endpoint`, the server that answered when a base URL was configured (no credentials:
    xclaw.llm.wire.public_endpoint): it decides whether a provider's price applies
    (llm/prices.py)."""
    return {"endpoint": response.endpoint} if response.endpoint else {}


class Recorder:
    """An AgentObserver writing one agent's steps; `child()` gives a sub-agent's recorder
    whose steps hang under the spawning tool call."""

    def __init__(
        self,
        *,
        db: StoreCaller[RecordReader],
        writes: WriteStream,
        session_id: str,
        emit: Emit,
        redact: Redactor,
        agent: str = MAIN_AGENT,
        root_parent: str | None = None,
        call_parents: dict[str, str] | None = None,
        pending_approvals: dict[str, Step] | None = None,
        turn_root: str | None = None,
        before_side_effect: BeforeSideEffect | None = None,
        resumable_calls: dict[str, str] | None = None,
        rebuild: Rebuild | None = None,
        after_side_effect: BeforeSideEffect | None = None,
        budget: Gate | None = None,
        steers: SteerInbox | None = None,
    ) -> None:
        # Reads (the session's status, a sub-agent's steps) on a thread; the writes go on
        # the run's stream (fenced by its lease), shared with sub-agents' recorders: one
        # ordered stream of writes per run.
        self.db = db
        self.store = db.store
        self.writes = writes
        self.before_side_effect = before_side_effect
        # Given when the workspace follows the session: what a side effect changed is
        # recorded before its step's completion (xclaw.workspace.timetravel.Workspaces.
        # snapshot_after).
        self.after_side_effect = after_side_effect
        self._side_effects: set[str] = set()  # call ids whose tool may have changed files
        self.session_id = session_id
        self.steers = steers  # the main agent's only: messages that steer the run
        self.emit = emit
        self.redact = redact
        self.agent = agent
        self._root_parent = root_parent
        self._turn_root: ParentRef = turn_root if turn_root is not None else root_parent
        self._call_parents: dict[str, ParentRef] = dict(call_parents or {})
        self._approvals: dict[str, Step] = dict(pending_approvals or {})
        self._tool_steps: dict[str, Step] = {}
        self._llm: BeginStep | None = None
        # The run's budget check (docs/budgets.md), shared with its sub-agents; None: no cap
        # applies, and a call costs nothing more than its row.
        self.budget = budget
        self._hold: Hold | None = None
        self._model = ""
        # Interrupted sub-agents to continue: call id -> their branch's agent id.
        self._resumable = dict(resumable_calls or {})
        self._rebuild = rebuild
        self._child_histories: dict[str, tuple[str, History]] = {}
        # The main agent's reply being streamed: its deltas redacted as one text.
        self._stream: StreamRedactor | None = None
        # The main agent's final answer is committed, with the session's Success.
        self.answered = False

    # --- helpers ------------------------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        return self.agent == MAIN_AGENT

    def _new(self, kind: StepType, name: str, data: Any, call_id: str | None = None) -> NewStep:
        """A step as it is recorded: redacted here, on the loop (its parent goes on the write,
        resolved when the write is applied)."""
        return NewStep(
            step_type=kind,
            # A tool's name goes back to the provider in the rebuilt history: a stand-in that
            # is still a valid tool name (letters, digits, `_`), not `[REDACTED]`.
            name=self.redact.ident(name) if kind is StepType.TOOL_CALL else self.redact.text(name),
            input_data=self.redact(data),
            agent=self.agent,
            call_id=None if call_id is None else self.redact.ident(call_id),
        )

    def _put(
        self, write: Queued, on_done: Callable[[Step], Any] | None = None
    ) -> asyncio.Future[Step]:
        """Put a write on the stream without waiting; `on_done` runs on the loop once it is
        committed (live events, in commit order). How it commits is writes.SYNC's say."""
        future: asyncio.Future[Step] = self.writes.put(write)
        future.add_done_callback(_retrieve)
        if on_done is not None:
            future.add_done_callback(partial(_when_committed, on_done))
        return future

    async def _write(self, write: Queued, on_done: Callable[[Step], Any] | None = None) -> Step:
        """Put a write and wait until it, and every earlier write of the run, is committed
        (synced, for the kinds of write someone is told of next: writes.SYNC)."""
        return await self._put(write, on_done)

    def give_back(self) -> asyncio.Future[Any] | None:
        """The run's allowance on its shared scopes given back (docs/budgets.md,
        "Allowances"), after every write put so far; None when it has none."""
        if self.budget is None or not self.budget.claimed:
            return None
        self.budget.returned()
        future: asyncio.Future[Any] = self.writes.put(ReturnAllowance(session_id=self.session_id))
        future.add_done_callback(_retrieve)
        return future

    async def settle(self) -> None:
        """Wait until every write put so far is committed (errors are their waiters')."""
        last = self.writes.last()
        if last is not None:
            await asyncio.wait([last])

    def _step_event(self, step: Step) -> None:
        self.emit(StepCommitted(step))

    def _tool_event(
        self, step: Step, call: ToolCall, state: ToolState, output: str | None = None
    ) -> None:
        self.emit(
            ToolChanged(
                step_id=step.display_id,
                name=step.name,  # the tool's name as recorded: redacted
                input=step.input_data,  # the call's input as recorded: redacted once, there
                state=state,
                output=output,
                agent=None if self.is_main else self.agent,
                call_id=step.call_id,
            )
        )

    async def _status_changed(self) -> None:
        session = await self.db(self.store.get_session, self.session_id)
        self.emit(StatusChanged(session.status))

    # --- AgentObserver --------------------------------------------------------------------------
    async def user_input(self, text: str) -> None:
        parent = self._root_parent
        # Not awaited, but not held for company either: it moves the session to Running,
        # which clients are told of as the run starts (one relaxed commit per turn).
        write = AddStep(
            session_id=self.session_id,
            step=self._new(StepType.USER_INPUT, "user", text),
            parent=parent,
        )
        self._put(write, self._step_event)
        self._turn_root = write

    async def steered(self) -> list[str]:
        """The messages sent to steer the run, each recorded here — where it is delivered,
        at this tool boundary — as a `user_input` step whose output says `steer` (and the
        message id it was sent with), then taken off the queue. A kill between the two
        leaves it recorded and queued: its id, recorded, keeps it from being given twice."""
        if self.steers is None or not self.is_main:
            return []
        entries = await self.steers.take()
        for entry in entries:
            output = {**(entry.sent_by or {}), "messageId": entry.id, "steer": True}
            write = AddStep(
                session_id=self.session_id,
                step=self._new(StepType.USER_INPUT, "user", entry.content),
                parent=self._root_parent,
                output_data=output,
            )
            self._put(write, self._step_event)
            self._turn_root = write
            await self.writes.put(Unqueue(session_id=self.session_id, id=entry.id))
        if entries:
            self.steers.delivered()
        return [e.content for e in entries]

    async def llm_started(self, request: LLMRequest, model: str, params: dict[str, Any]) -> None:
        # Not the prompt itself: the messages are rebuilt from the steps (linear storage).
        data = {"model": model, "params": params}
        if self.is_main:
            self._end_stream()  # (a call that never finished: nothing more comes of it)
            self._stream = self.redact.stream()
        parent = self._turn_root
        hold = None
        if self.budget is not None:
            got = self.budget.reserve_call(request, model)
            if isinstance(got, Reached):  # not made: nothing written, the run waits
                self._end_stream()
                raise BudgetReached(f"budget reached: {got.words()}", got.to_json())
            hold = got
        begin = BeginStep(
            session_id=self.session_id,
            step=self._new(StepType.LLM_CALL, model, data),
            parent=parent,
            hold=hold,
        )
        if hold is None:
            self._hold, self._model, self._llm = None, model, begin
            # Not awaited: the LLM call is no side effect; the row commits while the model
            # thinks (writes.SYNC).
            self._put(begin, self._step_event)
            return
        # Under a cap the call waits for its hold (and step) to commit, which checks the
        # shared caps: no request is sent whose reservation is not on the record.
        # (Set first: a cancel while waiting finishes the step as any call's.)
        self._hold, self._model, self._llm = hold, model, begin
        written: object = await self._write(begin)
        if isinstance(written, Refused):  # not made: nothing written, the run waits
            assert self.budget is not None
            self._hold = self._llm = None
            self._end_stream()
            reached = self.budget.refused(hold, written)
            raise BudgetReached(f"budget reached: {reached.words()}", reached.to_json())
        assert isinstance(written, Step)
        assert self.budget is not None
        self.budget.written(hold)
        self._step_event(written)

    def _spent(self, response: LLMResponse | None) -> Spent | None:
        """The call's hold settled: at what it cost, or (`response` None: a failed call, not
        billed) at nothing."""
        hold, self._hold = self._hold, None
        if hold is None or self.budget is None:
            return None
        if response is None:
            return self.budget.settle(hold, 0, 0.0)
        return self.budget.settle_call(hold, response, self._model)

    async def llm_delta(self, text: str) -> None:
        if self.is_main and text:
            if self._stream is None:
                self._stream = self.redact.stream()
            safe = self._stream.feed(text)
            if safe:
                self.emit(TextDelta(safe))

    def _end_stream(self) -> None:
        """The reply's stream ended (answered, failed, cancelled): what it held back goes out,
        so the deltas join to the whole reply, redacted."""
        stream, self._stream = self._stream, None
        if stream is not None:
            rest = stream.flush()
            if rest:
                self.emit(TextDelta(rest))

    async def llm_notice(self, text: str) -> None:
        """A line about the call in flight (a model server still starting): a `notice`."""
        who = "" if self.is_main else f"sub-agent {self.agent}: "
        self.emit(Notice(f"{who}{self.redact.text(text)}"))

    async def llm_thinking(self, block: ThinkingBlock) -> None:
        if self.is_main:
            self.emit(ThinkingShown(self._redacted_thinking(block)))

    async def llm_thinking_discarded(self) -> None:
        if self.is_main:
            self.emit(ThinkingDiscarded())

    async def llm_finished(
        self, response: LLMResponse, *, output: Any = None, rejected: str | None = None
    ) -> None:
        assert self._llm is not None
        self._end_stream()
        # An answer that did not validate is no final answer: the feedback follows it.
        final = self.is_main and not response.tool_calls and rejected is None
        data: dict[str, Any] = {
            "text": response.text,
            "tool_calls": [
                {**c.to_json(), "id": self.redact.ident(c.id), "name": self.redact.ident(c.name)}
                for c in response.tool_calls
            ],
            "model": response.model,
            "stop_reason": response.stop_reason,
        }
        data |= _provider_ids(response) | _endpoint(response)
        if output is not None:  # the structured answer, validated: RunResult.output
            data["output"] = output
        if rejected is not None:  # what the model was told (the rebuilt history says it again)
            data[OUTPUT_FEEDBACK] = rejected
        output = self.redact(data)
        output["usage"] = response.usage.to_json()  # an estimate says so
        thinking = [self._redacted_thinking(b) for b in response.thinking]
        if thinking:
            output["thinking"] = thinking
        llm = self._llm
        self._llm = None
        done = FinishStep(
            session_id=self.session_id,
            step=llm,
            done=Completion(
                status=StepStatus.COMPLETED,
                output_data=output,
                token_usage_prompt=_counted(response.usage.prompt_tokens, response),
                token_usage_completion=_counted(response.usage.completion_tokens, response),
            ),
            session_status=Status.SUCCESS if final else None,
            spent=self._spent(response),
        )
        committed = self._put(done, self._step_event)
        if final:  # the run's allowance given back in the answer's commit
            self.give_back()
        for call in response.tool_calls:
            self._call_parents[call.id] = done  # resolves to the llm_call's id

        if final:
            # The final answer and Success commit together, durably, before anyone hears of it.
            await committed
            self.answered = True
            self.emit(StatusChanged(Status.SUCCESS))

    def _redacted_thinking(self, block: ThinkingBlock) -> dict[str, Any]:
        """Thinking text is redacted like all text; the signature and the opaque data of a
        redacted_thinking block are the provider's bytes and stay untouched."""
        out = block.to_json()
        if "thinking" in out:
            out["thinking"] = self.redact.text(out["thinking"])
        return out

    async def compaction_finished(self, response: LLMResponse, summarised: int) -> None:
        """The summary that replaces the conversation so far: an llm_call step whose output
        says `compaction` (history rebuilds start from it; rollback undoes it)."""
        assert self._llm is not None
        self._end_stream()
        data: dict[str, Any] = {
            "text": response.text,
            "tool_calls": [],
            "model": response.model,
            "stop_reason": response.stop_reason,
        }
        data |= _provider_ids(response) | _endpoint(response)
        output = self.redact(data)
        output["usage"] = response.usage.to_json()
        output["compaction"] = {"messages": summarised}
        llm = self._llm
        self._llm = None
        done = Completion(
            status=StepStatus.COMPLETED,
            output_data=output,
            token_usage_prompt=_counted(response.usage.prompt_tokens, response),
            token_usage_completion=_counted(response.usage.completion_tokens, response),
        )
        spent = self._spent(response)
        self._put(
            FinishStep(session_id=self.session_id, step=llm, done=done, spent=spent),
            self._step_event,
        )
        who = "" if self.is_main else f"sub-agent {self.agent}: "
        self.emit(
            Notice(
                f"[compact] {who}{summarised} earlier messages are now one summary "
                f"({len(response.text)} characters); the conversation goes on from it"
            )
        )

    async def llm_failed(self, error: str) -> None:
        self._end_stream()
        llm = self._llm
        if llm is None:
            return
        self._llm = None
        failed = Completion(status=StepStatus.FAILED, error_message=self.redact.text(error))
        # A provider's error is not billed: its hold settles at nothing. A call cut short by
        # the user may have been: its hold stays at its reservation.
        cancelled = error == _CANCELLED  # (the loop's words for it: agent/loop.py)
        spent = None if cancelled else self._spent(None)
        self._hold = None
        await self._write(
            FinishStep(session_id=self.session_id, step=llm, done=failed, told=True, spent=spent),
            self._step_event,
        )

    async def approval_requested(
        self, call: ToolCall, reason: str, maybe_repeated: bool
    ) -> str | None:
        pending = self._approvals.get(call.id)
        if pending is not None and pending.status is StepStatus.RUNNING:
            return pending.display_id  # approval asked again after a restart: same step
        data = {
            "tool": call.name,
            "args": call.input,
            "reason": reason,
            "maybeRepeated": maybe_repeated,
        }
        asked = BeginStep(
            session_id=self.session_id,
            step=self._new(StepType.SYSTEM_ALERT, APPROVAL, data, call.id),
            parent=self._parent_of(call),
        )
        step = await self._write(asked, self._step_event)
        self._approvals[call.id] = step
        await self._status_changed()
        return step.display_id

    async def approval_decided(
        self,
        call: ToolCall,
        approved: bool,
        why: str,
        by: AnsweredBy,
        edited: dict[str, Any] | None = None,
    ) -> None:
        pending = self._approvals.pop(call.id, None)
        if pending is None:
            return
        answered = answer_output(approved, by, why)
        if edited is not None:  # the person's input runs; the model's is kept beside it
            answered[EDITED] = {"input": edited, "original": call.input}
        # `why` may quote what the model asked for (a denial's reason): redacted as any text.
        output = self.redact(answered)
        answer = Completion(status=StepStatus.COMPLETED, output_data=output)
        await self._write(
            FinishStep(session_id=self.session_id, step=pending, done=answer, told=True),
            self._step_event,
        )
        await self._status_changed()

    async def tool_started(self, call: ToolCall, read_only: bool) -> str | None:
        step = await self.before_tool(call)
        self._tool_steps[call.id] = step
        self._tool_event(step, call, "running")
        self._step_event(step)
        if not read_only and self.before_side_effect is not None:
            self._side_effects.add(call.id)
            await self.before_side_effect(step)  # committed row first, then the snapshot
        return step.display_id

    async def before_tool(self, call: ToolCall) -> Step:
        """Write-ahead: returns only once the tool's `running` row — and every write of this
        run put before it, in event order — is committed and synced to disk. The loop starts
        the tool only after this returns, so no side effect runs without a durable record."""
        begun = BeginStep(
            session_id=self.session_id,
            step=self._new(StepType.TOOL_CALL, call.name, call.input, call.id),
            parent=self._parent_of(call),  # maybe a write still queued: resolved when applied
        )
        # Kind TOOL_BEGINS: a synced commit before the future resolves (writes.SYNC).
        return await self._write(begun)

    async def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        running = self._tool_steps.pop(call.id)
        content = self.redact.text(result.content)
        state: ToolState = "failed" if result.is_error else "completed"
        # Images: bytes to the content-addressed blob store, only their hashes in the row.
        refs = [(hashlib.sha256(i.data).hexdigest(), i) for i in result.images]
        blobs = {h: i.data for h, i in refs}
        output: Any = content
        if refs:
            output = {
                "content": content,
                "images": [
                    {"hash": h, "media_type": self.redact.text(i.media_type), "size": len(i.data)}
                    for h, i in refs
                ],
            }

        done = Completion(
            status=StepStatus.FAILED if result.is_error else StepStatus.COMPLETED,
            output_data=output,
            error_message=(content[:_ERROR_SUMMARY_CHARS] or "tool failed")
            if result.is_error
            else None,
        )
        # Clients hear "completed" only once the row is durable (synced: told, writes.SYNC):
        # a kill — or a power loss — right after clients hear of it cannot leave the step
        # `interrupted` in the record. Awaited, so the events still come before the next
        # model answer's.
        finished = FinishStep(
            session_id=self.session_id, step=running, done=done, told=True, blobs=blobs
        )
        # When the workspace follows the session, what the tool changed is stored before its
        # completion is written: a worker killed in between leaves the step interrupted, and
        # the next worker settles it from files the object store holds. The other way round,
        # the record said `completed` while the files died with the worker (found by
        # bench/torture_deployment.py).
        if call.id in self._side_effects:
            self._side_effects.discard(call.id)
            if self.after_side_effect is not None:
                await self.after_side_effect(running)
        if self.budget is not None:
            # Under a cap the next model call's hold must commit before the call: this
            # result is not awaited, so the hold — put next, with no wait between — shares
            # its (synced) commit instead of taking one of its own. Clients still hear of the
            # result only once it is durable, and before anything the run writes after it
            # (events follow the commit order); a failure breaks the stream, and the hold's
            # awaited write reports it.
            self._put(finished, partial(self._tool_done, running, call, state, content))
            return
        step = await self._write(finished)
        self._tool_done(running, call, state, content, step)

    def _tool_done(
        self, running: Step, call: ToolCall, state: ToolState, content: str, step: Step
    ) -> None:
        self._tool_event(running, call, state, content)
        self._step_event(step)

    async def tool_refused(self, call: ToolCall, reason: str) -> None:
        reason = self.redact.text(reason)  # "unknown tool X" names what the model wrote
        output = f"Not run: {reason}"
        refused = AddStep(
            session_id=self.session_id,
            step=self._new(StepType.TOOL_CALL, call.name, call.input, call.id),
            status=StepStatus.FAILED,
            output_data=output,
            error_message=reason,
            parent=self._parent_of(call),
        )
        step = await self._write(refused)
        self._tool_event(step, call, "failed", output)
        self._step_event(step)

    async def alert(self, name: str, detail: dict[str, Any]) -> None:
        # An alert about one tool call (`callId`) hangs beside it and carries its call id.
        call_id = detail.get("callId") if isinstance(detail.get("callId"), str) else None
        parent = self._call_parents.get(call_id, self._turn_root) if call_id else self._turn_root
        if call_id:  # the same stand-in as the call's own steps (redacted as an id)
            detail = {**detail, "callId": self.redact.ident(call_id)}
        said = AddStep(
            session_id=self.session_id,
            step=self._new(StepType.SYSTEM_ALERT, name, detail, call_id),
            parent=parent,
        )
        await self._write(said, self._step_event)

    async def note(self, name: str, detail: dict[str, Any]) -> None:
        """A hook's decision, a turn's instructions: put, not waited for; committed with the
        next write that is (before anything acts on it)."""
        call_id = detail.get("callId") if isinstance(detail.get("callId"), str) else None
        parent = self._call_parents.get(call_id, self._turn_root) if call_id else self._turn_root
        redact = self.redact
        # Redacted value by value: the keys are the loop's own words (one of these per hook
        # decision: walking the keys too was half its cost, bench/runtime_bench.py --agent).
        data: dict[str, Any] = {}
        for key, value in detail.items():
            if type(value) is str:
                data[key] = redact.text(value)
            elif value is None or isinstance(value, (bool, int, float)):
                data[key] = value
            else:
                data[key] = redact(value)
        ident = None
        if call_id:  # the same stand-in as the call's own steps (and its key: the call's id)
            ident = redact.ident(call_id)
            data["callId"] = ident
            if "key" in data:
                data["key"] = ident
        step = NewStep(
            step_type=StepType.SYSTEM_ALERT,
            name=name,
            input_data=data,
            agent=self.agent,
            call_id=ident,
        )
        said = AddStep(
            session_id=self.session_id,
            step=step,
            parent=parent,
            note=True,  # committed with the next write that is waited for (writes.SYNC)
        )
        self._put(said, self._step_event)

    async def resume_child(self, call: ToolCall) -> tuple[list[Message], ResumeState] | None:
        agent = self._resumable.pop(call.id, None)
        if agent is None or self._rebuild is None:
            return None
        steps = await self.db(self.store.steps, self.session_id, agent=agent)
        hist = self._rebuild(steps)
        if not hist.messages:
            return None  # it never recorded its task: start it afresh
        self._child_histories[call.id] = (agent, hist)
        # The branch says where it resumed, as the main agent's record does.
        spawn = self._tool_steps.get(call.id)
        detail = {"retrying": hist.interrupted_retry, "mayHaveRun": hist.interrupted_unsafe}
        alert = NewStep(
            step_type=StepType.SYSTEM_ALERT,
            name="resume",
            input_data=detail,
            parent_step_id=spawn.step_id if spawn else None,
            agent=agent,
        )
        self._put(AddStep(session_id=self.session_id, step=alert), self._step_event)
        for ref in hist.interrupted_unsafe:
            self.emit(
                Notice(
                    f"[resume] sub-agent {agent}: {ref} was interrupted and may or may not have "
                    "run; it runs again only if the model re-issues it and you approve"
                )
            )
        return hist.messages, hist.resume_state(with_note=True)

    def recorded_signature(self, call: ToolCall) -> str:
        """The call's signature as its recorded name and input give it (redacted): what
        the interrupted calls read back from the record are (no blind repeat)."""
        return call_signature(self.redact.ident(call.name), self.redact(call.input))

    def child(self, call: ToolCall) -> Recorder:
        spawn = self._tool_steps.get(call.id)
        # A continued sub-agent keeps its branch's agent id: its steps, old and new, are one
        # agent's record (rebuilt together if it is interrupted again).
        agent, hist = self._child_histories.pop(call.id, (None, None))
        if agent is None:
            agent = spawn.display_id if spawn else f"{self.agent}/{self.redact.ident(call.id)}"
        return Recorder(
            db=self.db,
            session_id=self.session_id,
            emit=self.emit,
            redact=self.redact,
            agent=agent,
            root_parent=spawn.step_id if spawn else step_id_of_now(self._turn_root),
            call_parents=hist.call_parents if hist else None,
            pending_approvals=hist.pending_approvals if hist else None,
            before_side_effect=self.before_side_effect,
            after_side_effect=self.after_side_effect,
            writes=self.writes,
            resumable_calls=hist.resumable_calls if hist else None,
            rebuild=self._rebuild,
            budget=self.budget,  # a sub-agent draws on its parent's remainder
        )

    def _parent_of(self, call: ToolCall) -> ParentRef:
        if call.id in self._call_parents:
            return self._call_parents[call.id]
        return self._turn_root


def _when_committed(on_done: Callable[[Step], Any], f: asyncio.Future[Step]) -> None:
    if not f.cancelled() and f.exception() is None:
        on_done(f.result())


def _retrieve(f: asyncio.Future[Any]) -> None:
    """A failed write nobody awaits is still retrieved (no "exception never retrieved");
    the stream is broken by it, so the next awaited write reports the failure."""
    if not f.cancelled():
        f.exception()


def step_id_of_now(ref: ParentRef) -> str | None:
    """A parent reference whose write is already committed (it was awaited before)."""
    if ref is None or isinstance(ref, str):
        return ref
    return ref.slot.step.step_id if ref.slot.step is not None else None


def _counted(tokens: int, response: LLMResponse) -> int | None:
    """A token column's value: the provider's count, or NULL (unknown) when it reported none
    — the estimate lives in output_data.usage, flagged, never in the token columns."""
    return None if response.usage.estimated else tokens
