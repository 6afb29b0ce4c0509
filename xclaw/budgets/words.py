"""[budgets] A budget's state in words, the same on every client (docs/budgets.md); no imports, so
the store's session state can say it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def words(detail: Mapping[str, Any]) -> str:
    """`session_tokens: spent 1200 of 1500 tokens, 300 left (the next call needs up to
    4400)`."""
    unit = detail.get("unit", "tokens")

    def amount(v: Any) -> str:
        return f"${float(v):.4f}" if unit == "usd" else f"{int(v)} tokens"

    text = (
        f"{detail.get('cap')}: spent {amount(detail.get('spent', 0))} of "
        f"{amount(detail.get('limit', 0))}, {amount(detail.get('left', 0))} left"
    )
    if detail.get("needed"):
        text += f" (the next call needs up to {amount(detail['needed'])})"
    return text
