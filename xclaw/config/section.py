"""[config] What every settings section is made of (docs/configuration.md).

Each package declares the part of xclaw.yaml it reads as a `Section`: a pydantic model that
refuses a key it does not declare (a typo is an error, never ignored), holds values that do
not change once read, and says on its fields where else a value may come from (`Env`), why
xclaw.yaml may not set it (`NotInYaml`) and how the docs state a default the value alone
does not say (`Default`). xclaw/config/settings.py composes the sections into `Settings`, reads them,
and words every refused value as one sentence (xclaw/config/errors.py), using the `Wording`
the value types below carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AllowInfNan, BaseModel, BeforeValidator, ConfigDict, StringConstraints


class WrongType(ValueError):
    """A value that is not of its field's type at all: worded by the type's Wording, as
    pydantic's own type errors are (any other ValueError is an explanation, quoted as is)."""


class Section(BaseModel):
    """A part of xclaw.yaml: unknown keys refused, values frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True, init=False)
class Env:
    """The value comes from the first of these variables that is set (the environment, then
    `.env`), over xclaw.yaml."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", names)


@dataclass(frozen=True, slots=True)
class NotInYaml:
    """A setting xclaw.yaml does not hold; `how` says where it comes from instead."""

    how: str


@dataclass(frozen=True, slots=True)
class Default:
    """The default as docs/configuration.md states it, where the value alone does not say it
    (a default computed from another setting, or one too long for the table)."""

    text: str


@dataclass(frozen=True, slots=True)
class Wording:
    """What a value of this type must be, as an error says it: `must be <text> >= 1, got …`
    (`bounds`: followed by the field's limits)."""

    text: str
    bounds: bool = True


def _not_a_flag(value: Any) -> Any:
    """`true` is no number, though Python counts it as 1."""
    if isinstance(value, bool):
        raise WrongType("a flag is not a number")
    return value


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _flag(value: Any) -> Any:
    """true or false; from a variable, its usual spellings."""
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    if not isinstance(value, bool):
        raise WrongType("not true or false")
    return value


# The value types of the sections; each bad value is worded by its type's Wording.
Whole = Annotated[int, BeforeValidator(_not_a_flag), Wording("a whole number")]
Number = Annotated[
    float, BeforeValidator(_not_a_flag), AllowInfNan(allow_inf_nan=False), Wording("a number")
]
Flag = Annotated[bool, BeforeValidator(_flag), Wording("true or false", bounds=False)]
Text = Annotated[str, StringConstraints(pattern=r"\S"), Wording("a non-empty string", bounds=False)]
Strings = Annotated[tuple[str, ...], Wording("a list of strings", bounds=False)]
