"""docs/configuration.md against the settings models: every key xclaw.yaml may hold and every
variable a setting is read from, with the default as the page must state it, read from the
section models themselves, so that the page cannot list a key the code does not read, miss
one it does, or state another default."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from xclaw.config.section import Default, Env, NotInYaml
from xclaw.config.settings import CONFIG_VARIABLE, Settings
from xclaw.llm.builtin_providers import BUILTIN_PROVIDERS
from xclaw.llm.provider import ProviderEntry
from xclaw.llm.registry import MODEL_VARIABLE

# How the page names one entry of a mapping section.
PLACEHOLDERS = {
    "mcp_servers": "<name>",
    "prices": "<model>",
    "tool_policies": "<tool>",
    "agents": "<name>",
}


def _bare(annotation: Any) -> Any:
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) in (Union, types.UnionType):
            rest = [a for a in get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def _model(annotation: Any) -> type[BaseModel] | None:
    bare = _bare(annotation)
    return bare if isinstance(bare, type) and issubclass(bare, BaseModel) else None


def default_text(info: FieldInfo) -> str:
    said = next((m.text for m in info.metadata if isinstance(m, Default)), None)
    if said is not None:
        return said
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if value is None or value in ((), {}):
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value:g}"
    if isinstance(value, (str, Path)):
        return f"`{value}`"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value)
    raise AssertionError(f"no way to state the default {value!r}: give the field a Default")


def documented_keys(model: type[BaseModel] = Settings, prefix: str = "") -> dict[str, str]:
    """`key` (dotted, as the page writes it) -> its default as the page states it."""
    out: dict[str, str] = {}
    for name, info in model.model_fields.items():
        if any(isinstance(m, NotInYaml) for m in info.metadata):
            continue
        key = f"{prefix}{name}"
        bare = _bare(info.annotation)
        section = _model(info.annotation)
        if name == "providers" and model is Settings:
            out[key] = default_text(info)
            for provider in BUILTIN_PROVIDERS:  # each kind's entry keys (the union of them)
                out.update(documented_keys(provider.entry, f"{key}[]."))
        elif section is not None and section is not ProviderEntry:
            out.update(documented_keys(section, f"{key}."))
        elif get_origin(bare) is dict and _model(get_args(bare)[1]) is not None:
            out[key] = default_text(info)
            entry = _model(get_args(bare)[1])
            assert entry is not None
            out.update(documented_keys(entry, f"{key}.{PLACEHOLDERS[name]}."))
        else:
            out[key] = default_text(info)
    return out


def _variables(model: type[BaseModel]) -> set[str]:
    found: set[str] = set()
    for info in model.model_fields.values():
        for m in info.metadata:
            if isinstance(m, Env):
                found.update(m.names)
        section = _model(info.annotation)
        if section is not None:
            found |= _variables(section)
    return found


def documented_variables() -> set[str]:
    """Every variable a setting is read from."""
    found = _variables(Settings) | {CONFIG_VARIABLE, MODEL_VARIABLE}
    for provider in BUILTIN_PROVIDERS:
        found.update(provider.variables())
    return found


PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def _table(heading: str) -> list[list[str]]:
    """The rows of the first table under `heading`, as cells."""
    text = PAGE.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_every_key_is_on_the_page_with_its_default_and_every_key_there_exists() -> None:
    page = {key.strip("`"): default for key, default, *_ in _table("xclaw.yaml")}
    declared = documented_keys()
    assert sorted(set(declared) - set(page)) == [], "declared but not on the page"
    assert sorted(set(page) - set(declared)) == [], "on the page but declared nowhere"
    wrong = {k: (page[k], v) for k, v in declared.items() if page[k] != v}
    assert wrong == {}, "(on the page, declared) defaults differ"


def test_every_variable_is_on_the_page_and_every_variable_there_is_read() -> None:
    named = {
        v
        for row in _table("Environment variables")
        for v in re.findall(r"`([A-Z][A-Z0-9_]+)`", row[0])
    }
    assert sorted(documented_variables() - named) == [], "read but not on the page"
    assert sorted(named - documented_variables()) == [], "on the page but read by nothing"


def test_the_check_sees_a_key_missing_from_the_page() -> None:
    """Were the walk to miss the sections, the tests above would pass vacuously."""
    declared = documented_keys()
    assert {"sandbox.output_cap", "approval.deny", "providers[].thinking.budget_tokens"} <= set(
        declared
    )
    assert "mcp_servers.<name>.command" in declared and "prices.<model>.input" in declared
    assert "OTEL_SDK_DISABLED" in documented_variables()
