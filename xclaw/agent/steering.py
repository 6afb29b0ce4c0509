"""[agent] What a declared agent adds to the loop (docs/agents.md): instructions made once per turn,
hooks around tool and model calls, a structured final answer, named sub-agents.

Every decision taken here is recorded before it is acted on (the observer's `note`) and
read back from the record on resume (`ResumeState.instructions`, `.decided`) instead of
being taken again: a function or a hook asked twice might answer otherwise, and a crash
must not change what the agent did. xclaw's own agent has none of this (`steering` None):
its loop is what it always was.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from xclaw.agent.hooks import AgentObserver, ResumeState
from xclaw.agents.hooks import (
    ALLOW,
    AfterTool,
    BeforeModel,
    BeforeTool,
    HookDecision,
    HookEvent,
    Hooks,
    Phase,
)
from xclaw.agents.output import FINAL_ANSWER, OutputErrors, OutputSpec
from xclaw.llm.base import LLMResponse, structured
from xclaw.llm.messages import ToolCall, ToolSpec
from xclaw.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from xclaw.agent.loop import AgentConfig
    from xclaw.llm.base import Model

Instructions = Callable[[ToolContext], "str | Awaitable[str]"]
# What the record says decided a hook's answer: a hook (by import path).
HOOK = "hook"
INSTRUCTIONS = "instructions"


@dataclass(frozen=True)
class SubAgent:
    """A declared sub-agent as the loop starts one: its own model, tools and settings."""

    name: str
    description: str
    model: Model | None  # None: the parent's
    tools: Mapping[str, Tool]
    config: AgentConfig
    steering: Steering


@dataclass(frozen=True)
class Steering:
    name: str
    # Makes the system prompt of each turn (sync or async), from the run's context;
    # `extend`: what it makes goes after this base prompt.
    instructions: Instructions | None = None
    base_prompt: str = ""
    output: OutputSpec | None = None
    hooks: Hooks | None = None
    sub_agents: Mapping[str, SubAgent] = field(default_factory=dict)

    # --- instructions -------------------------------------------------------------------
    async def instructions_for(
        self, ctx: ToolContext, resume: ResumeState, observer: AgentObserver
    ) -> str | None:
        """The turn's system prompt: as recorded when the turn began, or made now and
        recorded (None: the agent's static prompt)."""
        if self.instructions is None:
            return None
        if resume.instructions is not None:
            return resume.instructions
        made = self.instructions(ctx)
        text = str(await made if inspect.isawaitable(made) else made)
        if self.base_prompt:
            text = f"{self.base_prompt}\n\n{text}"
        await observer.note(INSTRUCTIONS, {"text": text, "agent": self.name})
        resume.instructions = text
        return text

    # --- hooks --------------------------------------------------------------------------
    def has(self, phase: Phase) -> bool:
        return self.hooks is not None and bool(self.hooks.of(phase))

    async def decide(
        self,
        phase: Phase,
        key: str,
        event: HookEvent,
        resume: ResumeState,
        observer: AgentObserver,
        detail: dict[str, Any],
    ) -> HookDecision:
        """The hooks' decision on `event`: the recorded one (resume), or theirs, recorded.
        Each hook runs in turn; a `rewrite` hands its value to the next; the first `deny`
        or `ask` decides. A hook that raises, or answers what is not a decision, denies."""
        recorded = resume.decided.pop(f"{phase}:{key}", None)
        if recorded is not None:
            return HookDecision.from_json(recorded)
        assert self.hooks is not None
        decision, decider, original = ALLOW, None, _value_of(event)
        for fn in self.hooks.of(phase):
            ref = self.hooks.ref(fn)
            try:
                answer = fn(event)
                if inspect.isawaitable(answer):
                    answer = await answer
            except Exception as e:  # noqa: BLE001 - a hook's bug denies, and says so
                answer = HookDecision("deny", f"the hook {ref} failed: {type(e).__name__}: {e}")
            if answer is None:
                answer = ALLOW
            if not isinstance(answer, HookDecision):
                answer = HookDecision("deny", f"the hook {ref} answered {answer!r}, no decision")
            answer = _fit(phase, answer, ref)
            if answer.kind == "allow":
                decider = decider or ref
                continue
            decision, decider = answer, ref
            if answer.kind != "rewrite":
                break
            event = _rewritten(event, answer.value)
        if decision.kind == "rewrite":
            decision = replace(decision, value=_value_of(event))
        record = {
            HOOK: phase,
            "key": key,
            **detail,
            **decision.to_json(),
            "by": {"kind": HOOK, "hook": decider or "?", "agent": self.name},
        }
        if decision.kind == "rewrite":
            record["original"] = original
        await observer.note(HOOK, record)
        return decision

    # --- structured output ----------------------------------------------------------------
    def output_tool(self, model: Model) -> ToolSpec | None:
        """The final-answer tool, for a model without structured output of its own."""
        if self.output is None or structured(model):
            return None
        return ToolSpec(
            name=FINAL_ANSWER,
            description=(
                f"Give your final answer: one {self.output.name} object. Call it alone, "
                "once everything else is done; it ends your turn."
            ),
            input_schema=dict(self.output.schema),
        )

    def judge(self, response: LLMResponse) -> tuple[LLMResponse, Any, str | None]:
        """(the response as recorded, the validated output or None, what the model is told
        when its answer did not validate or None). A final-answer call alone that
        validates is the final answer, recorded as its JSON text; a call among others, or
        one that does not validate, is refused as it runs (`refuse_final`)."""
        spec = self.output
        assert spec is not None
        calls = response.tool_calls
        if calls:
            if len(calls) == 1 and calls[0].name == FINAL_ANSWER:
                try:
                    value = spec.check(calls[0].input)
                except OutputErrors:
                    return response, None, None
                text = json.dumps(value, ensure_ascii=False)
                return replace(response, text=text, tool_calls=()), value, None
            return response, None, None
        try:
            return response, spec.parse(response.text), None
        except OutputErrors as e:
            return response, None, spec.feedback(e.errors, tool=False)

    def refuse_final(self, call: ToolCall) -> tuple[str, list[str]]:
        """Why a final-answer call is not the answer: its errors, or (a valid one) that it
        came with other calls (`judge` took a valid one that came alone)."""
        assert self.output is not None
        try:
            self.output.check(call.input)
            why = [f"{FINAL_ANSWER} must be called alone, after the other tools' results"]
        except OutputErrors as e:
            why = e.errors
        return self.output.feedback(why, tool=True), why


def _value_of(event: HookEvent) -> Any:
    if isinstance(event, BeforeTool):
        return dict(event.input)
    if isinstance(event, AfterTool):
        return event.output
    return event.instructions


def _rewritten(event: HookEvent, value: Any) -> HookEvent:
    if isinstance(event, BeforeTool):
        return replace(event, input=dict(value))
    if isinstance(event, AfterTool):
        return replace(event, output=str(value))
    return replace(event, instructions=str(value))


def _fit(phase: Phase, answer: HookDecision, ref: str) -> HookDecision:
    """A decision this phase can act on; anything else denies, saying why."""
    if answer.kind == "ask" and phase != "before_tool":
        return HookDecision(
            "deny", f"the hook {ref} asked for a person, which only a before_tool hook can"
        )
    if answer.kind == "rewrite":
        value = answer.value
        if phase == "before_tool" and not isinstance(value, Mapping):
            return HookDecision(
                "deny", f"the hook {ref} rewrote a call's input to {value!r}, not a mapping"
            )
        if phase != "before_tool" and not isinstance(value, str):
            return HookDecision("deny", f"the hook {ref} rewrote to {value!r}, not text")
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return HookDecision("deny", f"the hook {ref} rewrote to a value that is not JSON")
    return answer


def context_for(base: ToolContext, steering: Steering | None) -> ToolContext:
    """The context a declared agent's calls and hooks see (its name)."""
    if steering is None or base.agent == steering.name:
        return base
    return replace(base, agent=steering.name)


__all__ = ["BeforeModel", "Steering", "SubAgent"]
