"""[llm] Where providers are found: the built-in ones, then every installed package that declares
one in the `xclaw.providers` entry point group (as simonw/llm finds its plugins), the entry point's
name being the provider's kind:

    [project.entry-points."xclaw.providers"]
    echo = "xclaw_echo:EchoProvider"

A package is imported only when its kind is asked for (or every provider is listed), never at
import time; one that cannot be loaded is a ConfigError naming it. And from the settings and
the environment to the provider chain (`chain`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from xclaw.errors import ConfigError
from xclaw.llm.builtin_providers import BUILTIN_PROVIDERS
from xclaw.llm.prices import Price
from xclaw.llm.provider import Provider, ProviderEntry

GROUP = "xclaw.providers"
# The provider chain, comma-separated, over xclaw.yaml's `providers:`.
MODEL_VARIABLE = "XCLAW_MODEL"

_BUILTIN: dict[str, Provider[Any]] = {p.kind: p for p in BUILTIN_PROVIDERS}
# Kinds a program added for itself (the Python API's `xclaw.open(provider_kinds=[...])`).
_REGISTERED: dict[str, Provider[Any]] = {}


def register(provider: Provider[Any]) -> None:
    """Add a kind of model for this process, as a provider package's entry point adds one
    for every program: its specs (`<kind>:<model>`) work in XCLAW_MODEL, xclaw.yaml and the
    Python API. A built-in kind, or one a package claims, is refused."""
    if not isinstance(provider, Provider):
        raise ConfigError(f"{provider!r} is not an xclaw.llm.provider.Provider")
    kind = provider.kind
    if kind in _BUILTIN or kind in _installed():
        raise ConfigError(f"provider kind {kind!r} exists already (built in or installed)")
    _REGISTERED[kind] = provider


@functools.cache
def _installed() -> dict[str, EntryPoint]:
    """The entry points of provider packages, by kind (read once per process)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


@functools.cache
def _load(kind: str) -> Provider[Any]:
    ep = _installed()[kind]
    where = f"provider package {ep.dist.name if ep.dist else ep.value!r} ({GROUP}: {kind})"
    try:
        found = ep.load()
    except Exception as e:
        raise ConfigError(f"{where} could not be loaded: {type(e).__name__}: {e}") from e
    provider = found() if isinstance(found, type) and issubclass(found, Provider) else found
    if not isinstance(provider, Provider):
        raise ConfigError(
            f"{where} names {ep.value}, which is not an xclaw.llm.provider.Provider "
            "(docs/llm-providers.md)"
        )
    if provider.kind != kind:
        raise ConfigError(f"{where}: its provider's kind is {provider.kind!r}, not {kind!r}")
    return provider


def provider(kind: str) -> Provider[Any] | None:
    """The provider of `kind`, built in or installed; None when there is none."""
    if kind in _BUILTIN:
        return _BUILTIN[kind]
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    return _load(kind) if kind in _installed() else None


def providers() -> list[Provider[Any]]:
    """Every provider: the built-in ones first, then the installed ones by kind. A package
    that would replace a built-in kind is refused."""
    out = list(_BUILTIN.values()) + list(_REGISTERED.values())
    for kind in sorted(_installed()):
        if kind in _BUILTIN:
            ep = _installed()[kind]
            raise ConfigError(
                f"provider package {ep.dist.name if ep.dist else ep.value!r} declares the kind "
                f"{kind!r}, which is built in: give it another name in {GROUP}"
            )
        out.append(_load(kind))
    return out


def provider_prices() -> dict[str, Price]:
    """Every provider's prices, by model name."""
    table: dict[str, Price] = {}
    for p in providers():
        table.update(p.prices)
    return table


def price_hosts() -> dict[str, frozenset[str]]:
    """The hosts where each provider price holds (its provider's own API, besides the SDK's
    default URL), by model name as in `provider_prices`."""
    hosts: dict[str, frozenset[str]] = {}
    for p in providers():
        hosts.update(dict.fromkeys(p.prices, p.hosts))
    return hosts


def _unknown_kind(spec: str) -> ConfigError:
    known = [p.form() for p in (*_BUILTIN.values(), *_REGISTERED.values())] + sorted(
        f"{k}:<model>" for k in _installed()
    )
    return ConfigError(
        f"model {spec!r}: expected {', '.join(known[:-1])} or {known[-1]} (a provider package "
        "adds its own kind: docs/llm-providers.md)"
    )


def entry(
    spec: str, options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> ProviderEntry:
    """One link of the chain: `spec` (`<kind>:<model>`) with its xclaw.yaml options and the
    environment's keys. A bad key or value is pydantic's ValidationError (the settings reader
    words it); an unknown kind is a ConfigError."""
    kind, sep, name = spec.partition(":")
    found = provider(kind) if sep and name else None
    if found is None:
        raise _unknown_kind(spec)
    configured: ProviderEntry = found.configure({**(options or {}), "model": spec}, env or {})
    return configured


def option_owners(key: str) -> list[str]:
    """The kinds whose entries take `key` (to say where a key refused by another belongs)."""
    return [
        p.kind
        for p in _BUILTIN.values()
        if key in p.entry.model_fields and key not in ProviderEntry.model_fields
    ]


def detected(env: Mapping[str, str]) -> list[str]:
    """With no chain configured: the spec of each provider the environment switches on (a key
    variable set), built-in ones first."""
    return [spec for p in providers() if (spec := p.detect(env)) is not None]


def how_to_configure() -> str:
    """What the error says when no provider is configured."""
    hints = [p.setup_hint for p in providers() if p.setup_hint and p.key_variables]
    offline = [p.setup_hint for p in providers() if p.setup_hint and not p.key_variables]
    return (
        "no LLM provider is configured. Set "
        + " or ".join(hints)
        + " in the environment or in .env, or set "
        + ", or ".join(offline)
        + "."
    )
