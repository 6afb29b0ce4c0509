"""[config] A refused setting, said in one sentence: the key (or the variable) it came from, what it
must be, and what it was — `xclaw.yaml: max_iterations must be a whole number >= 1, got
'ten'`, `unknown key sandbox.shell_timout_s; did you mean 'shell_timeout_s'?`.

pydantic checks the sections (xclaw/config/section.py); this turns its first complaint into that
sentence, reading what the sentence needs (the keys a section knows, the `Wording` of a value's
type, its bounds) from the section models themselves.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from xclaw.config.section import NotInYaml, Wording, WrongType

Loc = tuple[str | int, ...]


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`; did you mean 'x'?` or nothing."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def yaml_keys(model: type[BaseModel]) -> list[str]:
    """The keys xclaw.yaml may write in this section."""
    return [
        name
        for name, info in model.model_fields.items()
        if not any(isinstance(m, NotInYaml) for m in info.metadata)
    ]


def unknown_key(key: str, known: Sequence[str], path: str, source: str) -> str:
    """`path` names the key in messages (empty at the top level, where the key is quoted)."""
    names = sorted(known)
    if not path:
        hint = did_you_mean(key, names) or f" (known keys: {', '.join(names)})"
        return f"{source}: unknown key {key!r}{hint}"
    hint = did_you_mean(key, names) or f" (known: {', '.join(names)})"
    return f"{source}: unknown key {path}{hint}"


def explain(
    error: ValidationError,
    model: type[BaseModel],
    *,
    source: str,
    origins: Mapping[Loc, str] | None = None,
    prefix: str = "",
) -> str:
    """The sentence for the first thing `error` found in `model` (an unknown key before a bad
    value: a typo is the likelier cause). `source` names the file, `origins` the variable a
    value came from (by its place in the model), `prefix` where the model sits in the file."""
    found = error.errors(include_url=False)
    first = next((e for e in found if e["type"] == "extra_forbidden"), found[0])
    loc: Loc = tuple(part for part in first["loc"] if part != "[key]")
    value = first.get("input")
    path = _path(prefix, loc)
    variable = next((v for at, v in (origins or {}).items() if loc[: len(at)] == at), None)
    where = variable or f"{source}: {path}"
    kind = first["type"]
    if kind == "extra_forbidden":
        parent = _walk(model, loc[:-1])
        known = yaml_keys(parent.model) if parent is not None and parent.model else []
        return unknown_key(str(loc[-1]), known, path if prefix or len(loc) > 1 else "", source)
    reason = first.get("ctx", {}).get("error")
    if kind == "value_error" and not isinstance(reason, WrongType):
        # A validator's own explanation, which names what it found.
        said = str(reason or first["msg"])
        if first["loc"][-1:] == ("[key]",):
            return f"{where}: {said}"
        return f"{where} {said}"
    if kind == "missing":
        return f"{where} is required"
    place = _walk(model, loc)
    if place is None:
        return f"{where}: {_lower(first['msg'])}"
    if place.in_list is not None:  # an item of a list: the list's wording
        where = variable or f"{source}: {_path(prefix, loc[:-1])}"
        return f"{where} must be {place.in_list.text}, got {value!r} in it"
    if get_origin(place.bare) is Literal:
        choices = ", ".join(str(a) for a in get_args(place.bare))
        return f"{where} {value!r}: expected {choices}"
    wording = place.wording
    if wording is not None:
        bound = _bounds(place.declared + place.inner) if wording.bounds else ""
        return f"{where} must be {wording.text}{bound}, got {value!r}"
    if place.is_mapping:
        return f"{where} must be a mapping, got {value!r}"
    return f"{where}: {_lower(first['msg'])}, got {value!r}"


def _path(prefix: str, loc: Loc) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """The type under Annotated and Optional, and the metadata met on the way."""
    meta: list[Any] = []
    while True:
        if get_origin(annotation) is Annotated:
            annotation, *more = get_args(annotation)
            meta += more
        elif get_origin(annotation) in (Union, types.UnionType):
            rest = [a for a in get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation, meta
            annotation = rest[0]
        else:
            return annotation, meta


@dataclass(frozen=True, slots=True)
class _Place:
    """A place in the settings: its type, the metadata its field declares and its type's,
    and the wording of the list it is an item of (if it is one)."""

    bare: Any
    declared: list[Any]
    inner: list[Any]
    in_list: Wording | None

    @property
    def wording(self) -> Wording | None:
        """The field's own wording over its type's."""
        return _wording(self.declared) or _wording(self.inner)

    @property
    def model(self) -> type[BaseModel] | None:
        bare = self.bare
        return bare if isinstance(bare, type) and issubclass(bare, BaseModel) else None

    @property
    def is_mapping(self) -> bool:
        return self.model is not None or get_origin(self.bare) in (dict, Mapping)


def _walk(model: type[BaseModel], loc: Loc) -> _Place | None:
    """What the settings declare at `loc` (None: nothing, e.g. past an unknown key)."""
    annotation: Any = model
    declared: list[Any] = []
    in_list: Wording | None = None
    for part in loc:
        bare, inner = _unwrap(annotation)
        origin = get_origin(bare)
        in_list = None
        if isinstance(bare, type) and issubclass(bare, BaseModel) and isinstance(part, str):
            info: FieldInfo | None = bare.model_fields.get(part)
            if info is None:
                return None
            annotation, declared = info.annotation, list(info.metadata)
        elif origin in (dict, Mapping):
            annotation, declared = get_args(bare)[1], []
        elif origin in (tuple, list) and isinstance(part, int):
            in_list = _wording(declared) or _wording(inner)
            annotation, declared = get_args(bare)[0], []
        else:
            return None
    bare, inner = _unwrap(annotation)
    return _Place(bare, declared, inner, in_list)


def _wording(meta: list[Any]) -> Wording | None:
    wordings = [m for m in meta if isinstance(m, Wording)]
    return wordings[-1] if wordings else None


def _bounds(meta: list[Any]) -> str:
    flat: list[Any] = []
    for m in meta:  # a Field(...) inside Annotated keeps its constraints in its own metadata
        flat += list(m.metadata) if isinstance(m, FieldInfo) else [m]
    for m in flat:
        if isinstance(m, annotated_types.Gt):
            return f" > {m.gt:g}"
        if isinstance(m, annotated_types.Ge):
            return f" >= {m.ge:g}"
    return ""
