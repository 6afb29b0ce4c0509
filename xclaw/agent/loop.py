"""[agent] The agent loop: look at the conversation, do the next thing, until a final answer.

"The next thing" is decided from `messages` alone — run the tool calls of the last assistant
message that have no result yet, otherwise ask the LLM — so a fresh turn and a resumed one are
the same loop. The loop knows nothing of storage: every event goes to the observer, and
`tool_started` returning is the write-ahead point (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

from xclaw.agent.hooks import AgentObserver, ApprovalRequest, Approver, ResumeState
from xclaw.agent.steering import BeforeModel, Steering, context_for
from xclaw.agents.hooks import WITHHELD, AfterTool, BeforeTool
from xclaw.agents.output import FINAL_ANSWER
from xclaw.errors import (
    BudgetReached,
    Cancelled,
    HookDenied,
    LimitsExceeded,
    OutputInvalid,
    ToolError,
)
from xclaw.llm.base import (
    DEFAULT_MAX_TOKENS,
    LLMRequest,
    LLMResponse,
    Model,
    OutputFormat,
    WindowReporting,
)
from xclaw.llm.context import (
    COMPACT_INSTRUCTION,
    SUMMARY_PREFIX,
    compacted_message,
    estimate_tokens,
    fit_context,
    tool_tokens,
)
from xclaw.llm.events import CallNotice, ModelEvent, TextDelta, Thinking, ThinkingDiscarded
from xclaw.llm.legacy import event_model
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from xclaw.llm.playback import Playback
from xclaw.llm.settings import (
    DEFAULT_COMPACT_AT,
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    DEFAULT_MAX_ITERATIONS,
)
from xclaw.people.answered_by import CANCEL, TIMEOUT, Answer, AnsweredBy
from xclaw.tools.base import CURRENT_CALL, Tool, ToolContext, ToolResult, spec_of
from xclaw.tools.effects import effect_of

T = TypeVar("T")

# Compaction waits for at least this many new messages since the last summary, so a single
# huge message cannot make every call a summary.
MIN_MESSAGES_TO_COMPACT = 4

# The alert recorded before a call whose effects reach outside the workspace (an MCP tool that
# is not read-only): rollback and fork restore files, not the world; they list these steps
# (xclaw/views/outside_effects.py).
OUTSIDE_EFFECTS = "outside_effects"

DEFAULT_SYSTEM_PROMPT = (
    "You are xclaw, a careful software agent working in a sandboxed workspace directory. "
    "Use the tools to inspect and change files and to run shell commands; paths are relative "
    "to the workspace. Work step by step, check results, and finish with a concise answer "
    "that says what you did."
)


# What a step stopped by the user's cancel records as its error (docs/protocol.md `cancel`).
CANCELLED = "cancelled by the user"


def _input_problem(tool: Tool, args: dict[str, Any]) -> str | None:
    check = getattr(tool, "check_input", None)  # (a tool may implement the protocol alone)
    return None if check is None else check(args)


def withheld(reason: str) -> str:
    """What the model is told of a result an after_tool hook withheld (the record keeps the
    result, and the rebuilt history says the same: xclaw/recorder/history.py)."""
    return WITHHELD.format(reason=reason)


class Decision(Protocol):
    """What the approval policy says about one call: kind is allow | ask | deny. An allow
    may also carry `confine = True`: the tool is then told to run the call confined."""

    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def confine(self) -> bool: ...


class Policy(Protocol):
    async def review(self, tool: Tool, args: dict[str, Any], workspace: Path | None) -> Decision:
        """`workspace`: where the call would run (what a shell command would find there)."""
        ...


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What the loop is run with: the settings' values (xclaw/llm/settings.py declares them
    and their defaults) as the runtime passes them."""

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    approval_timeout_s: float | None = None
    # The model's context window. When the conversation passes `compact_at` of what fits,
    # older turns are summarised once by the model (compaction, its own step) and the
    # conversation goes on from the summary; None: only trim the oldest turns to fit.
    context_window_tokens: int = DEFAULT_CONTEXT_WINDOW_TOKENS
    compact_at: float | None = DEFAULT_COMPACT_AT
    # Side-effecting tools of parallel sub-agents run one at a time (False), so that the
    # workspace snapshot taken before each of them never catches a sibling's command half-way
    # and rollback/fork restore exact states; True lets them overlap (faster, snapshots inexact).
    parallel_side_effects: bool = False


def pending_tool_calls(messages: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            answered = set()
            for later in messages[i + 1 :]:
                if not isinstance(later, ToolResultMessage):
                    return []  # a user message follows: the calls were settled elsewhere
                answered.add(later.tool_call_id)
            return [c for c in m.tool_calls if c.id not in answered]
        if not isinstance(m, ToolResultMessage):
            return []
    return []


def _answers_the_user(messages: list[Message]) -> bool:
    """The next call is a turn's first: the last message is the user's (or a sub-agent's
    task), not a tool result and not the summary that replaced a compacted conversation."""
    last = messages[-1] if messages else None
    return isinstance(last, UserMessage) and not last.text.startswith(SUMMARY_PREFIX)


def _turn_calls(messages: list[Message]) -> int:
    """How many model calls this turn made before the next one (from the conversation alone,
    so a resumed turn counts as the crashed one did): the assistant messages since the
    person's last message (a summary, the resume note and output feedback are not theirs)."""
    k = 0
    for m in reversed(messages):
        if isinstance(m, AssistantMessage):
            k += 1
        elif isinstance(m, UserMessage) and not m.text.startswith((SUMMARY_PREFIX, "[System:")):
            break
    return k


# The specs of a tool set and the tokens its schemas cost, shared by every agent of the
# process: a run starts a new Agent, and measuring each schema (json.dumps) per run was a
# visible share of a busy server's CPU. Keyed by the tools' identities; the entry keeps the
# tools alive, so an id is not reused while cached. A few tool sets at most (MCP tools join).
_SPEC_CACHE: dict[tuple[int, ...], tuple[tuple[Tool, ...], tuple[ToolSpec, ...], int]] = {}
_SPEC_CACHE_SIZE = 8


def _specs_of(tools: tuple[Tool, ...]) -> tuple[tuple[ToolSpec, ...], int]:
    key = tuple(id(t) for t in tools)
    hit = _SPEC_CACHE.get(key)
    if hit is None:
        specs = tuple(spec_of(t) for t in tools)
        fixed = tool_tokens(specs)
        if len(_SPEC_CACHE) >= _SPEC_CACHE_SIZE:
            _SPEC_CACHE.pop(next(iter(_SPEC_CACHE)))
        hit = _SPEC_CACHE[key] = (tools, specs, fixed)
    return hit[1], hit[2]


class Agent:
    def __init__(
        self,
        *,
        model: Model,
        tools: Mapping[str, Tool],
        policy: Policy,
        approver: Approver,
        observer: AgentObserver,
        context: ToolContext,
        config: AgentConfig = AgentConfig(),
        agent_id: str = "main",
        cancel_event: asyncio.Event | None = None,
        side_effects: asyncio.Lock | None = None,
        steering: Steering | None = None,
    ) -> None:
        self.model = event_model(model)  # one of the earlier seam's is adapted
        self.tools = tools
        self.policy = policy
        self.approver = approver
        self.observer = observer
        self.context = context
        self.config = config
        self.agent_id = agent_id
        self.cancel_event = cancel_event or asyncio.Event()
        # Held from a side-effecting tool's write-ahead row to its end; shared with sub-agents.
        self.side_effects = side_effects or asyncio.Lock()
        self._estimates: dict[int, tuple[Message, int]] = {}
        # The tools' specs and the context budget they leave, for the tool set they were
        # computed from: every model call needs both, and measuring the schemas (json.dumps of
        # each) per call was ~3 % of a busy server's CPU (bench/gateway_bench.py).
        self._specs: tuple[tuple[Tool, ...], tuple[ToolSpec, ...], int] | None = None
        # (messages, how many were counted, their tokens, the last one counted): _tokens.
        self._counted: tuple[list[Message], int, int, Message | None] | None = None
        # Done when the run is cancelled; set for the length of run() (see there).
        self._stopper: asyncio.Future[Any] | None = None
        # What compaction replaced in this run (the scripted model counts its turns over it)
        # and the conversation's length just after the last compaction.
        self._compacted_away: list[Message] = []
        self._compacted_len = 0
        # The context window in force (_learn_window): None until the first run asks.
        self._window: int | None = None
        # A declared agent's instructions, hooks, output and sub-agents (None: xclaw's own
        # agent, whose loop is unchanged: xclaw/agent/steering.py).
        self.steering = steering
        # This turn's system prompt when the agent's instructions are made per turn.
        self._system: str | None = None
        # The final-answer tool offered to a model without structured output of its own.
        self._final_spec = None if steering is None else steering.output_tool(model)
        # The turn's structured answer, validated (the agent declares an output type).
        self.output: Any = None
        # Why the last answer did not validate (what the turn fails with if it was the last).
        self._output_errors: list[str] | None = None
        self._feedback: str | None = None

    # --- the loop ---------------------------------------------------------------------------
    async def run(
        self,
        messages: list[Message],
        *,
        user_text: str | None = None,
        resume: ResumeState | None = None,
    ) -> str:
        """Drive the conversation to a final answer and return its text. `messages` is
        appended to in place. Raises Cancelled, LimitsExceeded or LLMError."""
        # One watcher of the cancel event for the whole run (_until_cancelled), not one task
        # per model or tool call.
        own = self._stopper is None
        if own:
            self._stopper = asyncio.ensure_future(self.cancel_event.wait())
        try:
            return await self._run(messages, user_text=user_text, resume=resume)
        finally:
            if own and self._stopper is not None:
                self._stopper.cancel()
                self._stopper = None

    async def _run(
        self, messages: list[Message], *, user_text: str | None, resume: ResumeState | None
    ) -> str:
        resume = resume or ResumeState()
        await self._learn_window()
        if user_text is not None:
            await self.observer.user_input(user_text)
            messages.append(UserMessage(user_text))
        steering = self.steering
        if steering is not None:
            self._system = await steering.instructions_for(
                self._hook_context(), resume, self.observer
            )
        note = resume.note
        llm_calls = 0
        while True:
            self._check_cancelled()
            pending = pending_tool_calls(messages)
            if pending:
                messages.extend(await self._run_tools(pending, resume))
                # A tool boundary: what a person sent meanwhile to steer the run goes in
                # after the results, as their words, before the next model call (an
                # observer that answers nothing steers nothing).
                steered = await self.observer.steered()
                messages.extend(UserMessage(text) for text in steered or ())
                continue
            if messages and isinstance(messages[-1], AssistantMessage):
                if steering is not None and steering.output is not None and self.output is None:
                    self.output = steering.output.check(json.loads(messages[-1].text))
                return messages[-1].text
            if llm_calls >= self.config.max_iterations:
                await self.observer.alert(
                    "max_iterations", {"limit": self.config.max_iterations, "agent": self.agent_id}
                )
                if self._output_errors:
                    raise OutputInvalid(
                        f"no valid final answer after {self.config.max_iterations} LLM calls "
                        f"(max_iterations): {'; '.join(self._output_errors)}"
                    )
                raise LimitsExceeded(
                    f"stopped after {self.config.max_iterations} LLM calls in one turn "
                    "(max_iterations); send a message to continue"
                )
            llm_calls += 1
            await self._compact_if_full(messages)
            context = list(messages)
            tokens = self._tokens(messages)
            turn_start = _answers_the_user(messages)
            if note:
                context.append(UserMessage(note))
                tokens += self._estimate(context[-1])
            response = await self._call_llm(
                context, tokens, resumed=note is not None, turn_start=turn_start, resume=resume
            )
            note = None
            messages.append(
                AssistantMessage(
                    text=response.text, tool_calls=response.tool_calls, thinking=response.thinking
                )
            )
            if self._feedback is not None:  # an answer that did not validate: said, again
                messages.append(UserMessage(self._feedback))

    async def _call_llm(
        self,
        context: list[Message],
        tokens: int,
        *,
        resumed: bool,
        turn_start: bool = False,
        resume: ResumeState | None = None,
    ) -> LLMResponse:
        tools, budget = self._tool_specs()
        history = tuple(context)
        fitted = fit_context(history, budget, self._estimate, total=tokens)
        whole = (*self._compacted_away, *history) if self._compacted_away else history
        system = self._system or self.config.system_prompt
        steering = self.steering
        self._feedback = None
        output = None
        if steering is not None:
            if steering.has("before_model"):
                system = await self._before_model(context, system, resume or ResumeState())
            if steering.output is not None and self._final_spec is None:
                output = OutputFormat(steering.output.name, steering.output.schema)
        request = LLMRequest(
            system=system,
            messages=fitted,
            tools=tools,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            turn_start=turn_start,
            output=output,
            prompt_estimate=tokens + len(system) // 4,
            playback=Playback(
                agent=self.agent_id,
                agent_name="default" if steering is None else steering.name,
                history=None if fitted is whole else whole,
                resumed=resumed,
            ),
        )
        params = {
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
            "messages": len(context),
            "resumed": resumed,
        }
        await self.observer.llm_started(request, self.model.name, params)
        try:
            response = await self._until_cancelled(self.model.complete(request, self._model_event))
        except Cancelled:
            await self.observer.llm_failed(CANCELLED)
            raise
        except Exception as e:  # LLMError, or a provider bug: the step fails, then we stop
            await self.observer.llm_failed(str(e) or type(e).__name__)
            raise
        if steering is None or steering.output is None:
            await self.observer.llm_finished(response)
            return response
        response, value, self._feedback = steering.judge(response)
        await self.observer.llm_finished(response, output=value, rejected=self._feedback)
        if value is not None:
            self.output = value
        elif self._feedback is not None:
            self._output_errors = [self._feedback]
        return response

    async def _model_event(self, event: ModelEvent) -> None:
        """What the model call in flight tells: each kind to the observer's hook for it."""
        observer = self.observer
        if isinstance(event, TextDelta):
            await observer.llm_delta(event.text)
        elif isinstance(event, Thinking):
            await observer.llm_thinking(event.block)
        elif isinstance(event, ThinkingDiscarded):
            await observer.llm_thinking_discarded()
        elif isinstance(event, CallNotice):
            await observer.llm_notice(event.text)

    async def _summary_event(self, event: ModelEvent) -> None:
        """A summary call's events: its text and thinking are not shown, only its notices."""
        if isinstance(event, CallNotice):
            await self.observer.llm_notice(event.text)

    async def _before_model(self, context: list[Message], system: str, resume: ResumeState) -> str:
        """The before_model hooks' decision on this call (recorded; replayed on resume): the
        instructions it is made with, or HookDenied."""
        steering = self.steering
        assert steering is not None
        k = _turn_calls(context)
        last = context[-1] if context else None
        said = ""
        if isinstance(last, (UserMessage, ToolResultMessage)):
            said = last.text if isinstance(last, UserMessage) else last.content
        event = BeforeModel(self._hook_context(), system, k, said, len(context))
        decision = await steering.decide(
            "before_model", str(k), event, resume, self.observer, {"iteration": k}
        )
        if decision.kind == "deny":
            raise HookDenied(f"a hook stopped the model call: {decision.reason}")
        if decision.kind == "rewrite":
            return str(decision.value)
        return system

    def _hook_context(self) -> ToolContext:
        return context_for(self.context, self.steering)

    # --- compaction ---------------------------------------------------------------------------
    async def _compact_if_full(self, messages: list[Message]) -> None:
        limit = self.config.compact_at
        if not limit or len(messages) - self._compacted_len < MIN_MESSAGES_TO_COMPACT:
            return  # off, or too little new since the last summary to be worth one
        _, budget = self._tool_specs()
        if self._tokens(messages) <= budget * limit:
            return
        await self.compact(messages)

    async def compact(self, messages: list[Message]) -> bool:
        """Summarise the conversation once and replace it, in place, by the summary (a model
        call recorded as its own step: rollback undoes it like any step). Same system prompt
        and tools as every call, so the summary request reads the prompt cache too. Tool
        pairs stay valid: only a conversation without open tool calls is summarised. On a
        provider error the conversation stays as it is (it is then trimmed to fit)."""
        if not messages or pending_tool_calls(messages):
            return False
        await self._learn_window()
        tools, budget = self._tool_specs()
        asked = (*messages, UserMessage(COMPACT_INSTRUCTION))
        fitted = fit_context(asked, budget, self._estimate)
        request = LLMRequest(
            system=self._system or self.config.system_prompt,
            messages=fitted,
            tools=tools,
            max_tokens=self.config.max_tokens,
            prompt_estimate=sum(map(self._estimate, fitted)),
            playback=Playback(agent=self.agent_id, history=None if fitted is asked else asked),
        )
        params = {
            "purpose": "compaction",
            "messages": len(messages),
            "max_tokens": self.config.max_tokens,
        }
        await self.observer.llm_started(request, self.model.name, params)
        try:
            response = await self._until_cancelled(
                self.model.complete(request, self._summary_event)
            )
        except Cancelled:
            await self.observer.llm_failed("cancelled by the user")
            raise
        except Exception as e:  # noqa: BLE001 - a failed summary must not end the run
            await self.observer.llm_failed(f"compaction failed: {e}")
            return False
        await self.observer.compaction_finished(response, len(messages))
        summary = compacted_message(response.text)
        self._compacted_away.extend(messages)
        messages[:] = [summary]
        self._compacted_len = 1
        return True

    def _estimate(self, m: Message) -> int:
        """Token estimate per message, computed once: messages only ever get appended, so
        without the cache every call would re-measure the whole conversation (quadratic)."""
        key = id(m)
        hit = self._estimates.get(key)
        if hit is None or hit[0] is not m:
            hit = (m, estimate_tokens(m))
            self._estimates[key] = hit
        return hit[1]

    def _tokens(self, messages: list[Message]) -> int:
        """The estimated tokens of `messages`, each message counted once: between compactions
        the conversation only grows, so a call adds what is new since the last one instead of
        summing the whole conversation again (per model call, that was quadratic)."""
        counted = self._counted
        start, total = 0, 0
        if (
            counted is not None
            and counted[0] is messages
            and counted[1] <= len(messages)
            and (counted[1] == 0 or messages[counted[1] - 1] is counted[3])
        ):
            start, total = counted[1], counted[2]
        for i in range(start, len(messages)):
            total += self._estimate(messages[i])
        self._counted = (messages, len(messages), total, messages[-1] if messages else None)
        return total

    async def _learn_window(self) -> None:
        """The context window: the configured one, capped by what the model's server reports
        (a local server's --ctx-size; asked once per model, xclaw.llm.server_info)."""
        if self._window is not None:
            return
        window = self.config.context_window_tokens
        if isinstance(self.model, WindowReporting):
            try:
                reported = await self.model.context_window()
            except Exception:  # noqa: BLE001 - a probe must never fail a run
                reported = None
            if isinstance(reported, int) and 0 < reported < window:
                window = reported
        self._window = window
        self._specs = None  # the budget depends on it

    def _tool_specs(self) -> tuple[tuple[ToolSpec, ...], int]:
        """The specs of the tools and the context budget they leave, recomputed only when the
        tool set changes (a mapping the caller owns may gain or lose tools between calls)."""
        current = tuple(self.tools.values())
        cached = self._specs
        if (
            cached is None
            or len(cached[0]) != len(current)
            or any(a is not b for a, b in zip(cached[0], current, strict=True))
        ):
            specs, fixed = _specs_of(current)
            if self._final_spec is not None:
                specs, fixed = (*specs, self._final_spec), fixed + tool_tokens((self._final_spec,))
            budget = max(
                1_000,
                (self._window or self.config.context_window_tokens)
                - self.config.max_tokens
                - len(self.config.system_prompt) // 4
                - fixed,
            )
            cached = self._specs = (current, specs, budget)
        return cached[1], cached[2]

    # --- tools --------------------------------------------------------------------------------
    async def _run_tools(
        self, calls: list[ToolCall], resume: ResumeState
    ) -> list[ToolResultMessage]:
        """Run calls in order; consecutive parallel-safe ones (sub-agents) run concurrently."""
        results: list[ToolResultMessage] = []
        i = 0
        while i < len(calls):
            self._check_cancelled()
            group = [calls[i]]
            while (
                self._parallel_safe(calls[i])
                and i + len(group) < len(calls)
                and self._parallel_safe(calls[i + len(group)])
            ):
                group.append(calls[i + len(group)])
            if len(group) == 1:
                results.append(await self._run_one(group[0], resume))
            else:
                results.extend(await asyncio.gather(*(self._run_one(c, resume) for c in group)))
            i += len(group)
        return results

    def _parallel_safe(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        return tool is not None and tool.parallel_safe

    async def _run_one(self, call: ToolCall, resume: ResumeState) -> ToolResultMessage:
        tool = self.tools.get(call.name)
        if tool is None:
            if self._final_spec is not None and call.name == FINAL_ANSWER:
                return await self._refuse_final(call)
            known = ", ".join(sorted(self.tools)) or "none"
            return await self._refuse(call, f"unknown tool {call.name!r}; available tools: {known}")
        if "_error" in call.input:
            return await self._refuse(
                call, f"{call.input['_error']}: {call.input.get('_raw_arguments', '')!r}"
            )
        if resume.edited:  # a person edited it as they approved, before a crash
            edited = resume.edited.pop(call.id, None)
            if edited is not None:
                call = replace(call, input=edited)
        # Checked before anyone is asked: a call that cannot run is refused, not put to a person.
        problem = _input_problem(tool, call.input)
        if problem is not None:
            return await self._refuse(call, problem)
        steering = self.steering
        hook_asks: str | None = None
        if steering is not None and steering.has("before_tool"):
            event = BeforeTool(self._hook_context(), call.name, call.input, call.id)
            verdict = await steering.decide(
                "before_tool",
                call.id,
                event,
                resume,
                self.observer,
                {"callId": call.id, "tool": call.name},
            )
            if verdict.kind == "deny":
                return await self._refuse(call, f"denied by a hook: {verdict.reason}")
            if verdict.kind == "ask":
                hook_asks = verdict.reason or "a hook asks a person to decide"
            if verdict.kind == "rewrite":
                call = replace(call, input=dict(verdict.value))
                problem = _input_problem(tool, call.input)
                if problem is not None:
                    return await self._refuse(call, f"as a hook rewrote it: {problem}")
        decision = await self.policy.review(tool, call.input, self.context.workspace)
        if decision.kind == "deny":
            return await self._refuse(call, decision.reason)
        signature = self._signature(call)
        maybe_repeated = signature in resume.suspect_calls
        confined = decision.confine
        if (
            decision.kind == "ask"
            or maybe_repeated
            or call.id in resume.pending_approvals
            or hook_asks is not None
        ):
            confined = False  # a human said yes to this very call
            reason = decision.reason if decision.kind == "ask" else "approval required"
            if hook_asks is not None:
                reason = hook_asks
            if maybe_repeated:
                reason = "the model re-issued a call that was interrupted by a crash"
            answer = await self._ask(call, reason, maybe_repeated)
            resume.pending_approvals.discard(call.id)
            if not answer.approved:
                return await self._refuse(call, answer.why())
            if answer.input is not None:  # the person's input runs instead, checked as any
                call = replace(call, input=answer.input)
                problem = _input_problem(tool, call.input)
                again = await self.policy.review(tool, call.input, self.context.workspace)
                if problem is not None or again.kind == "deny":
                    return await self._refuse(call, f"as edited: {problem or again.reason}")
        resume.suspect_calls.discard(signature)
        self._check_cancelled()
        turn = None if tool.read_only or self.config.parallel_side_effects else self.side_effects
        if turn is not None:
            await turn.acquire()
        try:
            self._check_cancelled()  # the run may have been stopped while this call waited
            effect = effect_of(tool)
            if effect.outside:
                # Marked in the record before it runs: files are undone by snapshots, this
                # only by its compensation (if it has one) or not at all.
                await self.observer.alert(
                    OUTSIDE_EFFECTS,
                    {
                        "tool": call.name,
                        "callId": call.id,
                        "agent": self.agent_id,
                        "effect": effect.value,
                    },
                )
            # Write-ahead: the running row is durable before the tool starts.
            step_id = await self.observer.tool_started(call, tool.read_only)
            if turn is not None and tool.parallel_safe:
                # A sub-agent spawner: its own step starts alone, but its sub-agents' tools
                # need the turn while it runs.
                turn.release()
                turn = None
            base = self.context  # (built whole: dataclasses.replace is slow, and this is per call)
            context = ToolContext(
                workspace=base.workspace,
                session_id=base.session_id,
                spawn_agent=partial(self._spawn, call),
                env=base.env,
                confined=confined,
                step_id=step_id,
                call_id=call.id,
                user=base.user,
                agent=base.agent if steering is None else steering.name,
                deps=base.deps,
            )
            running = CURRENT_CALL.set(call.id)  # an idempotency key's part (tools/base.py)
            try:
                result = await self._until_cancelled(tool.run(call.input, context))
            except Cancelled:
                # The user stopped the run: the tool has stopped its processes (SIGTERM,
                # grace, SIGKILL); its step ends failed and the run ends here.
                await self.observer.tool_finished(call, ToolResult(CANCELLED, is_error=True))
                raise
            except (asyncio.CancelledError, BudgetReached):
                raise  # a sub-agent's call past a budget stops the whole run, resumably
            except Exception as e:  # noqa: BLE001 - a tool bug must reach the model, not crash the loop
                result = ToolResult(f"{call.name} crashed: {type(e).__name__}: {e}", is_error=True)
            finally:
                CURRENT_CALL.reset(running)
        finally:
            if turn is not None:
                turn.release()
        content = result.content
        if steering is not None and steering.has("after_tool"):
            # Decided before the result is written, which commits the decision with it: the
            # record never holds one without the other (xclaw/agent/steering.py).
            content = await self._after_tool(call, result, context, resume)
        await self.observer.tool_finished(call, result)
        return ToolResultMessage(call.id, call.name, content, result.is_error, images=result.images)

    async def _after_tool(
        self, call: ToolCall, result: ToolResult, context: ToolContext, resume: ResumeState
    ) -> str:
        """What the model is told of a call's result: the after_tool hooks' say."""
        steering = self.steering
        assert steering is not None
        event = AfterTool(context, call.name, call.input, call.id, result.content, result.is_error)
        verdict = await steering.decide(
            "after_tool",
            call.id,
            event,
            resume,
            self.observer,
            {"callId": call.id, "tool": call.name},
        )
        if verdict.kind == "deny":
            return withheld(verdict.reason)
        if verdict.kind == "rewrite":
            return str(verdict.value)
        return result.content

    async def _refuse_final(self, call: ToolCall) -> ToolResultMessage:
        """A final-answer call that is not the answer: the model is told why (and tries
        again, within the turn's iterations)."""
        assert self.steering is not None
        told, why = self.steering.refuse_final(call)
        self._output_errors = why
        await self.observer.tool_refused(call, told)
        return ToolResultMessage(call.id, call.name, f"Not run: {told}", is_error=True)

    def _signature(self, call: ToolCall) -> str:
        """The call as the record holds it: the interrupted calls it is matched against (no
        blind repeat) were read back from the record, where a credential in a call is
        redacted; the observer says how."""
        return self.observer.recorded_signature(call)

    async def _ask(self, call: ToolCall, reason: str, maybe_repeated: bool) -> Answer:
        step_id = await self.observer.approval_requested(call, reason, maybe_repeated)
        request = ApprovalRequest(step_id, call, reason, maybe_repeated, self.agent_id)
        decide = self.approver.decide(request)
        timeout = self.config.approval_timeout_s
        try:
            if timeout:
                answer = await self._until_cancelled(asyncio.wait_for(decide, timeout))
            else:
                answer = await self._until_cancelled(decide)
        except TimeoutError:
            answer = Answer(False, AnsweredBy(TIMEOUT, detail=f"{timeout:g} s"))
        except Cancelled:
            await self.observer.approval_decided(call, False, CANCELLED, AnsweredBy(CANCEL))
            raise
        if not answer.approved and answer.input is not None:
            answer = replace(answer, input=None)  # nothing runs: nothing was edited
        if answer.input is not None:
            await self.observer.approval_decided(
                call, answer.approved, answer.why(), answer.by, edited=answer.input
            )
        else:
            await self.observer.approval_decided(call, answer.approved, answer.why(), answer.by)
        return answer

    async def _refuse(self, call: ToolCall, reason: str) -> ToolResultMessage:
        await self.observer.tool_refused(call, reason)
        return ToolResultMessage(call.id, call.name, f"Not run: {reason}", is_error=True)

    async def _spawn(self, call: ToolCall, task: str, agent: str | None = None) -> str:
        # A sub-agent interrupted mid-run continues from its own record (messages rebuilt
        # behind the glass), so what it completed is not done again.
        steering = self.steering
        model, tools, config = self.model, self.tools, self.config
        if agent is not None:  # a declared sub-agent: its own model, tools and settings
            sub = None if steering is None else steering.sub_agents.get(agent)
            if sub is None:
                known = ", ".join(sorted(steering.sub_agents)) if steering else ""
                raise ToolError(f"no sub-agent named {agent!r} (declared: {known or 'none'})")
            model, tools, config, steering = sub.model or model, sub.tools, sub.config, sub.steering
        elif steering is not None and steering.output is not None:
            steering = replace(steering, output=None)  # its answer goes to the agent, as text
        resumed = await self.observer.resume_child(call)
        child = Agent(
            model=model,
            tools={n: t for n, t in tools.items()},
            policy=self.policy,
            approver=self.approver,
            observer=self.observer.child(call),
            context=self.context,
            config=config,
            agent_id=f"{self.agent_id}/{call.id}",
            cancel_event=self.cancel_event,
            side_effects=self.side_effects,
            steering=steering,
        )
        if resumed is not None:
            messages, state = resumed
            answer = await child.run(messages, resume=state)
        else:
            answer = await child.run([], user_text=task)
        if child.output is not None:
            return json.dumps(child.output, ensure_ascii=False)
        return answer

    # --- cancellation -------------------------------------------------------------------------
    def _check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled()

    async def _until_cancelled(self, aw: Awaitable[T]) -> T:
        """Await `aw` (an LLM call, an approval, a tool run) in this task, stopping it when the
        run is cancelled: the cancellation is thrown into `aw` where it waits, so whatever it
        does to stop — the shell tool's SIGTERM to its process group, a short grace, then
        SIGKILL — is done before this raises Cancelled, and nothing it started outlives its
        step. (No task per call: the run's one watcher of the cancel event cancels this task
        while, and only while, it waits here.)"""
        if self.cancel_event.is_set():
            if inspect.iscoroutine(aw):
                aw.close()
            raise Cancelled()
        task = asyncio.current_task()
        assert task is not None
        stopper = self._stopper
        own = stopper is None
        if stopper is None:  # compact() outside run(): a watcher for this call alone
            stopper = asyncio.ensure_future(self.cancel_event.wait())
        guard = _CancelGuard(task)
        stopper.add_done_callback(guard.fire)
        try:
            return await aw
        except asyncio.CancelledError:
            # Ours only if the watcher fired and nobody else (a shutdown) cancelled too.
            if guard.fired and task.uncancel() == 0:
                raise Cancelled() from None
            raise
        finally:
            guard.active = False
            stopper.remove_done_callback(guard.fire)
            if own:
                stopper.cancel()


class _CancelGuard:
    """Cancels `task` when the run's cancel watcher fires, if the task still waits in
    `_until_cancelled` then (the watcher's callback may run a moment after it left)."""

    __slots__ = ("active", "fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.active = True
        self.fired = False

    def fire(self, _watcher: asyncio.Future[Any]) -> None:
        if self.active and not self.fired:
            self.fired = True
            self.task.cancel()
