"""Your own tools and models through `xclaw.open`: @xclaw.tool functions, a real MCP server,
a kind of model of your own (a Provider, as a provider package adds one) and a Model object."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest
from pydantic import BaseModel, Field

import xclaw
from tests.api.conftest import AgentFactory, write_script
from xclaw.errors import ConfigError
from xclaw.llm.base import LLMRequest, LLMResponse, Model
from xclaw.llm.events import EventSink, TextDelta
from xclaw.llm.messages import Usage, UserMessage
from xclaw.llm.prices import Price
from xclaw.llm.provider import KeyedEntry, Provider

CALLS: list[str] = []


@xclaw.tool(read_only=True)
def lookup(city: str, days: int = 1) -> dict[str, Any]:
    """Weather forecast for a city."""
    CALLS.append(city)
    return {"city": city, "days": days, "sky": "clear"}


async def test_python_functions_are_tools(open_agent: AgentFactory) -> None:
    CALLS.clear()
    agent = await open_agent(
        [
            {"tool_calls": [{"name": "lookup", "input": {"city": "Oslo"}}]},
            {"text": "Clear in Oslo."},
        ],
        approval="ask",
        tools=[lookup],
    )
    tools = {t.name: t for t in await agent.tools()}
    assert tools["lookup"].read_only and tools["lookup"].approval == "runs"
    assert tools["lookup"].input_schema["required"] == ["city"]
    session = await agent.new_session()
    result = await session.send("weather?")  # read-only: never asked
    assert result.reply == "Clear in Oslo." and CALLS == ["Oslo"]
    done = [e for e in result.of_type("tool") if e.wire()["state"] == "completed"]
    assert '"sky": "clear"' in done[0].wire()["output"]


@xclaw.tool(read_only=True)
def forecast(
    city: Annotated[str, Field(description="the city, as its people write it")],
    days: Annotated[int, Field(ge=1, le=14, description="how many days ahead")] = 3,
) -> str:
    """Weather forecast."""
    return f"{city}: clear for {days} days"


class Ticket(BaseModel):
    title: Annotated[str, Field(description="one line")]


@xclaw.tool
def open_ticket(ticket: Annotated[Ticket, Field(description="the ticket to open")]) -> str:
    """Open a ticket."""
    return ticket.title


async def test_annotated_descriptions_reach_the_schema_the_model_sees(
    open_agent: AgentFactory,
) -> None:
    agent = await open_agent(
        [
            {"tool_calls": [{"name": "forecast", "input": {"city": "Oslo", "days": 99}}]},
            {"tool_calls": [{"name": "forecast", "input": {"city": "Oslo"}}]},
            {"text": "done"},
        ],
        tools=[forecast, open_ticket],
    )
    tools = {t.name: t for t in await agent.tools()}
    schema = tools["forecast"].input_schema
    assert schema["properties"]["city"] == {
        "type": "string",
        "description": "the city, as its people write it",
    }
    days = schema["properties"]["days"]
    assert days["description"] == "how many days ahead" and days["maximum"] == 14
    assert schema["required"] == ["city"]
    ticket = tools["open_ticket"].input_schema["properties"]["ticket"]
    assert ticket["description"] == "the ticket to open"
    # The constraints are the function's own checks too.
    result = await (await agent.new_session()).send("weather?")
    outputs = [e.output for e in result.of_type("tool") if e.state != "running"]
    assert "less than or equal to 14" in outputs[0] and outputs[1] == "Oslo: clear for 3 days"


async def test_a_tool_named_as_a_built_in_is_refused(tmp_path: Path) -> None:
    def shell(command: str) -> str:
        """not the real one"""
        return command

    script = write_script(tmp_path / "s.json", [{"text": "x"}])
    with pytest.raises(ConfigError, match="exists already"):
        await xclaw.open(
            db=tmp_path / "a.db", home=tmp_path, model=f"script:{script}", tools=[shell]
        )


async def test_an_mcp_server_given_to_open(open_agent: AgentFactory) -> None:
    server = str(Path(sys.executable).with_name("mcp-server-time"))
    agent = await open_agent([{"text": "x"}], mcp_servers={"time": {"command": server}})
    names = {t.name for t in await agent.tools()}
    assert "mcp__time__get_current_time" in names


class EchoEntry(KeyedEntry):
    shout: bool = False


class EchoModel:
    def __init__(self, name: str, shout: bool = False) -> None:
        self.name, self.shout = name, shout

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        said = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
        text = "echo: " + (said.upper() if self.shout else said)
        if on_event is not None:
            await on_event(TextDelta(text))
        return LLMResponse(
            text, usage=Usage(prompt_tokens=1000, completion_tokens=10), model=self.name
        )


class EchoProvider(Provider[EchoEntry]):
    kind = "echo-test"
    entry = EchoEntry
    prices: ClassVar[dict[str, Price]] = {"loud": Price(input=2.0, output=4.0)}

    def build(self, entry: EchoEntry, llm: Any) -> Model:
        return EchoModel(entry.model, entry.shout)


async def test_a_kind_of_model_of_your_own(open_agent: AgentFactory, tmp_path: Path) -> None:
    agent = await xclaw.open(
        db=tmp_path / "echo.db",
        home=tmp_path / "home",
        providers=[{"model": "echo-test:loud", "shout": True}],
        provider_kinds=[EchoProvider()],
    )
    try:
        session = await agent.new_session()
        assert (await session.send("hello")).reply == "echo: HELLO"
        steps = await session.steps()
        assert steps[1].name == "echo-test:loud" and steps[1].type == "llm_call"
    finally:
        await agent.close()


async def test_a_model_object(tmp_path: Path) -> None:
    async with xclaw.open(
        db=tmp_path / "m.db", home=tmp_path / "home", model=EchoModel("mine")
    ) as agent:
        session = await agent.new_session()
        assert (await session.send("hi")).reply == "echo: hi"
