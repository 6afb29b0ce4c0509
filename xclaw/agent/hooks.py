"""[agent] The seams the agent loop talks through: an observer (the recorder, behind the glass) and
an approver (a human, over whatever channel). The loop imports neither the store nor the
gateway; it only awaits these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.messages import Message, ThinkingBlock, ToolCall
from xclaw.people.answered_by import Answer, AnsweredBy
from xclaw.tools.base import ToolResult


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    step_id: str | None  # display id of the recorded approval step (s0007), if recorded
    call: ToolCall
    reason: str
    # The call matches one that was interrupted mid-run: it may already have happened.
    maybe_repeated: bool = False
    agent: str = "main"


@dataclass
class ResumeState:
    """What a resumed run must know beyond the messages (no blind repeat)."""

    # Appended (not stored) after the history for the next LLM call only (the resume note).
    note: str | None = None
    # Signatures of interrupted calls that may have had side effects: if the model issues
    # one again, a human must approve it with a "may already have run" warning.
    suspect_calls: set[str] = field(default_factory=set)
    # Tool-call ids whose approval was pending when the process died: approval asked again.
    pending_approvals: set[str] = field(default_factory=set)
    # The turn's instructions as they were recorded when it began (a declared agent's
    # function is not asked again: docs/agents.md).
    instructions: str | None = None
    # Hook decisions recorded before the crash, by key (`before_tool:<call id>`,
    # `after_tool:<call id>`, `before_model:<n>`): replayed, never asked again.
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Inputs a person edited as they approved, by call id (the call runs with them).
    edited: dict[str, dict[str, Any]] = field(default_factory=dict)


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Answer:
        """Whether to run the call, and who said so. May wait as long as it likes; the loop
        applies timeouts (and records them as the answer)."""
        ...


class AgentObserver(Protocol):
    """Every event of the loop, awaited in order. `tool_started` returning is the
    write-ahead point: the loop runs the tool only afterwards (write-ahead)."""

    async def user_input(self, text: str) -> None: ...

    async def llm_started(
        self, request: LLMRequest, model: str, params: dict[str, Any]
    ) -> None: ...

    async def llm_delta(self, text: str) -> None: ...

    async def llm_thinking(self, block: ThinkingBlock) -> None:
        """Each reasoning block as soon as the provider has it (before the answer's deltas)."""
        ...

    async def llm_thinking_discarded(self) -> None:
        """The blocks shown so far belong to an attempt that failed and is made again (a
        retry, a fallback): void; new ones follow."""
        ...

    async def llm_notice(self, text: str) -> None:
        """A line for the user about the call in flight (a model server still starting)."""
        ...

    def recorded_signature(self, call: ToolCall) -> str:
        """`call_signature` of the call as the record will hold it (redacted, say), to match
        a re-issued call against the interrupted ones read back from the record (no blind
        repeat). An observer that records calls as they are returns `call_signature`."""
        ...

    async def llm_finished(
        self, response: LLMResponse, *, output: Any = None, rejected: str | None = None
    ) -> None:
        """`output`: the turn's structured answer, validated (its final step holds it);
        `rejected`: what the model is told because its answer did not validate (the call is
        then no final answer). Both passed only for an agent with an output type."""
        ...

    async def llm_failed(self, error: str) -> None: ...

    async def compaction_finished(self, response: LLMResponse, summarised: int) -> None:
        """The end of a summary call (begun with llm_started, params["purpose"] ==
        "compaction"): the summary replaces the `summarised` messages before it."""
        ...

    async def approval_requested(
        self, call: ToolCall, reason: str, maybe_repeated: bool
    ) -> str | None:
        """Record the request; returns its step display id."""
        ...

    async def approval_decided(
        self,
        call: ToolCall,
        approved: bool,
        why: str,
        by: AnsweredBy,
        edited: dict[str, Any] | None = None,
    ) -> None:
        """`edited`: the input the person gave instead of the model's (recorded beside the
        original); passed only when there is one."""
        ...

    async def tool_started(self, call: ToolCall, read_only: bool) -> str | None:
        """The write-ahead point; returns the tool_call step's display id (s0007), if
        recorded (what the call's ToolContext.step_id says)."""
        ...

    async def tool_finished(self, call: ToolCall, result: ToolResult) -> None: ...

    async def tool_refused(self, call: ToolCall, reason: str) -> None:
        """A call that never ran (denied, refused by policy, unknown tool, bad input)."""
        ...

    async def alert(self, name: str, detail: dict[str, Any]) -> None:
        """A system_alert step: max iterations, cancellation, resume."""
        ...

    async def steered(self) -> list[str]:
        """What people sent to steer the run since the last tool boundary (docs/protocol.md,
        "Input while a run is busy"), each recorded before it is returned: the loop gives
        them to the model as the user's words after the tools' results. [] for most."""
        ...

    async def note(self, name: str, detail: dict[str, Any]) -> None:
        """A system_alert step not waited for: a hook's decision (`hook`), the instructions
        a turn runs with (`instructions`), recorded before they are acted on and committed
        with the next write that is waited for (a tool's write-ahead row, a refusal, a
        result, the final answer). Called only for agents that declare hooks or
        instructions."""
        ...

    async def resume_child(self, call: ToolCall) -> tuple[list[Message], ResumeState] | None:
        """Asked before a sub-agent starts: if `call` continues a sub-agent interrupted
        mid-run, its messages rebuilt from its own steps and its resume state; else None
        (a new sub-agent, given the task)."""
        ...

    def child(self, call: ToolCall) -> AgentObserver:
        """The observer of a sub-agent spawned by `call`: its steps hang under that call."""
        ...
