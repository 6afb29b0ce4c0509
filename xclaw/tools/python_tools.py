"""Python functions as tools: `tools: ["mypkg.tools:lookup"]` in xclaw.yaml.

    import xclaw

    @xclaw.tool(read_only=True)
    def lookup(city: str, days: int = 1) -> dict:
        "Weather forecast for a city."
        ...

The JSON schema the model sees comes from the type hints (or from a single pydantic model
parameter), the description from the docstring. Sync functions run in a worker thread, async
ones on the loop. The same write-ahead, approval and resume rules apply as to every tool:
the declared traits feed xclaw/tools/traits.py (your own code is trusted: a read-only tool is
not asked about; anything else is).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from xclaw.errors import ConfigError
from xclaw.tools.base import Tool, ToolContext, ToolResult, cap_result_text
from xclaw.tools.traits import NO_OVERRIDE, ToolPolicy, ToolTraits

_MARK = "__xclaw_tool__"


@dataclass(frozen=True)
class Declared:
    name: str | None
    description: str | None
    read_only: bool
    idempotent: bool
    open_world: bool
    destructive: bool


F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    destructive: bool = False,
) -> Callable[[F], F]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
    open_world: bool = False,
    destructive: bool = False,
) -> Any:
    """Marks a function as an xclaw tool and says how it may be retried and approved:
    read_only (no side effects: not asked, retried after a crash), idempotent (safe to run
    twice: retried after a crash), open_world (reaches outside this machine), destructive
    (always asked)."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(
            f, _MARK, Declared(name, description, read_only, idempotent, open_world, destructive)
        )
        return f

    return mark(fn) if fn is not None else mark


class PythonTool(Tool):
    def __init__(self, ref: str, fn: Callable[..., Any], policy: ToolPolicy = NO_OVERRIDE) -> None:
        declared: Declared = getattr(fn, _MARK, None) or Declared(
            None, None, False, False, False, False
        )
        self.ref = ref
        self.fn = fn
        self.name = declared.name or fn.__name__
        self.description = (declared.description or inspect.getdoc(fn) or self.name).strip()
        self._model, self._single = _args_model(fn, ref)
        self.input_schema: dict[str, Any] = _clean_schema(self._model.model_json_schema())
        self.traits = ToolTraits(
            source=f"Python tool {ref}",
            read_only=declared.read_only,
            idempotent=declared.idempotent,
            destructive=declared.destructive and not declared.read_only,
            open_world=declared.open_world,
            trusted=True,
            policy=policy,
        )
        self.read_only = declared.read_only
        self.retry_on_resume = self.traits.retry_on_resume
        self.outside_effects = self.traits.outside_effects

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            parsed = self._model.model_validate(args if isinstance(args, dict) else {})
        except ValidationError as e:
            problems = "; ".join(
                f"'{'.'.join(str(p) for p in err['loc']) or 'input'}': {err['msg']}"
                for err in e.errors()
            )
            return ToolResult(f"{self.name}: bad arguments: {problems}", is_error=True)
        if self._single is not None:
            kwargs: dict[str, Any] = {self._single: parsed}
        else:
            kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:
                value = await asyncio.to_thread(self.fn, **kwargs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the model reads what went wrong
            return ToolResult(f"{self.name} raised {type(e).__name__}: {e}", is_error=True)
        return ToolResult(cap_result_text(_as_text(value)))


def _args_model(fn: Callable[..., Any], ref: str) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of the arguments. A single parameter that is a pydantic model stands
    for the whole input (its fields are the tool's arguments)."""
    try:
        # With their Annotated metadata: `Annotated[str, Field(description=...)]` is what
        # the model is told about the argument.
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise ConfigError(f"tools: {ref}: cannot read its type hints: {e}") from e
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if len(params) == 1:
        only = hints.get(params[0].name)
        if isinstance(only, type) and issubclass(only, BaseModel):
            return only, params[0].name
    fields: dict[str, Any] = {}
    for p in params:
        if p.name not in hints:
            raise ConfigError(f"tools: {ref}: parameter {p.name!r} needs a type hint")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hints[p.name], default)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return model, None


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _as_text(value: Any) -> str:
    if value is None:
        return "(no output)"
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def load_python_tools(
    refs: Iterable[Any], policies: Mapping[str, ToolPolicy] | None = None, cwd: Path | None = None
) -> list[PythonTool]:
    """Import each `module:function`; ConfigError naming the entry when it cannot be used."""
    policies = policies or {}
    base = str((cwd or Path.cwd()).resolve())
    if base not in sys.path:
        sys.path.insert(0, base)  # importable from the working directory
    out = []
    for ref in refs:
        if not isinstance(ref, str) or ":" not in ref:
            raise ConfigError(f"xclaw.yaml: tools: entries are 'module:function', got {ref!r}")
        module_name, _, attr = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except SystemExit as e:  # a script-style module (argparse at top level) exits on import
            raise ConfigError(
                f"xclaw.yaml: tools: {ref!r}: cannot import {module_name!r}: it called "
                f"sys.exit({e.code!r}) while being imported"
            ) from None
        except Exception as e:
            raise ConfigError(
                f"xclaw.yaml: tools: {ref!r}: cannot import {module_name!r}: {type(e).__name__}: {e}"
            ) from e
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise ConfigError(f"xclaw.yaml: tools: {ref!r}: {module_name} has no function {attr!r}")
        declared = getattr(fn, _MARK, None)
        name = (declared.name if declared else None) or fn.__name__
        out.append(PythonTool(ref, fn, policies.get(name, ToolPolicy())))
    return out
