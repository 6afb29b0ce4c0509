"""[llm] What a call cost, estimated from its tokens: the prices each provider declares (dollars
per million tokens, xclaw/llm/builtin_providers.py and provider packages) that xclaw.yaml's
`prices:` extends or overrides. A model not in the table shows tokens only, never a guess.

A provider's prices are its own API's: they apply to a call answered there — no base URL
recorded (the SDK's default), or one of the provider's `hosts`. A model served anywhere else
(a local llama.cpp, Ollama or vLLM named `gpt-4o`, a proxy) is priced only by xclaw.yaml,
whose prices apply wherever the model is served.

The table in force is process-wide (`configure`, called where settings are loaded; the
providers' own table until then), so that every view of a step — the live trace, /steps,
`xclaw sessions`, `xclaw export` — prices it the same way, at display time: changing a price
re-prices old steps too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field

from xclaw.config.section import Default, Number, Section
from xclaw.llm.messages import Usage

Rate = Annotated[Number, Field(ge=0)]


class Price(Section):
    """Dollars per million tokens (`prices: {<model>: {input, output, ...}}` in xclaw.yaml).
    Cache reads/writes default to the input price when a provider has no separate rate."""

    input: Rate
    output: Rate
    cache_read: Annotated[Rate | None, Default("the input price")] = None
    cache_write: Annotated[Rate | None, Default("the input price")] = None

    def cost(self, usage: Usage) -> float:
        """Uncached input at `input`, cache reads and writes at their own rates, output (which
        includes reasoning) at `output`."""
        read = usage.cache_read_tokens
        write = usage.cache_write_tokens
        plain = max(0, usage.prompt_tokens - read - write)
        return (
            plain * self.input
            + read * (self.cache_read if self.cache_read is not None else self.input)
            + write * (self.cache_write if self.cache_write is not None else self.input)
            + usage.completion_tokens * self.output
        ) / 1_000_000


def own_api(endpoint: str, hosts: Collection[str]) -> bool:
    """True for a call answered by the provider's own API: no base URL recorded (the SDK's
    default) or one of its `hosts`."""
    return not endpoint or (urlsplit(endpoint).hostname or "") in hosts


class PriceTable:
    def __init__(
        self, prices: Mapping[str, Price], hosts: Mapping[str, Collection[str]] | None = None
    ) -> None:
        self.prices = dict(prices)
        # Model name -> the hosts where its price holds (a provider's own API); a name not
        # here (xclaw.yaml's) is priced wherever it is served.
        self.hosts = {name: frozenset(h) for name, h in (hosts or {}).items()}
        # (name, host) -> its price (or None), found once: every step frame of an llm_call
        # prices it, and the prefix scan over the table was measurable per step on a busy
        # gateway.
        self._found: dict[tuple[str, str | None], Price | None] = {}

    @classmethod
    def with_overrides(cls, overrides: Mapping[str, Price] | None) -> PriceTable:
        """Every provider's prices (for its own API only), then xclaw.yaml's (everywhere). A
        model name is without its `<kind>:`; a dated name (claude-sonnet-4-5-20250929) takes
        the price of the longest name it starts with."""
        from xclaw.llm.registry import price_hosts, provider_prices

        table: dict[str, Price] = provider_prices()
        hosts: dict[str, Collection[str]] = dict(price_hosts())
        for model, price in (overrides or {}).items():
            table[_bare(model)] = price
            hosts.pop(_bare(model), None)
        return cls(table, hosts)

    def price_of(self, model: str, endpoint: str = "") -> Price | None:
        """The price of `model` as answered by `endpoint` (the recorded base URL; "" for the
        provider's own API)."""
        host = (urlsplit(endpoint).hostname or "") if endpoint else None
        key = (model, host)
        try:
            return self._found[key]
        except KeyError:
            pass
        table = self.prices
        if host is not None:  # a configured server: a provider's price only at its own hosts
            table = {
                name: price
                for name, price in self.prices.items()
                if name not in self.hosts or host in self.hosts[name]
            }
        price = _lookup(table, _bare(model))
        if len(self._found) < 10_000:  # model names come from providers: keep it bounded
            self._found[key] = price
        return price

    def cost(self, model: str, usage: Usage, *, endpoint: str = "") -> float | None:
        price = self.price_of(model, endpoint)
        return None if price is None else price.cost(usage)


def _lookup(table: Mapping[str, Price], name: str) -> Price | None:
    """The exact name's price, else the longest key the name starts with (a dated name)."""
    if name in table:
        return table[name]
    matches = [k for k in table if name.startswith(k)]
    return table[max(matches, key=len)] if matches else None


def _bare(model: str) -> str:
    """`anthropic:claude-x` -> `claude-x`; a fallback chain's name -> its first model."""
    first = model.split(",")[0].strip()
    return first.partition(":")[2] if ":" in first else first


def format_cost(dollars: float | None) -> str:
    """$0.0042, $1.23; empty when the model has no price."""
    if dollars is None:
        return ""
    return f"${dollars:.4f}" if dollars < 1 else f"${dollars:.2f}"


def total(usages: Iterable[Usage]) -> Usage:
    out = Usage()
    for u in usages:
        out = out + u
    return out
