"""[agents] Structured output (docs/agents.md, "Structured output"): an agent whose `output_type` is
a pydantic model or a JSON schema ends each turn with a value of it, validated.

The loop asks for it the way the model can give it: the provider's own structured output
where it has one (OpenAI's `response_format`), a final-answer tool otherwise. Either way the
answer is checked here; what fails is said to the model, which tries again within the
turn's iterations, and the turn fails with the errors when they run out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from xclaw.errors import ConfigError

# The final-answer tool a model without structured output is given.
FINAL_ANSWER = "final_answer"
_MAX_ERRORS = 10
# One error as the model and the record get it: a validator may quote the value, and the
# value is the model's (hostile, maybe huge).
_MAX_ERROR_CHARS = 300


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"


class OutputErrors(ValueError):
    """What is wrong with an answer, one line each (for the model and the record)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """What a turn's final answer must be: a JSON object of `schema` (named `name`), checked
    by `check` (the value as JSON, or OutputErrors), read into the program's type by `load`."""

    name: str
    schema: dict[str, Any]
    check: Callable[[Any], Any]
    load: Callable[[Any], Any]
    ref: str = ""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "schema": self.schema}

    def parse(self, text: str) -> Any:
        """An answer given as text (native structured output, or a model that answered in
        JSON instead of calling the tool): its value, checked; OutputErrors otherwise."""
        stripped = text.strip()
        if stripped.startswith("```"):  # a fenced block: what is inside it
            stripped = stripped.strip("`")
            stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        try:
            value = json.loads(stripped)
        except ValueError:
            raise OutputErrors(
                [f"the final answer must be a JSON object of the {self.name} schema, not text"]
            ) from None
        return self.check(value)

    def feedback(self, errors: list[str], *, tool: bool) -> str:
        """What the model is told when its answer did not validate: the final-answer call's
        result, or (an answer in text) a message of the runtime's after it."""
        listed = "; ".join(errors[:_MAX_ERRORS])
        if tool:
            return (
                f"the final answer did not validate: {listed}; call {FINAL_ANSWER} again "
                "with a corrected value"
            )
        return (
            f"[System: the final answer did not validate: {listed}. Answer again with one "
            f"JSON object of the {self.name} schema.]"
        )


def output_spec(output_type: Any, where: str) -> OutputSpec:
    """An OutputSpec of a pydantic model class, or of a JSON schema (a mapping, type object);
    `module:Class` names either by import path."""
    if isinstance(output_type, str):
        from xclaw.agents.refs import import_ref

        output_type = import_ref(output_type, f"{where}: output_type", what="class")
    from pydantic import BaseModel

    if isinstance(output_type, type) and issubclass(output_type, BaseModel):
        return _of_model(output_type)
    if isinstance(output_type, Mapping):
        return _of_schema(dict(output_type), where)
    raise ConfigError(
        f"{where}: output_type must be a pydantic model class or a JSON schema (a mapping), "
        f"got {output_type!r}"
    )


def _of_model(model: type[Any]) -> OutputSpec:
    from pydantic import ValidationError

    schema = model.model_json_schema()
    if schema.get("type") != "object":
        raise ConfigError(f"output_type {model.__name__}: its schema is not an object")

    def check(value: Any) -> Any:
        try:
            return model.model_validate(value).model_dump(mode="json")
        except ValidationError as e:
            raise OutputErrors(
                [
                    _short(f"'{'.'.join(str(p) for p in err['loc']) or 'answer'}': {err['msg']}")
                    for err in e.errors()[:_MAX_ERRORS]
                ]
            ) from None

    return OutputSpec(
        name=model.__name__,
        schema=schema,
        check=check,
        load=model.model_validate,
        ref=f"{model.__module__}:{model.__qualname__}",
    )


def _of_schema(schema: dict[str, Any], where: str) -> OutputSpec:
    import jsonschema

    if schema.get("type") != "object":
        raise ConfigError(f'{where}: output_type: a JSON schema of "type": "object" is needed')
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise ConfigError(f"{where}: output_type: not a valid JSON schema: {e.message}") from None
    validator = validator_class(schema)

    def check(value: Any) -> Any:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            raise OutputErrors(
                [
                    _short(f"'{'.'.join(str(p) for p in e.path) or 'answer'}': {e.message}")
                    for e in errors[:_MAX_ERRORS]
                ]
            )
        return value

    name = str(schema.get("title") or "Output")
    return OutputSpec(name=name, schema=schema, check=check, load=lambda v: v)
