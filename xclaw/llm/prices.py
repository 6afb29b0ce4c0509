"""What a call cost, estimated from its tokens: a built-in price table (dollars per million
tokens, list prices when this was written — check your provider's page) that xclaw.yaml's
`prices:` extends or overrides. A model not in the table shows tokens only, never a guess.

The built-in prices are the vendors' own: they apply to a call answered by the vendor's API
(no base URL recorded, or one of VENDOR_HOSTS). A model served anywhere else — a local
llama.cpp, Ollama or vLLM named `gpt-4o`, a proxy — is priced only by xclaw.yaml, whose
prices apply wherever the model is served.

The table in force is process-wide (`configure`, called where settings are loaded), so that
every view of a step — the live trace, /steps, `xclaw sessions`, `xclaw export` — prices it the
same way, at display time: changing a price re-prices old steps too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from xclaw.messages import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens. Cache reads/writes default to the input price when a
    provider has no separate rate."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

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


# Model name (without the `anthropic:` / `openai:` prefix) -> price. A dated name
# (claude-sonnet-4-5-20250929) takes the price of the longest key it starts with.
BUILTIN_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025),
    "o4-mini": Price(1.1, 4.4, 0.275),
    "deepseek-chat": Price(0.27, 1.1, 0.07),
    "deepseek-reasoner": Price(0.55, 2.19, 0.14),
}


# Where the built-in prices hold: the vendors' own APIs (a recorded base URL elsewhere is a
# local server or a proxy, whose prices only xclaw.yaml knows).
VENDOR_HOSTS = frozenset({"api.openai.com", "api.anthropic.com", "api.deepseek.com"})


def vendor_endpoint(endpoint: str) -> bool:
    """True for the provider's own API: no base URL recorded (the SDK's default) or a
    vendor's host."""
    return not endpoint or (urlsplit(endpoint).hostname or "") in VENDOR_HOSTS


class PriceTable:
    def __init__(self, prices: Mapping[str, Price], own: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(prices)
        # xclaw.yaml's prices: they hold wherever the model is served.
        self.own = dict(own or {})
        # (name, vendor?) -> its price (or None), found once: every step frame of an llm_call
        # prices it, and the prefix scan over the table was measurable per step.
        self._found: dict[tuple[str, bool], Price | None] = {}

    @classmethod
    def with_overrides(cls, overrides: Mapping[str, Mapping[str, float]] | None) -> PriceTable:
        own = {
            _bare(model): Price(
                input=float(rates["input"]),
                output=float(rates["output"]),
                cache_read=rates.get("cache_read"),
                cache_write=rates.get("cache_write"),
            )
            for model, rates in (overrides or {}).items()
        }
        return cls({**BUILTIN_PRICES, **own}, own)

    def price_of(self, model: str, endpoint: str = "") -> Price | None:
        """The price of `model` as answered by `endpoint` (the recorded base URL; "" for
        the provider's own API)."""
        vendor = vendor_endpoint(endpoint)
        key = (model, vendor)
        try:
            return self._found[key]
        except KeyError:
            pass
        price = _lookup(self.prices if vendor else self.own, _bare(model))
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


_active = PriceTable.with_overrides(None)


def configure(overrides: Mapping[str, Mapping[str, float]] | None) -> PriceTable:
    """Make the built-in table plus xclaw.yaml's `prices:` the one every view uses."""
    global _active
    _active = PriceTable.with_overrides(overrides)
    return _active


def active() -> PriceTable:
    return _active


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
