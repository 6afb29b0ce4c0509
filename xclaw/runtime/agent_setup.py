"""[runtime] A declared agent as its loop runs on this worker (docs/agents.md): the tools it is
offered out of the toolbox and its own, its model, its settings and system prompt, and what it adds
to the loop (`Steering`: instructions made per turn, hooks, structured output, sub-agents). Built
once per definition and kept; xclaw's own agent needs none of it (`parts` is None).
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from xclaw.agent.loop import DEFAULT_SYSTEM_PROMPT, AgentConfig
from xclaw.agent.steering import Steering, SubAgent
from xclaw.agents.definition import BUILTIN_TOOLS, AgentDefinition
from xclaw.errors import ConfigError
from xclaw.llm.base import Model
from xclaw.tools.base import Tool, ToolContext
from xclaw.tools.python_tools import PythonTool
from xclaw.tools.spawn import SpawnAgentTool

if TYPE_CHECKING:
    from xclaw.config.settings import Settings
    from xclaw.runtime.wiring import Toolbox


@dataclass(frozen=True)
class LoopParts:
    """What the loop of one declared agent is given instead of the runtime's own."""

    tools: Mapping[str, Tool]
    model: Model | None  # None: the session's model
    config: AgentConfig
    steering: Steering


class AgentSetups:
    """The declared agents of one runtime as their loops run them (kept per definition)."""

    def __init__(self, settings: Settings, toolbox: Toolbox) -> None:
        self.settings = settings
        self.toolbox = toolbox
        self._own: dict[int, dict[str, Tool]] = {}  # a definition's own tools, policies applied
        self._models: dict[str, Model] = {}
        self._parts: dict[tuple[int, int], LoopParts] = {}

    def parts(self, definition: AgentDefinition, base: AgentConfig) -> LoopParts | None:
        """None for xclaw's own agent (the runtime's tools, model and settings as they are).
        Kept per definition and size of the toolbox (an MCP server's tools join late)."""
        if definition.is_default:
            return None
        key = (id(definition), len(self.toolbox.tools))
        found = self._parts.get(key)
        if found is None:
            found = self._parts[key] = self._build(definition, base)
        return found

    def own_tools(self, definition: AgentDefinition) -> dict[str, Tool]:
        """Its Python tools with xclaw.yaml's `tool_policies` applied; each also known to the
        toolbox's resume rules (an interrupted read-only one is retried, as any)."""
        own = self._own.get(id(definition))
        if own is None:
            own = {}
            for t in definition.python_tools:
                policy = self.settings.tool_policies.get(t.name)
                tool = t if policy is None else PythonTool(t.ref, t.fn, policy)
                had = self.toolbox.kinds.get(t.name)
                if had is not None and getattr(had, "ref", None) != t.ref:
                    raise ConfigError(
                        f"agent {definition.name!r}: its tool {t.name!r} ({t.ref}) has the name "
                        "of another tool here: give it another (@xclaw.tool(name=...))"
                    )
                self.toolbox.kinds.setdefault(t.name, tool)
                own[t.name] = tool
            self._own[id(definition)] = own
        return own

    def _build(self, d: AgentDefinition, base: AgentConfig) -> LoopParts:
        tools = self._tools(d)
        subs = {s.name: self._sub(s, base) for s in d.sub_agents}
        config = _config(d, base)
        instructions = None
        if callable(d.instructions):
            instructions = _async(d.instructions)
        steering = Steering(
            name=d.name,
            instructions=instructions,
            base_prompt=DEFAULT_SYSTEM_PROMPT if d.extend_default else "",
            output=d.output,
            hooks=d.hooks if d.hooks else None,
            sub_agents=subs,
        )
        return LoopParts(tools=tools, model=self._model(d), config=config, steering=steering)

    def _sub(self, d: AgentDefinition, base: AgentConfig) -> SubAgent:
        parts = self._build(d, base)
        return SubAgent(
            name=d.name,
            description=d.description,
            model=parts.model,
            tools=parts.tools,
            config=parts.config,
            steering=parts.steering,
        )

    def _tools(self, d: AgentDefinition) -> dict[str, Tool]:
        """The built-ins it chose, its own tools, the toolbox's it names, then the
        allow-list; a spawn_agent that knows its sub-agents."""
        box = self.toolbox.tools
        chosen = BUILTIN_TOOLS if d.builtin_tools is None else d.builtin_tools
        out: dict[str, Tool] = {n: box[n] for n in chosen if n != "spawn_agent" and n in box}
        out.update(self.own_tools(d))
        for pattern in d.named_tools:
            for name, tool in box.items():
                if name not in BUILTIN_TOOLS and fnmatch.fnmatchcase(name, pattern):
                    out.setdefault(name, tool)
        if d.sub_agents:
            anonymous = "spawn_agent" in chosen
            out["spawn_agent"] = SpawnAgentTool(
                {s.name: s.description for s in d.sub_agents}, anonymous=anonymous
            )
        elif "spawn_agent" in chosen and "spawn_agent" in box:
            out["spawn_agent"] = box["spawn_agent"]
        return {n: t for n, t in out.items() if d.offers(n)}

    def missing_tools(self, d: AgentDefinition) -> list[str]:
        """The names (or patterns) it asks of the toolbox that match nothing (after the MCP
        servers started): said to the user as a run starts."""
        box = self.toolbox.tools
        return [p for p in d.named_tools if not any(fnmatch.fnmatchcase(n, p) for n in box)]

    def _model(self, d: AgentDefinition) -> Model | None:
        """Its own model chain (comma-separated specs), built once; the entries xclaw.yaml
        configures for those specs are used (their keys, base URLs)."""
        if d.model is None:
            return None
        found = self._models.get(d.model)
        if found is None:
            from xclaw.config.settings import environment
            from xclaw.llm import registry
            from xclaw.llm.factory import build_model

            configured = {p.model: p for p in self.settings.providers}
            entries = []
            for spec in (s.strip() for s in d.model.split(",") if s.strip()):
                entry = configured.get(spec)
                if entry is None:
                    entry = registry.entry(spec, None, environment(Path.cwd()))
                entries.append(entry)
            found = self._models[d.model] = build_model(
                self.settings.model_copy(update={"providers": tuple(entries)})
            )
        return found


def _config(d: AgentDefinition, base: AgentConfig) -> AgentConfig:
    ms = d.model_settings
    system = base.system_prompt
    if isinstance(d.instructions, str):
        system = f"{system}\n\n{d.instructions}" if d.extend_default else d.instructions
    return replace(
        base,
        system_prompt=system,
        max_iterations=ms.max_iterations or base.max_iterations,
        max_tokens=ms.max_tokens or base.max_tokens,
        temperature=base.temperature if ms.temperature is None else ms.temperature,
    )


def _async(
    fn: Callable[[ToolContext], str | Awaitable[str]],
) -> Callable[[ToolContext], Awaitable[str]]:
    """An instructions function as the loop awaits it; a sync one runs off the event loop."""
    if inspect.iscoroutinefunction(fn):
        return fn

    async def call(ctx: ToolContext) -> str:
        import asyncio

        made = await asyncio.to_thread(fn, ctx)
        return str(await made if inspect.isawaitable(made) else made)

    return call
