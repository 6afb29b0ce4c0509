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
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import (
    Annotated,
    Any,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

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
        doc = parse_docstring(inspect.getdoc(fn) or "")
        self.description = (declared.description or doc.summary or self.name).strip()
        self._model, self._single, self._context = _args_model(fn, ref, doc.args)
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

    def check_input(self, args: dict[str, Any]) -> str | None:
        """What is wrong with `args` (None: nothing): checked before anyone is asked to
        approve the call, and again as it runs."""
        try:
            self._model.model_validate(args if isinstance(args, dict) else {})
        except ValidationError as e:
            return _problems(self.name, e)
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            parsed = self._model.model_validate(args if isinstance(args, dict) else {})
        except ValidationError as e:
            return ToolResult(_problems(self.name, e), is_error=True)
        if self._single is not None:
            kwargs: dict[str, Any] = {self._single: parsed}
        else:
            kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        if self._context is not None:
            kwargs[self._context] = ctx
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


def _problems(name: str, e: ValidationError) -> str:
    problems = "; ".join(
        f"'{'.'.join(str(p) for p in err['loc']) or 'input'}': {err['msg']}" for err in e.errors()
    )
    return f"{name}: bad arguments: {problems}"


def _args_model(
    fn: Callable[..., Any], ref: str, described: Mapping[str, str] | None = None
) -> tuple[type[BaseModel], str | None, str | None]:
    """A pydantic model of the arguments, the parameter standing for the whole input (a
    single pydantic model parameter: its fields are the tool's arguments), and the parameter
    that takes the call's ToolContext (not an argument the model gives). `described`: the
    docstring's words for each parameter (an `Annotated` description wins)."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise ConfigError(f"tools: {ref}: cannot read its type hints: {e}") from e
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    context = next((p.name for p in params if _is_context(hints.get(p.name))), None)
    params = [p for p in params if p.name != context]
    if len(params) == 1:
        only = _bare(hints.get(params[0].name))
        if isinstance(only, type) and issubclass(only, BaseModel):
            return only, params[0].name, context
    fields: dict[str, Any] = {}
    for p in params:
        if p.name not in hints:
            raise ConfigError(f"tools: {ref}: parameter {p.name!r} needs a type hint")
        default = ... if p.default is inspect.Parameter.empty else p.default
        hint = hints[p.name]
        words = (described or {}).get(p.name)
        if words and not _has_description(hint):
            hint = Annotated[hint, Field(description=words)]
        fields[p.name] = (hint, default)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    return model, None, context


def _bare(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) is Annotated else hint


def _is_context(hint: Any) -> bool:
    """A parameter for the call's ToolContext (`ctx: ToolContext`, or `| None`)."""
    bare = _bare(hint)
    options = get_args(bare) if get_origin(bare) in (Union, UnionType) else (bare,)
    return any(isinstance(o, type) and issubclass(o, ToolContext) for o in options)


def _has_description(hint: Any) -> bool:
    if get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(hint)[1:])


@dataclass(frozen=True)
class Docstring:
    summary: str
    args: dict[str, str]


# The section headers of a Google-style docstring: the summary ends at the first of them.
_SECTIONS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$"
)
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> Docstring:
    """The summary (the text before the first section) and each parameter's words from a
    Google-style `Args:` section:

        Args:
            order_id: The order's id, like A-1.
            days (int): How many days ahead; continued
                on an indented line.
    """
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in doc.splitlines():
        header = _SECTIONS.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if header:
            section, current, indent = header.group(1), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params") or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        found = _ARG.match(line.strip())
        if found and (indent is None or depth <= indent):
            indent = depth
            current = found.group(1).lstrip("*")
            args[current] = found.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return Docstring("\n".join(summary).strip(), args)


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
    from xclaw.agents.refs import import_ref

    policies = policies or {}
    out = []
    for ref in refs:
        fn = import_ref(ref, "tools", cwd=cwd)
        declared = getattr(fn, _MARK, None)
        name = (declared.name if declared else None) or fn.__name__
        out.append(PythonTool(ref, fn, policies.get(name, ToolPolicy())))
    return out
