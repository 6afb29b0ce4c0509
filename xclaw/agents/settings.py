"""[agents] `agents:` of xclaw.yaml: agents declared by name, each as `xclaw.Agent(...)` declares
one in Python (docs/agents.md). Read with the settings; turned into definitions — their tools, hooks
and output types imported by path — when a runtime starts (xclaw/agents/catalog.py), so that a
command that only reads the record imports nothing of yours."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from xclaw.config.section import Default, Flag, Number, Section, Strings, Whole


class AgentModelSettings(Section):
    """Per-agent settings of its model calls; none: xclaw.yaml's top-level ones."""

    temperature: Annotated[Number, Field(ge=0)] | None = None
    max_tokens: Annotated[Whole, Field(ge=1)] | None = None
    max_iterations: Annotated[Whole, Field(ge=1)] | None = None


class AgentHookSettings(Section):
    """Hooks by import path (`module:function`), run in order."""

    before_tool: Strings = ()
    after_tool: Strings = ()
    before_model: Strings = ()


class AgentEntry(Section):
    """One agent of `agents:`."""

    description: str | None = None
    # The system prompt (text); none: xclaw's default.
    instructions: str | None = None
    # The instructions are added after the default prompt instead of replacing it.
    extend_default: Flag = False
    # Python tools ('module:function'), and tools of the toolbox by name or pattern.
    tools: Strings = ()
    builtin_tools: Annotated[Literal["all"] | Strings, Default("`all`")] = "all"
    allowed_tools: Strings | None = None
    model: str | None = None
    model_settings: AgentModelSettings = AgentModelSettings()
    # A pydantic model ('module:Class') or a JSON schema (a mapping).
    output_type: str | dict[str, Any] | None = None
    # Other agents of this section, by name.
    sub_agents: Strings = ()
    hooks: AgentHookSettings = AgentHookSettings()


class AgentSettings(Section):
    """The top-level key the declared agents are read from."""

    agents: dict[str, AgentEntry] = Field(default_factory=dict)
