"""[tools] Python functions as tools: `tools: ["mypkg.tools:lookup"]` in xclaw.yaml.

    import xclaw

    @xclaw.tool(read_only=True)
    def lookup(city: str, days: int = 1) -> dict:
        "Weather forecast for a city."
        ...

The JSON schema the model sees comes from the type hints (or from a single pydantic model
parameter), the description from the docstring. A tool may also declare its effect class,
the compensation that undoes a call (`compensate=undo`, `undo(input, output)`), a settle
check (`settle=check`, `check(input)` -> done / not done / unknown) and a parameter that
receives an idempotency key (docs/tools.md, "Effects outside the workspace"). Sync functions run in a worker thread, async
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
from xclaw.tools.base import Tool, ToolContext, ToolResult, cap_result_text, idempotency_key
from xclaw.tools.effects import (
    Compensation,
    EffectClass,
    Evidence,
    Outcome,
    outcome_of,
)
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
    effect: str | None = None
    compensate: Any = None
    compensate_idempotent: bool = False
    settle: Any = None
    idempotency_key: str | None = None


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
    effect: str | None = None,
    compensate: Callable[[Any, Any], Any] | None = None,
    compensate_idempotent: bool = False,
    settle: Callable[[Any], Any] | None = None,
    idempotency_key: str | None = None,
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
    effect: str | None = None,
    compensate: Callable[[Any, Any], Any] | None = None,
    compensate_idempotent: bool = False,
    settle: Callable[[Any], Any] | None = None,
    idempotency_key: str | None = None,
) -> Any:
    """Marks a function as an xclaw tool and says how it may be retried and approved:
    read_only (no side effects: not asked, retried after a crash), idempotent (safe to run
    twice: retried after a crash), open_world (reaches outside this machine), destructive
    (always asked); and what its effects are (docs/tools.md): `effect` (read_only, workspace,
    compensable, irreversible), `compensate=undo` (`undo(input, output)` undoes a call on
    rollback: the tool is compensable; `compensate_idempotent`: undo may run twice),
    `settle=check` (`check(input)` says whether an interrupted call's effect is there: True /
    "done", False / "not_done", None / "unknown", or `{"done": …, "output": …}` with what the
    call returned), `idempotency_key="param"` (that parameter
    receives a key the same for every attempt of one call: the remote side deduplicates)."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(
            f,
            _MARK,
            Declared(
                name,
                description,
                read_only,
                idempotent,
                open_world,
                destructive,
                effect,
                compensate,
                compensate_idempotent,
                settle,
                idempotency_key,
            ),
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
        effect = _declared_effect(declared, ref, policy)
        read_only = declared.read_only or effect is EffectClass.READ_ONLY
        self._key = _key_parameter(fn, declared.idempotency_key, ref)
        self._model, self._single, self._context = _args_model(fn, ref, doc.args, skip=self._key)
        self.input_schema: dict[str, Any] = _clean_schema(self._model.model_json_schema())
        self._undo = _hook(declared.compensate, ref, "compensate", 2)
        self._undo_idempotent = declared.compensate_idempotent
        self._check = _hook(declared.settle, ref, "settle", 1)
        self._timeout = policy.effect_timeout_s
        self.traits = ToolTraits(
            source=f"Python tool {ref}",
            read_only=read_only,
            idempotent=declared.idempotent,
            destructive=declared.destructive and not read_only,
            open_world=declared.open_world,
            trusted=True,
            policy=policy,
            declared_effect=effect,
            compensable=self._undo is not None,
            settle_check=self._check is not None,
            idempotency_key=self._key is not None,
        )
        self.read_only = read_only
        self.retry_on_resume = self.traits.retry_on_resume
        self.effect = self.traits.effect
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
        if self._key is not None:
            kwargs[self._key] = idempotency_key(ctx.session_id, args)
        try:
            value = await _call(self.fn, **kwargs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the model reads what went wrong
            return ToolResult(f"{self.name} raised {type(e).__name__}: {e}", is_error=True)
        return ToolResult(cap_result_text(_as_text(value)))

    # --- effects (xclaw/tools/effects.py) ------------------------------------------------------
    async def find_outcome(self, args: dict[str, Any], ctx: ToolContext) -> Evidence | None:
        """The declared settle check, asked with the call's recorded input: its answer, or
        unknown when it raises, hangs past `effect_timeout_s` or answers something else."""
        check = self._check
        if check is None:
            return None
        who = _qualname(check)
        try:
            answer = await asyncio.wait_for(_call(check, dict(args)), self._timeout)
        except TimeoutError:
            return Evidence(Outcome.UNKNOWN, f"{who} did not answer within {self._timeout:g} s")
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - a failing check knows nothing
            return Evidence(Outcome.UNKNOWN, f"{who} raised {type(e).__name__}: {e}")
        output = None
        if isinstance(answer, Mapping) and "done" in answer:  # {"done": …, "output": …}
            answer, output = answer["done"], answer.get("output")
        outcome = outcome_of(answer)
        if outcome is None:
            return Evidence(
                Outcome.UNKNOWN,
                f"{who} answered {answer!r:.80}, not done / not_done / unknown (True/False/None)",
            )
        said = {Outcome.DONE: "done", Outcome.NOT_DONE: "not done", Outcome.UNKNOWN: "unknown"}
        detail = f"{who} says {said[outcome]}"
        result = None
        if outcome is Outcome.DONE:  # what the call returned, when the check can tell
            result = (
                f"[settled] {self.name} was interrupted by a crash; {detail}: it ran"
                if output is None
                else cap_result_text(_as_text(output))
            )
        return Evidence(outcome, detail, result)

    def compensation(self, args: dict[str, Any], output: Any) -> Compensation | None:
        if self._undo is None:
            return None
        return Compensation(
            _qualname(self._undo), {"input": args, "output": output}, self._undo_idempotent
        )

    async def compensate(
        self, comp: Compensation, args: dict[str, Any], output: Any, ctx: ToolContext
    ) -> ToolResult:
        """`undo(input, output)`; an exception, or no answer within `effect_timeout_s`, is a
        failed compensation (a sync one left running in its thread cannot be stopped)."""
        undo = self._undo
        if undo is None:
            return ToolResult(f"{self.name} declares no compensation", is_error=True)
        who = _qualname(undo)
        try:
            value = await asyncio.wait_for(_call(undo, dict(args), output), self._timeout)
        except TimeoutError:
            return ToolResult(f"{who} did not finish within {self._timeout:g} s", is_error=True)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the person reads what went wrong
            return ToolResult(f"{who} raised {type(e).__name__}: {e}", is_error=True)
        return ToolResult(cap_result_text(_as_text(value)))


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Sync functions in a worker thread, async ones on the loop."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _declared_effect(declared: Declared, ref: str, policy: ToolPolicy) -> EffectClass | None:
    """The `effect=` a function declares, checked against its other declarations."""
    where = f"xclaw.yaml: tools: {ref!r}"
    try:
        effect = None if declared.effect is None else EffectClass(declared.effect)
    except ValueError:
        words = ", ".join(e.value for e in EffectClass)
        raise ConfigError(f"{where}: effect={declared.effect!r} is not one of {words}") from None
    undo = declared.compensate is not None
    if undo and effect not in (None, EffectClass.COMPENSABLE):
        raise ConfigError(f"{where}: compensate= makes it compensable, not {effect}")
    if undo and declared.read_only:
        raise ConfigError(f"{where}: a read-only tool has nothing to compensate")
    wanted = EffectClass(policy.effect) if policy.effect is not None else effect
    if wanted is EffectClass.COMPENSABLE and not undo:
        raise ConfigError(
            f"{where}: effect compensable needs a compensation: @xclaw.tool(compensate=undo)"
        )
    if policy.compensate is not None or policy.settle is not None:
        raise ConfigError(
            f"xclaw.yaml: tool_policies: {ref!r}: compensate and settle policies are for MCP "
            "tools; a Python tool declares them with @xclaw.tool(compensate=…, settle=…)"
        )
    return effect


def _hook(fn: Any, ref: str, what: str, arity: int) -> Callable[..., Any] | None:
    """A declared compensation or settle check: a function taking `arity` arguments."""
    if fn is None:
        return None
    where = f"xclaw.yaml: tools: {ref!r}: {what}="
    if not callable(fn):
        raise ConfigError(f"{where}{fn!r} is not a function")
    try:
        inspect.signature(fn).bind(*range(arity))
    except TypeError as e:
        names = "(input, output)" if arity == 2 else "(input)"
        raise ConfigError(f"{where}{_qualname(fn)} cannot be called as {names}: {e}") from None
    except ValueError:
        pass  # no signature to read (a builtin): called as declared
    return fn  # type: ignore[no-any-return]


def _key_parameter(fn: Callable[..., Any], name: str | None, ref: str) -> str | None:
    if name is None:
        return None
    if name not in inspect.signature(fn).parameters:
        raise ConfigError(
            f"xclaw.yaml: tools: {ref!r}: idempotency_key={name!r} names no parameter of "
            f"{fn.__name__}"
        )
    return name


def _problems(name: str, e: ValidationError) -> str:
    problems = "; ".join(
        f"'{'.'.join(str(p) for p in err['loc']) or 'input'}': {err['msg']}" for err in e.errors()
    )
    return f"{name}: bad arguments: {problems}"


def _args_model(
    fn: Callable[..., Any],
    ref: str,
    described: Mapping[str, str] | None = None,
    *,
    skip: str | None = None,
) -> tuple[type[BaseModel], str | None, str | None]:
    """A pydantic model of the arguments, the parameter standing for the whole input (a
    single pydantic model parameter: its fields are the tool's arguments), and the parameter
    that takes the call's ToolContext (not an argument the model gives). `described`: the
    docstring's words for each parameter (an `Annotated` description wins). `skip`: a
    parameter xclaw fills (the idempotency key), not the model's."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise ConfigError(f"tools: {ref}: cannot read its type hints: {e}") from e
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != skip
    ]
    context = next((p.name for p in params if _is_context(hints.get(p.name))), None)
    params = [p for p in params if p.name != context]
    if len(params) == 1:
        # A bare model stands for the whole input; one described (`Annotated[Model,
        # Field(description=...)]`) is an argument of its own, described.
        only = hints.get(params[0].name)
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
