"""The agent loop on its own: ordering of events, approvals, limits, cancellation, sub-agents.

The LLM is a function (a fake at the LLM boundary); tools are real Tool implementations.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import until
from xclaw.agent.hooks import ApprovalRequest
from xclaw.agent.loop import Agent, AgentConfig, ResumeState, pending_tool_calls
from xclaw.errors import Cancelled, LimitsExceeded, LLMError
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.events import EventSink, TextDelta
from xclaw.llm.messages import (
    AssistantMessage,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    call_signature,
)
from xclaw.llm.scripted import ScriptedModel
from xclaw.people.answered_by import Answer, AnsweredBy
from xclaw.tools.base import Tool, ToolContext, ToolResult


class FunctionModel:
    """Answers with whatever `fn(request)` returns."""

    name = "fn:test"

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        self.requests.append(request)
        resp = self.fn(request)
        if isinstance(resp, Exception):
            raise resp
        if on_event and resp.text:
            await on_event(TextDelta(resp.text))
        return resp


def script(*turns: LLMResponse) -> FunctionModel:
    it = iter(turns)
    return FunctionModel(lambda req: next(it))


@dataclass
class CountTool(Tool):
    """A side-effecting tool that logs every event into the shared event list."""

    events: list[str]
    name: str = "count"
    description: str = "count"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    read_only: bool = False
    parallel_safe: bool = False
    runs: int = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.runs += 1
        self.events.append(f"RUN {args.get('n')}")
        if args.get("boom"):
            raise RuntimeError("kaput")
        return ToolResult(f"counted {args.get('n')}")


@dataclass
class SpawnTool(Tool):
    name: str = "spawn_agent"
    description: str = "spawn"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    read_only: bool = False
    parallel_safe: bool = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.spawn_agent is not None
        return ToolResult(await ctx.spawn_agent(args["task"]))


@dataclass
class Decision:
    kind: str
    reason: str = ""
    confine: bool = False


class Policy:
    def __init__(self, kind: str = "allow") -> None:
        self.kind = kind

    async def review(self, tool: Any, args: dict[str, Any], workspace: Any) -> Decision:
        if args.get("deny"):
            return Decision("deny", "refused by policy")
        return Decision(self.kind, "needs a human")


class Approver:
    def __init__(self, answer: bool = True, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.requests: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> Answer:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        return Answer(self.answer, AnsweredBy.person("chat", "websocket"))


class Observer:
    def __init__(self, events: list[str], prefix: str = "") -> None:
        self.events = events
        self.prefix = prefix

    async def user_input(self, text: str) -> None:
        self.events.append(f"{self.prefix}user {text}")

    async def llm_started(self, request: Any, model: str, params: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        self.events.append(f"{self.prefix}llm_started")

    async def llm_delta(self, text: str) -> None:
        pass

    async def llm_thinking(self, block: ThinkingBlock) -> None:
        pass

    async def llm_thinking_discarded(self) -> None:
        pass

    async def llm_notice(self, text: str) -> None:
        self.events.append(f"{self.prefix}notice {text}")

    def recorded_signature(self, call: ToolCall) -> str:
        return call_signature(call.name, call.input)

    async def llm_finished(self, response: LLMResponse) -> None:
        self.events.append(f"{self.prefix}llm_finished")

    async def compaction_finished(self, response: LLMResponse, summarised: int) -> None:
        self.events.append(f"{self.prefix}llm_finished")

    async def steered(self) -> list[str]:
        return []

    async def llm_failed(self, error: str) -> None:
        self.events.append(f"{self.prefix}llm_failed {error}")

    async def approval_requested(self, call: ToolCall, reason: str, maybe_repeated: bool) -> str:
        self.events.append(f"{self.prefix}approval? {call.id} repeated={maybe_repeated}")
        return "s0099"

    async def approval_decided(
        self, call: ToolCall, approved: bool, why: str, by: AnsweredBy
    ) -> None:
        self.events.append(f"{self.prefix}approval {call.id} {approved} by {by.kind}")

    async def tool_started(self, call: ToolCall, read_only: bool) -> None:
        await asyncio.sleep(0.01)  # a slow durable commit: the tool must still wait for it
        self.events.append(f"{self.prefix}COMMITTED {call.input.get('n')}")

    async def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        self.events.append(f"{self.prefix}finished {call.id} error={result.is_error}")

    async def tool_refused(self, call: ToolCall, reason: str) -> None:
        self.events.append(f"{self.prefix}refused {call.id}: {reason}")

    async def alert(self, name: str, detail: dict[str, Any]) -> None:
        self.events.append(f"{self.prefix}alert {name}")

    async def resume_child(self, call: ToolCall) -> None:
        return None

    def child(self, call: ToolCall) -> Observer:
        return Observer(self.events, prefix=f"{self.prefix}[{call.id}] ")


def call(i: str, **args: Any) -> ToolCall:
    return ToolCall(id=i, name=args.pop("tool", "count"), input=args)


def make_agent(
    model: FunctionModel, events: list[str], tmp_path: Path, **kw: Any
) -> tuple[Agent, CountTool]:
    tool = CountTool(events)
    agent = Agent(
        model=model,
        tools={"count": tool, "spawn_agent": SpawnTool()},
        policy=kw.pop("policy", Policy()),
        approver=kw.pop("approver", Approver()),
        observer=Observer(events),
        context=ToolContext(workspace=tmp_path, session_id="t"),
        config=kw.pop("config", AgentConfig()),
        **kw,
    )
    return agent, tool


async def test_tool_runs_only_after_its_record_is_committed(tmp_path: Path) -> None:
    events: list[str] = []
    model = script(
        LLMResponse("", (call("a", n=1), call("b", n=2))),
        LLMResponse("done"),
    )
    agent, tool = make_agent(model, events, tmp_path)
    messages: list[Any] = []
    answer = await agent.run(messages, user_text="go")
    assert answer == "done"
    assert tool.runs == 2
    # Write-ahead: each RUN comes right after its COMMITTED, never before.
    assert (
        events.index("COMMITTED 1")
        < events.index("RUN 1")
        < events.index("COMMITTED 2")
        < events.index("RUN 2")
    )
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    # The second LLM call saw both tool results, paired with their calls.
    second = model.requests[1].messages
    assert [m.tool_call_id for m in second if isinstance(m, ToolResultMessage)] == ["a", "b"]


async def test_tool_errors_and_crashes_go_back_to_the_model(tmp_path: Path) -> None:
    events: list[str] = []
    model = script(
        LLMResponse("", (call("a", n=1, boom=True), ToolCall("b", "nope", {}))),
        LLMResponse("recovered"),
    )
    agent, _ = make_agent(model, events, tmp_path)
    messages: list[Any] = []
    assert await agent.run(messages, user_text="go") == "recovered"
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and "kaput" in results[0].content
    assert results[1].is_error and "unknown tool 'nope'" in results[1].content


async def test_denied_call_is_not_run_and_the_model_hears_why(tmp_path: Path) -> None:
    events: list[str] = []
    model = script(LLMResponse("", (call("a", n=1),)), LLMResponse("ok"))
    approver = Approver(answer=False)
    agent, tool = make_agent(model, events, tmp_path, policy=Policy("ask"), approver=approver)
    messages: list[Any] = []
    await agent.run(messages, user_text="go")
    assert tool.runs == 0
    assert approver.requests[0].step_id == "s0099"
    assert "approval a False by person" in events
    assert any(e.startswith("refused a: denied by the user (xclaw chat)") for e in events)
    assert "denied by the user" in messages[2].content


async def test_policy_deny_never_asks(tmp_path: Path) -> None:
    """A refusal by a rule is the refused call's own record, with the policy's reason: no
    approval of its own (nobody was asked)."""
    events: list[str] = []
    model = script(LLMResponse("", (call("a", n=1, deny=True),)), LLMResponse("ok"))
    approver = Approver()
    agent, tool = make_agent(model, events, tmp_path, policy=Policy("ask"), approver=approver)
    await agent.run([], user_text="go")
    assert tool.runs == 0 and approver.requests == []
    assert "refused a: refused by policy" in events
    assert not any(e.startswith(("approval", "alert")) for e in events)


async def test_a_call_the_policy_allows_runs_with_no_approval_of_its_own(tmp_path: Path) -> None:
    """What a rule lets run without asking (yolo, auto-edits, the allowlist, tool_policies)
    is not an approval: the session's recorded approval mode says why it ran."""
    events: list[str] = []
    model = script(LLMResponse("", (call("a", n=1),)), LLMResponse("ok"))
    agent, tool = make_agent(model, events, tmp_path, policy=Policy("allow"))
    await agent.run([], user_text="go")
    assert tool.runs == 1 and not any(e.startswith(("approval", "alert")) for e in events)
    assert events[events.index("llm_finished") + 1] == "COMMITTED 1"


async def test_approval_timeout_counts_as_denial(tmp_path: Path) -> None:
    events: list[str] = []
    model = script(LLMResponse("", (call("a", n=1),)), LLMResponse("ok"))
    agent, tool = make_agent(
        model,
        events,
        tmp_path,
        policy=Policy("ask"),
        approver=Approver(delay=5),
        config=AgentConfig(approval_timeout_s=0.05),
    )
    messages: list[Any] = []
    await agent.run(messages, user_text="go")
    assert tool.runs == 0
    assert "no answer within" in messages[2].content
    assert "approval a False by timeout" in events


async def test_max_iterations_stops_with_an_alert(tmp_path: Path) -> None:
    events: list[str] = []
    model = FunctionModel(lambda req: LLMResponse("", (call(f"c{len(req.messages)}", n=1),)))
    agent, _tool = make_agent(model, events, tmp_path, config=AgentConfig(max_iterations=3))
    with pytest.raises(LimitsExceeded):
        await agent.run([], user_text="loop forever")
    assert len(model.requests) == 3
    assert events[-1] == "alert max_iterations"


async def test_llm_failure_fails_the_step_and_propagates(tmp_path: Path) -> None:
    events: list[str] = []
    model = FunctionModel(lambda req: LLMError("503 overloaded"))
    agent, _ = make_agent(model, events, tmp_path)
    with pytest.raises(LLMError):
        await agent.run([], user_text="go")
    assert events[-1] == "llm_failed 503 overloaded"


async def test_cancel_stops_between_steps(tmp_path: Path) -> None:
    events: list[str] = []
    cancel = asyncio.Event()

    def respond(req: LLMRequest) -> LLMResponse:
        cancel.set()  # the user presses Ctrl+C while the LLM answers
        return LLMResponse("", (call("a", n=1),))

    agent, tool = make_agent(FunctionModel(respond), events, tmp_path, cancel_event=cancel)
    with pytest.raises(Cancelled):
        await agent.run([], user_text="go")
    assert tool.runs == 0  # the step in flight (the LLM call) finished; nothing after it ran


@dataclass
class BlockingTool(Tool):
    """Runs until cancelled; records that it saw the cancellation and stopped."""

    events: list[str]
    started: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = "count"
    description: str = "blocks"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    read_only: bool = False
    parallel_safe: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # its own clean-up (the shell tool: SIGTERM, grace)
            self.events.append("tool stopped")
            raise
        return ToolResult("never")


async def test_cancel_stops_a_running_tool_before_the_run_ends(tmp_path: Path) -> None:
    """The cancel reaches the tool where it waits, its clean-up finishes first, the step
    ends as cancelled, and the task that ran it is not left cancelled (later awaits work)."""
    events: list[str] = []
    cancel = asyncio.Event()
    agent, _ = make_agent(
        script(LLMResponse("", (call("a", n=1),))), events, tmp_path, cancel_event=cancel
    )
    tool = BlockingTool(events)
    agent.tools = {"count": tool}

    async def drive() -> str:
        try:
            await agent.run([], user_text="go")
        except Cancelled:
            await asyncio.sleep(0)  # not cancelled again: uncancelled after the user's cancel
            return "cancelled"
        return "finished"

    run = asyncio.create_task(drive())
    await asyncio.wait_for(tool.started.wait(), 5)
    cancel.set()
    assert await asyncio.wait_for(run, 5) == "cancelled"
    assert events[-2:] == ["tool stopped", "finished a error=True"]
    assert run.cancelling() == 0


async def test_a_cancel_after_the_call_returned_waits_for_the_next_step(tmp_path: Path) -> None:
    """The watcher's callback runs a moment after the cancel: if the call has returned by
    then, its result stands (recorded as it is) and the run stops at the next step."""
    events: list[str] = []
    cancel = asyncio.Event()

    @dataclass
    class SetsCancel(CountTool):
        async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            cancel.set()  # the user's cancel lands as the tool returns: the watcher sees it
            await asyncio.sleep(0)  # now, and its callback runs once the tool has returned
            return await super().run(args, ctx)

    agent, _ = make_agent(
        script(LLMResponse("", (call("a", n=1),)), LLMResponse("done")),
        events,
        tmp_path,
        cancel_event=cancel,
    )

    class SlowRecord(Observer):
        async def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
            await asyncio.sleep(0.02)  # the result's durable commit: must not be cut short
            await super().tool_finished(call, result)

    agent.tools = {"count": SetsCancel(events)}
    agent.observer = SlowRecord(events)
    with pytest.raises(Cancelled):
        await agent.run([], user_text="go")
    assert "finished a error=False" in events  # its real result, not "cancelled"
    assert events.count("llm_started") == 1  # no model call after the cancel


async def test_a_shutdown_cancel_is_not_taken_for_the_users(tmp_path: Path) -> None:
    """A task cancelled from outside (the server stopping) ends cancelled, not Cancelled."""
    events: list[str] = []
    agent, _ = make_agent(script(LLMResponse("", (call("a", n=1),))), events, tmp_path)
    tool = BlockingTool(events)
    agent.tools = {"count": tool}
    run = asyncio.create_task(agent.run([], user_text="go"))
    await asyncio.wait_for(tool.started.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert "tool stopped" in events


async def test_resume_runs_pending_calls_without_asking_the_llm_again(tmp_path: Path) -> None:
    """A completed LLM call whose tool calls never started: they run once, no re-issue."""
    events: list[str] = []
    model = script(LLMResponse("finished"))
    agent, tool = make_agent(model, events, tmp_path)
    messages: list[Any] = [UserMessage("go"), AssistantMessage("", (call("a", n=1),))]
    answer = await agent.run(messages, resume=ResumeState(note="[System: resume]"))
    assert answer == "finished" and tool.runs == 1
    assert len(model.requests) == 1
    # The resume note reaches the LLM but is not kept in the conversation.
    assert model.requests[0].messages[-1] == UserMessage("[System: resume]")
    assert UserMessage("[System: resume]") not in messages


async def test_reissued_interrupted_call_needs_approval_with_warning(tmp_path: Path) -> None:
    events: list[str] = []
    again = call("x2", n=7)
    model = script(LLMResponse("", (again,)), LLMResponse("ok"))
    approver = Approver(answer=True)
    agent, tool = make_agent(model, events, tmp_path, approver=approver)  # policy: allow
    resume = ResumeState(note="resume", suspect_calls={call_signature("count", {"n": 7})})
    await agent.run([UserMessage("go")], resume=resume)
    assert approver.requests and approver.requests[0].maybe_repeated
    assert tool.runs == 1


async def test_finished_conversation_returns_without_calling_the_llm(tmp_path: Path) -> None:
    model = script()
    agent, _ = make_agent(model, [], tmp_path)
    assert await agent.run([UserMessage("hi"), AssistantMessage("hello")]) == "hello"
    assert model.requests == []


async def test_sub_agents_run_in_parallel_with_their_own_messages(tmp_path: Path) -> None:
    events: list[str] = []
    started: list[str] = []
    gate = asyncio.Event()

    class SubAwareModel(FunctionModel):
        async def complete(
            self, request: LLMRequest, on_event: EventSink | None = None
        ) -> LLMResponse:
            self.requests.append(request)
            if request.playback.agent == "main":
                if len(request.messages) == 1:
                    return LLMResponse(
                        "",
                        (
                            call("s1", tool="spawn_agent", task="A"),
                            call("s2", tool="spawn_agent", task="B"),
                        ),
                    )
                return LLMResponse("both done")
            task = request.messages[0].text
            started.append(task)
            if len(started) == 2:
                gate.set()
            await asyncio.wait_for(gate.wait(), 2)  # only passes if both sub-agents run at once
            return LLMResponse(f"sub {task} ok")

    model = SubAwareModel(None)
    agent, _ = make_agent(model, events, tmp_path)
    messages: list[Any] = []
    assert await agent.run(messages, user_text="split") == "both done"
    results = [m.content for m in messages if isinstance(m, ToolResultMessage)]
    assert results == ["sub A ok", "sub B ok"]
    assert "[s1] user A" in events and "[s2] user B" in events
    sub_requests = [r for r in model.requests if r.playback.agent != "main"]
    assert all(len(r.messages) == 1 for r in sub_requests)  # sub-agents see only their task


@dataclass
class SlowTool(Tool):
    """Logs when it starts and ends. Where the sub-agents' tools may overlap (`meet`), each
    waits until the other has started too; where they must not, it takes a while, in which
    the other must not start."""

    events: list[str]
    read_only: bool
    meet: bool = False
    name: str = "slow"
    description: str = "slow"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    parallel_safe: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.events.append(f"enter {args['n']}")
        if self.meet:
            entered = lambda: sum(e.startswith("enter ") for e in self.events) == 2  # noqa: E731
            await until(entered, "the other sub-agent's tool starts too")
        else:
            await asyncio.sleep(0.3)  # an absence: the other does not start meanwhile
        self.events.append(f"exit {args['n']}")
        return ToolResult("slept")


@pytest.mark.parametrize(
    ("read_only", "parallel_side_effects", "overlap"),
    [(False, False, False), (False, True, True), (True, False, True)],
    ids=["side-effects-one-at-a-time", "side-effects-allowed-to-overlap", "read-only-overlap"],
)
async def test_parallel_sub_agents_take_turns_for_side_effects(
    tmp_path: Path, read_only: bool, parallel_side_effects: bool, overlap: bool
) -> None:
    """A side-effecting tool holds the session's turn from its write-ahead row (and the
    snapshot behind it) to its end, so no snapshot sees a sibling's command half-way."""
    events: list[str] = []

    def answer(req: LLMRequest) -> LLMResponse:
        if req.playback.agent == "main":
            if len(req.messages) == 1:
                return LLMResponse(
                    "",
                    (
                        call("s1", tool="spawn_agent", task="A"),
                        call("s2", tool="spawn_agent", task="B"),
                    ),
                )
            return LLMResponse("both done")
        if not any(isinstance(m, AssistantMessage) for m in req.messages):
            return LLMResponse(
                "", (call(f"t{req.messages[0].text}", tool="slow", n=req.messages[0].text),)
            )
        return LLMResponse("ok")

    agent = Agent(
        model=FunctionModel(answer),
        tools={"slow": SlowTool(events, read_only, overlap), "spawn_agent": SpawnTool()},
        policy=Policy(),
        approver=Approver(),
        observer=Observer(events),
        context=ToolContext(workspace=tmp_path, session_id="t"),
        config=AgentConfig(parallel_side_effects=parallel_side_effects),
    )
    assert await agent.run([], user_text="split") == "both done"
    tool_events = [e.split("] ")[-1].replace("COMMITTED", "row") for e in events]
    tool_events = [
        e for e in tool_events if e.split()[0] in ("row", "enter", "exit") and e.split()[-1] in "AB"
    ]
    assert sorted(tool_events) == ["enter A", "enter B", "exit A", "exit B", "row A", "row B"]
    first = tool_events[0].split()[-1]
    other = "B" if first == "A" else "A"
    alone = [
        f"row {first}",
        f"enter {first}",
        f"exit {first}",
        f"row {other}",
        f"enter {other}",
        f"exit {other}",
    ]
    assert (tool_events != alone) is overlap, tool_events


def test_pending_tool_calls() -> None:
    a, b = call("a", n=1), call("b", n=2)
    assert pending_tool_calls([UserMessage("x"), AssistantMessage("", (a, b))]) == [a, b]
    assert pending_tool_calls(
        [AssistantMessage("", (a, b)), ToolResultMessage("a", "count", "ok")]
    ) == [b]
    assert pending_tool_calls([AssistantMessage("", (a,)), UserMessage("new")]) == []
    assert pending_tool_calls([UserMessage("x")]) == []
    assert pending_tool_calls([]) == []


async def test_context_outgrowing_the_window_is_trimmed_without_breaking_pairs(
    tmp_path: Path,
) -> None:
    model = script(LLMResponse("short answer"))
    # compact_at=None: trimming alone (with compaction on, the model would summarise first).
    config = AgentConfig(context_window_tokens=6_000, max_tokens=1_000, compact_at=None)
    agent, _ = make_agent(model, [], tmp_path, config=config)
    messages: list[Any] = [UserMessage("the task")]
    for i in range(200):
        messages += [
            AssistantMessage("", (call(f"c{i}", n=i),)),
            ToolResultMessage(f"c{i}", "count", "x" * 400),
        ]
    messages.append(UserMessage("latest question"))
    await agent.run(messages)
    sent = model.requests[0].messages
    assert len(sent) < len(messages) // 4
    assert sent[0] == UserMessage("the task") and sent[-1] == UserMessage("latest question")
    asked = {c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in sent if isinstance(m, ToolResultMessage)}
    assert asked == answered
    assert len(messages) == 403  # the conversation itself keeps everything
    assert model.requests[0].playback.history == tuple(
        messages[:402]
    )  # what was trimmed, for scripts


async def test_a_scripted_session_longer_than_the_window_plays_its_script_once(
    tmp_path: Path,
) -> None:
    """The scripted model counts its turns over the whole conversation: once the oldest turns
    are trimmed from what the model sees, the script still goes on, not back."""
    turns = [
        {"text": "", "tool_calls": [{"name": "count", "input": {"n": i, "pad": "x" * 400}}]}
        for i in range(60)
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [*turns, {"text": "all counted"}]}))
    events: list[str] = []
    agent, tool = make_agent(
        ScriptedModel(path),
        events,
        tmp_path,
        config=AgentConfig(context_window_tokens=6_000, max_tokens=1_000, max_iterations=100),
    )
    assert await agent.run([], user_text="count") == "all counted"
    assert tool.runs == 60 and [e for e in events if e.startswith("RUN")] == [
        f"RUN {i}" for i in range(60)
    ]


async def test_a_turns_first_call_is_marked_and_no_other(tmp_path: Path) -> None:
    """`turn_start` (what a provider's first_tool_choice acts on) is set on the call that
    answers the user's message, not on the calls after tool results, not on a summary."""
    events: list[str] = []
    model = script(
        LLMResponse("", (call("a", n=1),)),
        LLMResponse("done"),
        LLMResponse("summary"),
        LLMResponse("again"),
    )
    agent, _ = make_agent(model, events, tmp_path)
    messages: list[Any] = []
    await agent.run(messages, user_text="go")
    await agent.compact(messages)
    messages.append(UserMessage("next"))
    await agent.run(messages)
    assert [r.turn_start for r in model.requests] == [True, False, False, True]


async def test_the_window_a_server_reports_caps_the_configured_one(tmp_path: Path) -> None:
    """A local server serving a 6k window while xclaw.yaml says (by default) 150k: the
    conversation is fitted into the 6k the server reports; a larger reported window does not
    raise a smaller configured one."""

    def long_history() -> list[Any]:
        messages: list[Any] = [UserMessage("the task")]
        for i in range(200):
            messages += [
                AssistantMessage("", (call(f"c{i}", n=i),)),
                ToolResultMessage(f"c{i}", "count", "x" * 400),
            ]
        return [*messages, UserMessage("latest question")]

    for reported, configured, trimmed in (
        (6_000, 150_000, True),
        (150_000, 6_000, True),
        (None, 150_000, False),
    ):
        model = script(LLMResponse("short answer"))
        asked: list[int] = []

        async def context_window(
            value: int | None = reported, asked: list[int] = asked
        ) -> int | None:
            asked.append(1)
            return value

        model.context_window = context_window  # type: ignore[attr-defined]
        config = AgentConfig(context_window_tokens=configured, max_tokens=1_000, compact_at=None)
        agent, _ = make_agent(model, [], tmp_path, config=config)
        messages = long_history()
        await agent.run(messages)
        sent = model.requests[0].messages
        assert (len(sent) < len(messages) // 4) is trimmed, (reported, configured)
        assert asked == [1]
