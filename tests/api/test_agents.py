"""Declared agents through `xclaw.open` (docs/agents.md): an agent as a value, its
instructions, the tools it is offered and its own tools' context, structured output, the
definition recorded with the session and a resume refused with another one. In process, on
real SQLite files, with the scripted model (a spy around it sees what the model is asked)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import xclaw
from tests.api.conftest import write_script
from xclaw.agent.loop import DEFAULT_SYSTEM_PROMPT
from xclaw.api.local import LocalAgent
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.events import EventSink
from xclaw.llm.scripted import ScriptedModel


class Spy:
    """The scripted model, keeping every request it is asked."""

    def __init__(self, path: Path) -> None:
        self.inner = ScriptedModel(path)
        self.name = self.inner.name
        self.structured_output = self.inner.structured_output
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        self.requests.append(request)
        return await self.inner.complete(request, on_event)


Opener = Callable[..., Any]


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[Opener]:
    """opened(turns, agent=..., script={extra keys}, **open) -> (agent, spy), closed after."""
    agents: list[LocalAgent] = []

    async def make(
        turns: list[dict[str, Any]],
        *,
        script: dict[str, Any] | None = None,
        approval: str = "yolo",
        name: str = "a",
        **kw: Any,
    ) -> tuple[LocalAgent, Spy]:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        spy = Spy(write_script(root / "script.json", turns, **(script or {})))
        agent = await xclaw.open(
            db=root / "app.db", home=root / "home", model=spy, approval=approval, cwd=root, **kw
        )
        assert isinstance(agent, LocalAgent)
        agents.append(agent)
        return agent, spy

    yield make
    for agent in agents:
        await agent.close()


class Ticket(BaseModel):
    title: str
    priority: int


SEEN: list[xclaw.ToolContext] = []


@xclaw.tool(read_only=True)
def order_status(order_id: str, ctx: xclaw.ToolContext) -> str:
    """The delivery status of an order."""
    SEEN.append(ctx)
    return {"A-1": "shipped"}.get(order_id, "unknown order")


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": args}]}


# --- an agent is a value -------------------------------------------------------------------


async def test_a_definition_is_an_agent_and_says_how_to_open_it() -> None:
    support = xclaw.Agent("support", instructions="Help.", builtin_tools=[])
    assert isinstance(support, xclaw.Agent) and support.name == "support"
    assert len(support.digest) == 16
    # The same declaration, the same digest (what the record compares).
    assert xclaw.Agent("support", instructions="Help.", builtin_tools=[]).digest == support.digest
    assert xclaw.Agent("support", instructions="Help!", builtin_tools=[]).digest != support.digest
    with pytest.raises(xclaw.AgentNotOpen, match=r"xclaw\.open\(agent=agent\)"):
        await support.new_session()
    with pytest.raises(xclaw.AgentNotOpen):
        await support.sessions()
    with pytest.raises(xclaw.ConfigError, match="xclaw's own agent"):
        xclaw.Agent("default")
    with pytest.raises(xclaw.ConfigError, match="no built-in tool 'bash'"):
        xclaw.Agent("x", builtin_tools=["bash"])


async def test_open_without_an_agent_is_xclaws_own(opened: Opener) -> None:
    agent, spy = await opened([{"text": "hi"}])
    assert isinstance(agent, xclaw.Agent) and agent.name == "default"
    session = await agent.new_session()
    assert (await session.send("hello")).reply == "hi"
    assert spy.requests[0].system == DEFAULT_SYSTEM_PROMPT
    assert "agent" not in (await session.info()).metadata  # nothing recorded: as before
    names = [t.name for t in spy.requests[0].tools]
    assert names == [
        "shell",
        "read_file",
        "view_file",
        "write_file",
        "edit_file",
        "list_dir",
        "spawn_agent",
    ]


# --- instructions --------------------------------------------------------------------------


async def test_instructions_replace_or_extend_the_default_prompt(opened: Opener) -> None:
    replacing = xclaw.Agent("terse", instructions="Answer in one word.")
    extending = xclaw.Agent("polite", instructions="Be polite.", extend_default=True)
    agent, spy = await opened([{"text": "ok"}], agent=replacing, agents=[extending])
    session = await agent.new_session()
    await session.send("hi")
    assert spy.requests[-1].system == "Answer in one word."
    other = await agent.new_session(agent=extending)
    await other.send("hi")
    assert spy.requests[-1].system == f"{DEFAULT_SYSTEM_PROMPT}\n\nBe polite."


async def test_instructions_made_per_turn_are_recorded_and_read_back_on_resume(
    opened: Opener,
) -> None:
    made: list[str] = []

    def instructions(ctx: xclaw.ToolContext) -> str:
        made.append(ctx.session_id)
        return f"Turn {len(made)} for {ctx.deps['customer']}."

    dynamic = xclaw.Agent("dynamic", instructions=instructions)
    agent, spy = await opened(
        [{"text": "one"}, {"text": "two"}], agent=dynamic, deps={"customer": "ACME"}
    )
    session = await agent.new_session()
    await session.send("first")
    await session.send("second")
    assert [r.system for r in spy.requests] == ["Turn 1 for ACME.", "Turn 2 for ACME."]
    assert made == [session.id, session.id]  # once per turn
    recorded = [s for s in await session.steps() if s.name == "instructions"]
    assert [s.input["text"] for s in recorded] == ["Turn 1 for ACME.", "Turn 2 for ACME."]


# --- tools ---------------------------------------------------------------------------------


async def test_an_agent_is_offered_only_its_tools_and_the_rest_cannot_be_called(
    opened: Opener,
) -> None:
    SEEN.clear()
    support = xclaw.Agent("support", builtin_tools=[], tools=[order_status])
    agent, spy = await opened(
        [
            call("shell", command="touch hacked"),
            call("order_status", order_id="A-1"),
            {"text": "A-1 has shipped."},
        ],
        agent=support,
        deps="my deps",
    )
    session = await agent.new_session()
    result = await session.send("where is A-1?")
    assert result.reply == "A-1 has shipped."
    assert [t.name for t in spy.requests[0].tools] == ["order_status"]
    steps = await session.steps()
    refused = next(s for s in steps if s.name == "shell")
    assert refused.status == "failed" and "unknown tool 'shell'" in refused.error
    ws = Path(agent.runtime.toolbox.workspace(session.id))
    assert not (ws / "hacked").exists()
    # The tool's context: its session, its step, the agent, the program's deps.
    ran = next(s for s in steps if s.name == "order_status")
    (ctx,) = SEEN
    assert (ctx.session_id, ctx.step_id, ctx.agent, ctx.deps) == (
        session.id,
        ran.id,
        "support",
        "my deps",
    )
    assert ctx.user is None and ctx.workspace == ws and ctx.call_id == "call_1_0"
    assert [t.name for t in await agent.tools()] == ["order_status"]


async def test_builtin_tools_and_the_allow_list(opened: Opener) -> None:
    reader = xclaw.Agent(
        "reader", builtin_tools=["read_file", "list_dir", "shell"], allowed_tools=["*_*"]
    )
    agent, spy = await opened([{"text": "ok"}], agent=reader)
    await (await agent.new_session()).send("look")
    assert [t.name for t in spy.requests[0].tools] == ["read_file", "list_dir"]


async def test_arguments_are_checked_before_anyone_is_asked(opened: Opener) -> None:
    @xclaw.tool
    def refund(order_id: str, cents: int) -> str:
        """Refund an order."""
        return "refunded"

    desk = xclaw.Agent("desk", builtin_tools=[], tools=[refund])
    agent, _ = await opened(
        [call("refund", order_id="A-1", cents="lots"), {"text": "could not"}],
        agent=desk,
        approval="ask",
    )
    result = await (await agent.new_session()).send("refund A-1")
    assert result.reply == "could not"
    assert result.of_type("approval_request") == []  # nobody was asked about a bad call
    (tool,) = [e for e in result.of_type("tool") if e.wire()["state"] == "failed"]
    assert "'cents'" in tool.wire()["output"] and "integer" in tool.wire()["output"]


# --- structured output ---------------------------------------------------------------------


async def test_structured_output_through_the_final_answer_tool(opened: Opener) -> None:
    support = xclaw.Agent("support", builtin_tools=[], output_type=Ticket)
    agent, spy = await opened(
        [{"output": {"title": "Late"}}, {"output": {"title": "Late order", "priority": 2}}],
        agent=support,
    )
    session = await agent.new_session()
    result = await session.send("my order is late")
    assert result.error is None
    assert result.output == Ticket(title="Late order", priority=2)
    assert isinstance(result.output, Ticket)
    assert result.output_as(Ticket).priority == 2
    assert json.loads(result.reply or "") == {"title": "Late order", "priority": 2}
    # No structured output of its own: the final-answer tool, with the schema.
    (final,) = [t for t in spy.requests[0].tools if t.name == "final_answer"]
    assert final.input_schema["required"] == ["title", "priority"]
    assert spy.requests[0].output is None
    # The first answer did not validate: the model was told, and the record says so.
    steps = await session.steps()
    refused = next(s for s in steps if s.name == "final_answer")
    assert "'priority': Field required" in refused.error
    last = [s for s in steps if s.type == "llm_call"][-1]
    assert last.output["output"] == {"title": "Late order", "priority": 2}


async def test_structured_output_native_with_a_json_schema(opened: Opener) -> None:
    schema = {
        "title": "Verdict",
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    judge = xclaw.Agent("judge", builtin_tools=[], output_type=schema)
    agent, spy = await opened(
        [{"text": "it is fine"}, {"output": {"ok": True}}],
        agent=judge,
        script={"structured_output": True},
    )
    result = await (await agent.new_session()).send("judge it")
    assert result.output == {"ok": True}
    # The provider's own structured output: the schema in the request, no extra tool.
    assert spy.requests[0].output is not None and spy.requests[0].output.name == "Verdict"
    assert spy.requests[0].tools == ()
    # Text that is no JSON was said back to the model, and it answered again.
    said = spy.requests[1].messages[-1]
    assert "did not validate" in getattr(said, "text", "")


async def test_an_answer_that_never_validates_fails_the_turn_with_its_errors(
    opened: Opener,
) -> None:
    support = xclaw.Agent(
        "support", builtin_tools=[], output_type=Ticket, model_settings={"max_iterations": 2}
    )
    agent, _ = await opened([{"output": {"title": "x"}}] * 3, agent=support)
    result = await (await agent.new_session()).send("help")
    assert result.error is not None and result.error.code == "output_invalid"
    assert "'priority': Field required" in result.error.content
    assert result.output is None


# --- schema descriptions -------------------------------------------------------------------


def test_annotated_and_docstring_descriptions_reach_the_schema() -> None:
    from xclaw.tools.python_tools import PythonTool

    def lookup(
        order_id: Annotated[str, Field(description="the order's id, like A-1")],
        days: int = 1,
        ctx: xclaw.ToolContext | None = None,
    ) -> str:
        """Look an order up.

        Args:
            order_id: not this one (Annotated wins)
            days: how many days of history,
                counting today.
        """
        return ""

    tool = PythonTool("m:lookup", lookup)
    props = tool.input_schema["properties"]
    assert tool.description == "Look an order up."
    assert props["order_id"]["description"] == "the order's id, like A-1"
    assert props["days"]["description"] == "how many days of history, counting today."
    assert "ctx" not in props and tool.input_schema["required"] == ["order_id"]


# --- named sub-agents ----------------------------------------------------------------------


class Review(BaseModel):
    verdict: str
    issues: list[str]


@xclaw.tool(read_only=True)
def read_diff() -> str:
    """The change under review."""
    return "- x = 1\n+ x = 2"


async def test_a_named_sub_agent_runs_with_its_own_definition(opened: Opener) -> None:
    reviewer = xclaw.Agent(
        "reviewer",
        description="reviews a change",
        instructions="You review changes.",
        builtin_tools=[],
        tools=[read_diff],
        output_type=Review,
        model_settings={"temperature": 0.0},
    )
    lead = xclaw.Agent("lead", builtin_tools=["read_file"], sub_agents=[reviewer])
    agent, spy = await opened(
        [call("spawn_agent", task="review the change", agent="reviewer"), {"text": "Approved."}],
        agent=lead,
        script={
            "agents": {
                "reviewer": {
                    "turns": [
                        call("read_diff"),
                        {"output": {"verdict": "ok", "issues": []}},
                    ]
                }
            }
        },
    )
    session = await agent.new_session()
    result = await session.send("get the change reviewed")
    assert result.reply == "Approved."
    lead_tools = {t.name: t for t in spy.requests[0].tools}
    assert list(lead_tools) == ["read_file", "spawn_agent"]
    assert lead_tools["spawn_agent"].input_schema["properties"]["agent"]["enum"] == ["reviewer"]
    asked = [r for r in spy.requests if r.playback.agent_name == "reviewer"]
    assert [r.system for r in asked] == ["You review changes."] * 2
    assert [t.name for t in asked[0].tools] == ["read_diff", "final_answer"]
    assert asked[0].temperature == 0.0
    # The sub-agent's answer reaches the lead as its validated JSON.
    spawned = next(s for s in await session.steps() if s.name == "spawn_agent")
    assert json.loads(spawned.output) == {"verdict": "ok", "issues": []}
    # Its steps hang under the spawn_agent call in the trace.
    (root,) = await session.trace()
    spawn = next(c for n in root.children for c in n.children if c.name == "spawn_agent")
    below: list[xclaw.TreeNode] = []
    stack = list(spawn.children)
    while stack:
        node = stack.pop()
        below.append(node)
        stack.extend(node.children)
    assert {"user", "read_diff"} <= {n.name for n in below}
    assert {n.agent for n in below} == {spawn.id}


async def test_a_sub_agent_name_it_was_not_given_is_refused(opened: Opener) -> None:
    reviewer = xclaw.Agent("reviewer", builtin_tools=[])
    lead = xclaw.Agent("lead", builtin_tools=[], sub_agents=[reviewer])
    agent, _ = await opened(
        [call("spawn_agent", task="x", agent="hacker"), {"text": "no"}], agent=lead
    )
    result = await (await agent.new_session()).send("go")
    (failed,) = [e for e in result.of_type("tool") if e.wire()["state"] == "failed"]
    assert "no sub-agent 'hacker'" in failed.wire()["output"]


async def test_a_message_continues_with_a_changed_definition_and_says_so(
    opened: Opener, tmp_path: Path
) -> None:
    first = xclaw.Agent("writer", instructions="Write.", builtin_tools=[])
    agent, _ = await opened([{"text": "one"}, {"text": "two"}, {"text": "three"}], agent=first)
    session = await agent.new_session()
    await session.send("first")
    await agent.close()
    # Another process declares `writer` otherwise: a new message runs it, recorded and said.
    changed = xclaw.Agent("writer", instructions="Write tersely.", builtin_tools=[])
    root = tmp_path / "a"
    again = await xclaw.open(
        db=root / "app.db", home=root / "home", model=Spy(root / "script.json"), agent=changed
    )
    try:
        resumed = await again.session(session.id)
        result = await resumed.send("second")
        notices = [e.wire()["content"] for e in result.of_type("notice")]
        assert any("changed here to definition" in n for n in notices), notices
        said = [s for s in await resumed.steps() if s.name == "session_agent"]
        assert said[-1].input["decision"] == "changed"
        assert said[-1].input["was"]["digest"] == first.digest
        assert (await resumed.info()).metadata["agent"]["digest"] == changed.digest
        # Naming another agent switches the session to it, from this message on.
        other = xclaw.Agent("other", builtin_tools=[])
        result = await resumed.send("third", agent=other)
        assert result.reply == "three"
        assert (await resumed.info()).agent == "other"
        said = [s for s in await resumed.steps() if s.name == "session_agent"]
        assert said[-1].input["decision"] == "switched"
        with pytest.raises(xclaw.UnknownAgent):
            resumed.send("x", agent="nobody")
    finally:
        await again.close()


def test_an_answer_that_does_not_validate_is_said_briefly() -> None:
    """The model's answer is hostile: what is said back of it is bounded."""
    from xclaw.agents.output import OutputErrors, output_spec

    spec = output_spec({"type": "object", "properties": {"n": {"type": "integer"}}}, "test")
    with pytest.raises(OutputErrors) as caught:
        spec.check({"n": "x" * 100_000})
    assert len(caught.value.errors) == 1 and len(caught.value.errors[0]) <= 300
    with pytest.raises(xclaw.ConfigError, match="'final_answer' is the name of a tool"):

        def final_answer(x: int) -> str:
            """mine"""
            return ""

        xclaw.Agent("x", tools=[final_answer], output_type=Ticket)
