"""[tools] Checks a tool call's arguments against the tool's own JSON schema.

The schema the model is shown is the one the input is checked against, so they cannot drift.
Only the small subset our tools use is understood: an object with `properties` of type string,
integer, number, boolean; `required`; `minimum`. An error message names the tool and everything
it needs, because the model reads it and retries.
"""

from __future__ import annotations

from typing import Any

from xclaw.errors import ToolError

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches(value: Any, json_type: str) -> bool:
    if json_type in ("integer", "number") and isinstance(value, bool):
        return False  # bool is an int subclass in Python, never in JSON
    if json_type == "integer" and isinstance(value, float) and value.is_integer():
        return True  # some models send 10.0 for 10
    return isinstance(value, _PY_TYPES.get(json_type, (object,)))


def needs(tool_name: str, schema: dict[str, Any]) -> str:
    """`write_file needs 'path' (string) and 'content' (string)`."""
    props: dict[str, Any] = schema.get("properties", {})
    required = [k for k in schema.get("required", []) if k in props]
    parts = [f"'{k}' ({props[k].get('type', 'any')})" for k in required]
    optional = [f"'{k}'" for k in props if k not in required]
    text = f"{tool_name} needs " + (" and ".join(parts) if parts else "no arguments")
    if optional:
        text += "; optional: " + ", ".join(optional)
    return text


def check_args(tool_name: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """The arguments with absent optionals dropped (null counts as absent), or ToolError."""
    if not isinstance(args, dict):
        raise ToolError(f"{needs(tool_name, schema)}; got {_type_name(args)} instead of an object")
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    problems: list[str] = []
    clean: dict[str, Any] = {}
    for key in args:
        if key not in props:
            problems.append(f"unknown argument {key!r}")
    for key, spec in props.items():
        value = args.get(key)
        if value is None:
            if key in required:
                problems.append(f"'{key}' is missing")
            continue
        json_type = spec.get("type")
        if json_type and not _matches(value, json_type):
            problems.append(f"'{key}' must be {json_type}, got {_type_name(value)}")
            continue
        if json_type == "integer":
            value = int(value)
        minimum = spec.get("minimum")
        if minimum is not None and value < minimum:
            problems.append(f"'{key}' must be at least {minimum}, got {value}")
            continue
        clean[key] = value
    if problems:
        raise ToolError(f"{needs(tool_name, schema)}; " + "; ".join(problems))
    return clean
