"""[agents] The agents a runtime knows by name: `default` (xclaw's own), xclaw.yaml's `agents:`, and
those a program gives `xclaw.open(agent=..., agents=...)` (which win over xclaw.yaml's of the
same name, as every argument of `open` wins over the file)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from xclaw.agents.definition import DEFAULT_AGENT, DEFAULT_NAME, AgentDefinition, check_name, define
from xclaw.agents.hooks import Hooks
from xclaw.agents.settings import AgentEntry
from xclaw.errors import ConfigError


class AgentCatalog:
    def __init__(self, definitions: Iterable[AgentDefinition] = ()) -> None:
        self._by_name: dict[str, AgentDefinition] = {DEFAULT_NAME: DEFAULT_AGENT}
        for d in definitions:
            self.add(d)

    def add(self, definition: AgentDefinition, *, replace: bool = False) -> AgentDefinition:
        """Known by its name from now on, with its sub-agents. Another definition under a
        name already known is refused, unless `replace` (a program's own, over xclaw.yaml's)."""
        for sub in definition.sub_agents:
            self.add(sub, replace=replace)
        had = self._by_name.get(definition.name)
        differs = had is not None and had is not definition and had.digest != definition.digest
        if differs and had is not None and (had.is_default or not replace):
            raise ConfigError(
                f"two different agents are named {definition.name!r}: give each a name of its own"
            )
        if had is None or had.digest != definition.digest:
            self._by_name[definition.name] = definition
        return self._by_name[definition.name]

    def get(self, name: str) -> AgentDefinition | None:
        return self._by_name.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def named(self) -> list[AgentDefinition]:
        """The declared agents (not the default), by name."""
        return [d for n, d in sorted(self._by_name.items()) if not d.is_default]

    def listing(self) -> list[dict[str, Any]]:
        """What a client is shown to choose from: every agent, the default first."""
        return [_shown(d) for d in [DEFAULT_AGENT, *self.named()]]


def _shown(d: AgentDefinition) -> dict[str, Any]:
    return {
        "name": d.name,
        "description": d.description or ("xclaw's own agent" if d.is_default else ""),
        "digest": d.digest,
        "model": d.model,
        "output": None if d.output is None else d.output.name,
        "subAgents": [s.name for s in d.sub_agents],
    }


def declared_agents(entries: Mapping[str, AgentEntry]) -> list[AgentDefinition]:
    """xclaw.yaml's `agents:` as definitions (their tools, hooks and output types imported);
    a sub-agent is another entry, by name (a cycle is refused)."""
    built: dict[str, AgentDefinition] = {}

    def build(name: str, chain: tuple[str, ...]) -> AgentDefinition:
        where = f"xclaw.yaml: agents.{name}"
        if name in chain:
            raise ConfigError(f"{where}: sub_agents: {' -> '.join((*chain, name))} is a cycle")
        if name in built:
            return built[name]
        entry = entries[name]
        subs = []
        for sub in entry.sub_agents:
            if sub not in entries:
                known = ", ".join(sorted(entries)) or "none"
                raise ConfigError(
                    f"{where}: sub_agents: no agent {sub!r} in agents: (declared: {known})"
                )
            subs.append(build(sub, (*chain, name)))
        hooks = entry.hooks
        built[name] = define(
            name,
            instructions=entry.instructions,
            extend_default=entry.extend_default,
            description=entry.description or "",
            tools=entry.tools,
            builtin_tools=entry.builtin_tools,
            allowed_tools=entry.allowed_tools,
            model=entry.model,
            model_settings=entry.model_settings.model_dump(),
            output_type=entry.output_type,
            sub_agents=subs,
            hooks=Hooks(
                before_tool=hooks.before_tool,
                after_tool=hooks.after_tool,
                before_model=hooks.before_model,
            ),
            where=where,
        )
        return built[name]

    for name in entries:
        check_name(name, f"xclaw.yaml: agents.{name}")
        build(name, ())
    return [built[name] for name in entries]
