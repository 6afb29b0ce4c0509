"""What a call cost, estimated from its tokens: the prices each provider declares (dollars
per million tokens, xclaw/llm/builtin_providers.py and provider packages) that xclaw.yaml's
`prices:` extends or overrides. A model not in the table shows tokens only, never a guess.

The table in force is process-wide (`configure`, called where settings are loaded; the
providers' own table until then), so that every view of a step — the live trace, /steps,
`xclaw sessions`, `xclaw export` — prices it the same way, at display time: changing a price
re-prices old steps too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated

from pydantic import Field

from xclaw.messages import Usage
from xclaw.section import Default, Number, Section

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


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]) -> None:
        self.prices = dict(prices)
        # name -> its price (or None), found once: every step frame of an llm_call prices it,
        # and the prefix scan over the table was measurable per step on a busy gateway.
        self._found: dict[str, Price | None] = {}

    @classmethod
    def with_overrides(cls, overrides: Mapping[str, Price] | None) -> PriceTable:
        """Every provider's prices, then xclaw.yaml's. A model name is without its
        `<kind>:`; a dated name (claude-sonnet-4-5-20250929) takes the price of the longest
        name it starts with."""
        from xclaw.llm.registry import provider_prices

        table = dict(provider_prices())
        table.update({_bare(model): price for model, price in (overrides or {}).items()})
        return cls(table)

    def price_of(self, model: str) -> Price | None:
        try:
            return self._found[model]
        except KeyError:
            pass
        name = _bare(model)
        if name in self.prices:
            price: Price | None = self.prices[name]
        else:
            matches = [k for k in self.prices if name.startswith(k)]
            price = self.prices[max(matches, key=len)] if matches else None
        if len(self._found) < 10_000:  # model names come from providers: keep it bounded
            self._found[model] = price
        return price

    def cost(self, model: str, usage: Usage) -> float | None:
        price = self.price_of(model)
        return None if price is None else price.cost(usage)


def _bare(model: str) -> str:
    """`anthropic:claude-x` -> `claude-x`; a fallback chain's name -> its first model."""
    first = model.split(",")[0].strip()
    return first.partition(":")[2] if ":" in first else first


_active: PriceTable | None = None


def configure(overrides: Mapping[str, Price] | None) -> PriceTable:
    """Make the providers' prices plus xclaw.yaml's `prices:` the table every view uses."""
    global _active
    _active = PriceTable.with_overrides(overrides)
    return _active


def active() -> PriceTable:
    """The table in force (the providers' own until `configure`; built on first use, not at
    import: the providers' packages are found then)."""
    return _active if _active is not None else configure(None)


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
