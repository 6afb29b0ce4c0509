"""[agents] An agent as a declared value: everything a session's agent is made of, and the digest
that names that exact definition in the record (docs/agents.md).

A definition is built once (from `xclaw.Agent(...)` or an `agents:` entry of xclaw.yaml) and
never changes. Its digest covers what is declared — the instructions' text (or the import
path of the function that makes them), the tools offered (each Python tool's import path,
schema and traits; the built-ins by name), the allow-list, the model and its settings, the
output schema, the sub-agents' digests and the hooks' import paths — not the bodies of the
functions, which are code, like xclaw's own: two processes that declare the same agent have
the same digest, and a session resumed or taken over runs only a definition with the digest
it recorded (xclaw/runtime/agent_choice.py).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from xclaw.agents.hooks import NO_HOOKS, Hooks
from xclaw.agents.output import FINAL_ANSWER, OutputSpec, output_spec
from xclaw.agents.refs import function_ref, import_ref
from xclaw.errors import ConfigError

if TYPE_CHECKING:
    from xclaw.tools.base import ToolContext
    from xclaw.tools.python_tools import PythonTool

# The agent a session runs when none is named: xclaw's own, as it always was.
DEFAULT_NAME = "default"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# The built-in tools by name (xclaw/tools/registry.py), in the order the model is shown them.
BUILTIN_TOOLS = (
    "shell",
    "read_file",
    "view_file",
    "write_file",
    "edit_file",
    "list_dir",
    "spawn_agent",
)
ALL: Literal["all"] = "all"

InstructionsFunction: TypeAlias = Callable[["ToolContext"], "str | Awaitable[str]"]
ToolSpecifier: TypeAlias = "Callable[..., Any] | str"


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-agent settings of its model calls; None: the server's (xclaw.yaml's)."""

    temperature: float | None = None
    max_tokens: int | None = None
    max_iterations: int | None = None

    @classmethod
    def of(cls, given: ModelSettings | Mapping[str, Any] | None, where: str) -> ModelSettings:
        if given is None:
            return cls()
        if isinstance(given, ModelSettings):
            return given
        if not isinstance(given, Mapping):
            raise ConfigError(f"{where}: model_settings must be a mapping, got {given!r}")
        unknown = set(given) - {"temperature", "max_tokens", "max_iterations"}
        if unknown:
            raise ConfigError(
                f"{where}: model_settings: unknown keys {sorted(unknown)} (temperature, "
                "max_tokens, max_iterations)"
            )
        temperature = given.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or temperature < 0
        ):
            raise ConfigError(f"{where}: model_settings.temperature must be a number >= 0")
        whole: dict[str, int | None] = {}
        for key in ("max_tokens", "max_iterations"):
            value = given.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{where}: model_settings.{key} must be a whole number >= 1")
            whole[key] = value
        return cls(
            temperature=None if temperature is None else float(temperature),
            max_tokens=whole["max_tokens"],
            max_iterations=whole["max_iterations"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "maxTokens": self.max_tokens,
            "maxIterations": self.max_iterations,
        }


@dataclass(frozen=True, eq=False)
class AgentDefinition:
    """One declared agent. Build it with `define` (which checks every part and says what is
    wrong in one sentence); `digest` names it in the record."""

    name: str
    description: str = ""
    # The system prompt: text, a function of the run's context (evaluated once per turn and
    # recorded), or None: xclaw's default. `extend_default`: added after the default.
    instructions: str | InstructionsFunction | None = None
    extend_default: bool = False
    # Its own tools (Python functions) and tools of the server's toolbox by name or pattern
    # (a Python tool of xclaw.yaml's `tools:`, `mcp__<server>__*`).
    python_tools: tuple[PythonTool, ...] = ()
    named_tools: tuple[str, ...] = ()
    # The built-ins offered: every one (None), or these (empty: none).
    builtin_tools: tuple[str, ...] | None = None
    # When given, only tools whose name matches one of these patterns are offered.
    allowed_tools: tuple[str, ...] | None = None
    model: str | None = None
    model_settings: ModelSettings = field(default_factory=ModelSettings)
    output: OutputSpec | None = None
    sub_agents: tuple[AgentDefinition, ...] = ()
    hooks: Hooks = NO_HOOKS
    # The default agent offers the toolbox's whole tool set (built-in, Python, MCP) as is.
    whole_toolbox: bool = False

    @property
    def is_default(self) -> bool:
        return self.whole_toolbox

    def describe(self) -> dict[str, Any]:
        """Everything the digest covers, as JSON."""
        instructions: Any = self.instructions
        if callable(instructions):
            instructions = {"function": function_ref(instructions)}
        return {
            "name": self.name,
            "description": self.description,
            "instructions": instructions,
            "extendDefault": self.extend_default,
            "tools": [
                {"ref": t.ref, "name": t.name, "schema": t.input_schema, "traits": _traits(t)}
                for t in self.python_tools
            ],
            "namedTools": list(self.named_tools),
            "builtinTools": None if self.builtin_tools is None else list(self.builtin_tools),
            "allowedTools": None if self.allowed_tools is None else list(self.allowed_tools),
            "wholeToolbox": self.whole_toolbox,
            "model": self.model,
            "modelSettings": self.model_settings.to_json(),
            "output": None if self.output is None else self.output.describe(),
            "subAgents": {s.name: s.digest for s in self.sub_agents},
            "hooks": self.hooks.describe(),
        }

    @property
    def digest(self) -> str:
        cached: str | None = self.__dict__.get("_digest")
        if cached is None:
            text = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"), default=str)
            cached = hashlib.sha256(text.encode()).hexdigest()[:16]
            object.__setattr__(self, "_digest", cached)
        return cached

    def offers(self, name: str) -> bool:
        """Whether a tool of this name passes the allow-list."""
        if self.allowed_tools is None:
            return True
        return any(fnmatch.fnmatchcase(name, p) for p in self.allowed_tools)

    def sub_agent(self, name: str) -> AgentDefinition | None:
        return next((s for s in self.sub_agents if s.name == name), None)


def _traits(tool: PythonTool) -> dict[str, Any]:
    t = tool.traits
    assert t is not None
    return {
        "readOnly": t.read_only,
        "idempotent": t.idempotent,
        "destructive": t.destructive,
        "openWorld": t.open_world,
    }


def check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(
            f"{where}: an agent's name is 1-64 letters, digits, '_', '-' or '.', starting with "
            f"a letter or digit; got {name!r}"
        )
    return name


def define(
    name: str,
    *,
    instructions: str | InstructionsFunction | None = None,
    extend_default: bool = False,
    description: str = "",
    tools: Iterable[ToolSpecifier] = (),
    builtin_tools: Iterable[str] | Literal["all"] | None = ALL,
    allowed_tools: Iterable[str] | None = None,
    model: str | None = None,
    model_settings: ModelSettings | Mapping[str, Any] | None = None,
    output_type: Any = None,
    sub_agents: Iterable[AgentDefinition] = (),
    hooks: Hooks | None = None,
    where: str | None = None,
) -> AgentDefinition:
    """A definition, every part checked; ConfigError naming the part that is wrong."""
    from xclaw.tools.python_tools import PythonTool

    at = where or f"agent {name!r}"
    check_name(name, at)
    if name == DEFAULT_NAME:
        raise ConfigError(f"{at}: 'default' names xclaw's own agent; give yours another name")
    if (
        instructions is not None
        and not isinstance(instructions, str)
        and not callable(instructions)
    ):
        raise ConfigError(f"{at}: instructions must be text or a function, got {instructions!r}")
    if isinstance(tools, str) or callable(tools):
        tools = [tools]
    own: list[PythonTool] = []
    named: list[str] = []
    for t in tools:
        if isinstance(t, str) and ":" not in t:
            named.append(t)
            continue
        fn = import_ref(t, f"{at}: tools") if isinstance(t, str) else t
        if not callable(fn):
            raise ConfigError(f"{at}: tools: {fn!r} is neither a function nor 'module:function'")
        ref = t if isinstance(t, str) else function_ref(fn)
        own.append(PythonTool(ref, fn))
    names = [t.name for t in own]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{at}: tools: two tools named {twice[0]!r}")
    clash = sorted(set(names) & {*BUILTIN_TOOLS, *([FINAL_ANSWER] if output_type else [])})
    if clash:
        raise ConfigError(
            f"{at}: tools: {clash[0]!r} is the name of a tool xclaw gives the agent itself"
        )
    builtins = _builtins(builtin_tools, at)
    allowed = None
    if allowed_tools is not None:
        if isinstance(allowed_tools, str):
            allowed_tools = [allowed_tools]
        allowed = tuple(str(p) for p in allowed_tools)
    subs = tuple(sub_agents)
    for s in subs:
        if not isinstance(s, AgentDefinition):
            raise ConfigError(f"{at}: sub_agents: {s!r} is not an agent")
    sub_names = [s.name for s in subs]
    if len(set(sub_names)) != len(sub_names) or name in sub_names:
        raise ConfigError(f"{at}: sub_agents: each needs a name of its own")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"{at}: model must be a provider spec like 'openai:gpt-4o-mini'")
    return AgentDefinition(
        name=name,
        description=str(description or ""),
        instructions=instructions,
        extend_default=bool(extend_default),
        python_tools=tuple(own),
        named_tools=tuple(named),
        builtin_tools=builtins,
        allowed_tools=allowed,
        model=model,
        model_settings=ModelSettings.of(model_settings, at),
        output=None if output_type is None else output_spec(output_type, at),
        sub_agents=subs,
        hooks=hooks if hooks is not None else NO_HOOKS,
    )


def _builtins(given: Iterable[str] | str | None, at: str) -> tuple[str, ...] | None:
    if given == ALL:
        return None
    if given is None:
        return ()
    if isinstance(given, str):
        given = [given]
    out = []
    for name in given:
        if name not in BUILTIN_TOOLS:
            raise ConfigError(
                f"{at}: builtin_tools: no built-in tool {name!r} ({', '.join(BUILTIN_TOOLS)})"
            )
        out.append(name)
    return tuple(out)


DEFAULT_AGENT = AgentDefinition(name=DEFAULT_NAME, whole_toolbox=True)


def instructions_ref(fn: Callable[..., Any] | str, where: str) -> Callable[..., Any]:
    """An instructions function given by import path."""
    return import_ref(fn, where) if isinstance(fn, str) else fn
