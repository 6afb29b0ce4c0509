"""The glass: turns the agent loop's events into trace rows (R4, R5) and live frames.

Each event becomes one store transaction, awaited before the loop goes on, so the order on
disk is the order of events and a tool's `running` row is durable before the tool starts.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from functools import partial
from typing import Any, Awaitable, Callable, TypeVar

from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.messages import ToolCall
from xclaw.protocol import step_json
from xclaw.recorder.history import APPROVAL
from xclaw.recorder.redact import Redactor
from xclaw.store.base import Store
from xclaw.store.model import MAIN_AGENT, NewStep, Status, Step, StepStatus, StepType
from xclaw.tools.base import ToolResult

T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]
# Given by the runtime: runs after a side-effecting tool's write-ahead row is committed and
# before the tool starts (the workspace snapshot "before step N", invariant 9).
BeforeSideEffect = Callable[[Step], Awaitable[Any]]

_ERROR_SUMMARY_CHARS = 500


class StoreCaller:
    """Runs the synchronous store off the event loop (conventions: never block the loop)."""

    def __init__(self, store: Store, executor: Executor | None = None) -> None:
        self.store = store
        self._executor = executor

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, partial(fn, *args, **kwargs))


class Recorder:
    """An AgentObserver writing one agent's steps; `child()` gives a sub-agent's recorder
    whose steps hang under the spawning tool call."""

    def __init__(
        self,
        *,
        db: StoreCaller,
        session_id: str,
        emit: Emit,
        redact: Redactor,
        agent: str = MAIN_AGENT,
        root_parent: str | None = None,
        call_parents: dict[str, str] | None = None,
        pending_approvals: dict[str, Step] | None = None,
        turn_root: str | None = None,
        before_side_effect: BeforeSideEffect | None = None,
    ) -> None:
        self.db = db
        self.before_side_effect = before_side_effect
        self.store = db.store
        self.session_id = session_id
        self.emit = emit
        self.redact = redact
        self.agent = agent
        self._root_parent = root_parent
        self._turn_root = turn_root if turn_root is not None else root_parent
        self._call_parents: dict[str, str] = dict(call_parents or {})
        self._approvals: dict[str, Step] = dict(pending_approvals or {})
        self._tool_steps: dict[str, Step] = {}
        self._llm: Step | None = None
        self._spawn_steps: dict[str, Step] = {}

    # --- helpers ------------------------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        return self.agent == MAIN_AGENT

    def _new(self, kind: StepType, name: str, data: Any, parent: str | None, call_id: str | None = None) -> NewStep:
        return NewStep(
            step_type=kind,
            name=name,
            input_data=self.redact(data),
            parent_step_id=parent,
            agent=self.agent,
            call_id=call_id,
        )

    def _step_frame(self, step: Step) -> None:
        self.emit({"type": "step", "step": step_json(step)})

    def _tool_frame(self, step: Step, call: ToolCall, state: str, output: str | None = None) -> None:
        frame: dict[str, Any] = {
            "type": "tool",
            "stepId": step.display_id,
            "name": call.name,
            "input": self.redact(call.input),
            "state": state,
        }
        if output is not None:
            frame["output"] = output
        if not self.is_main:
            frame["agent"] = self.agent
        self.emit(frame)

    async def _status_changed(self) -> None:
        session = await self.db(self.store.get_session, self.session_id)
        self.emit({"type": "status", "status": session.status.value})

    # --- AgentObserver --------------------------------------------------------------------------
    async def user_input(self, text: str) -> None:
        step = await self.db(
            self.store.add_step,
            self.session_id,
            self._new(StepType.USER_INPUT, "user", text, self._root_parent),
        )
        self._turn_root = step.step_id
        self._step_frame(step)

    async def llm_started(self, request: LLMRequest, model: str, params: dict[str, Any]) -> None:
        # Not the prompt itself: the messages are rebuilt from the steps (linear storage).
        data = {"model": model, "params": params}
        self._llm = await self.db(
            self.store.begin_step,
            self.session_id,
            self._new(StepType.LLM_CALL, model, data, self._turn_root),
        )
        self._step_frame(self._llm)

    async def llm_delta(self, text: str) -> None:
        if self.is_main and text:
            self.emit({"type": "delta", "content": self.redact.text(text)})

    async def llm_finished(self, response: LLMResponse) -> None:
        assert self._llm is not None
        final = self.is_main and not response.tool_calls
        output = self.redact(
            {
                "text": response.text,
                "tool_calls": [c.to_json() for c in response.tool_calls],
                "model": response.model,
                "stop_reason": response.stop_reason,
            }
        )
        # The final answer and Success commit together, durably, before anyone hears of it.
        step = await self.db(
            self.store.complete_step,
            self.session_id,
            self._llm.seq,
            output_data=output,
            token_usage_prompt=response.usage.prompt_tokens,
            token_usage_completion=response.usage.completion_tokens,
            session_status=Status.SUCCESS if final else None,
        )
        for call in response.tool_calls:
            self._call_parents[call.id] = step.step_id
        self._llm = None
        self._step_frame(step)
        if final:
            self.emit({"type": "status", "status": Status.SUCCESS.value})

    async def llm_failed(self, error: str) -> None:
        if self._llm is None:
            return
        step = await self.db(
            self.store.fail_step, self.session_id, self._llm.seq, error_message=self.redact.text(error)
        )
        self._llm = None
        self._step_frame(step)

    async def approval_requested(self, call: ToolCall, reason: str, maybe_repeated: bool) -> str | None:
        pending = self._approvals.get(call.id)
        if pending is not None and pending.status is StepStatus.RUNNING:
            return pending.display_id  # asked again after a restart (R9): same step
        data = {"tool": call.name, "args": call.input, "reason": reason, "maybeRepeated": maybe_repeated}
        step = await self.db(
            self.store.begin_step,
            self.session_id,
            self._new(StepType.SYSTEM_ALERT, APPROVAL, data, self._parent_of(call), call.id),
        )
        self._approvals[call.id] = step
        self._step_frame(step)
        await self._status_changed()
        return step.display_id

    async def approval_decided(self, call: ToolCall, approved: bool, why: str) -> None:
        pending = self._approvals.pop(call.id, None)
        if pending is None:
            return
        step = await self.db(
            self.store.complete_step,
            self.session_id,
            pending.seq,
            output_data={"approved": approved, "why": why},
        )
        self._step_frame(step)
        await self._status_changed()

    async def tool_started(self, call: ToolCall, read_only: bool) -> None:
        step = await self.db(
            self.store.begin_step,
            self.session_id,
            self._new(StepType.TOOL_CALL, call.name, call.input, self._parent_of(call), call.id),
        )
        self._tool_steps[call.id] = step
        self._tool_frame(step, call, "running")
        self._step_frame(step)
        if not read_only and self.before_side_effect is not None:
            await self.before_side_effect(step)  # committed row first, then the snapshot

    async def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        running = self._tool_steps.pop(call.id)
        content = self.redact.text(result.content)
        if result.is_error:
            step = await self.db(
                self.store.fail_step,
                self.session_id,
                running.seq,
                error_message=content[:_ERROR_SUMMARY_CHARS] or "tool failed",
                output_data=content,
            )
        else:
            step = await self.db(
                self.store.complete_step, self.session_id, running.seq, output_data=content
            )
        self._tool_frame(step, call, "failed" if result.is_error else "completed", content)
        self._step_frame(step)

    async def tool_refused(self, call: ToolCall, reason: str) -> None:
        step = await self.db(
            self.store.add_step,
            self.session_id,
            self._new(StepType.TOOL_CALL, call.name, call.input, self._parent_of(call), call.id),
            status=StepStatus.FAILED,
            output_data=f"Not run: {reason}",
            error_message=reason,
        )
        self._tool_frame(step, call, "failed", f"Not run: {reason}")
        self._step_frame(step)

    async def alert(self, name: str, detail: dict[str, Any]) -> None:
        step = await self.db(
            self.store.add_step,
            self.session_id,
            self._new(StepType.SYSTEM_ALERT, name, detail, self._turn_root),
        )
        self._step_frame(step)

    def child(self, call: ToolCall) -> "Recorder":
        spawn = self._tool_steps.get(call.id)
        return Recorder(
            db=self.db,
            session_id=self.session_id,
            emit=self.emit,
            redact=self.redact,
            agent=spawn.display_id if spawn else f"{self.agent}/{call.id}",
            root_parent=spawn.step_id if spawn else self._turn_root,
            before_side_effect=self.before_side_effect,
        )

    def _parent_of(self, call: ToolCall) -> str | None:
        if call.id in self._call_parents:
            return self._call_parents[call.id]
        return self._turn_root
