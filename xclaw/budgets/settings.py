"""[budgets] The `budgets` section of xclaw.yaml: caps in tokens and, where a model's price is
known, in dollars (docs/budgets.md). Every cap is off unless set; an admin's caps (`xclaw budget
set`, the HTTP API) go over these.

    budgets:
      session_tokens: 200000        # one session, sub-agents included
      session_usd: 5
      user_daily_tokens: 1000000    # a person's sessions, per UTC day / month
      user_monthly_usd: 100
      total_daily_usd: 500          # the whole deployment
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from xclaw.config.section import Number, Section, Whole

Tokens = Annotated[Whole, Field(ge=0)] | None
Dollars = Annotated[Number, Field(ge=0)] | None

# The caps, by key: (scope, period, unit). Scope: session | user | total; period: "" (the
# session's life), daily, monthly (UTC); unit: tokens | usd.
CAPS: dict[str, tuple[str, str, str]] = {
    "session_tokens": ("session", "", "tokens"),
    "session_usd": ("session", "", "usd"),
    "user_daily_tokens": ("user", "daily", "tokens"),
    "user_daily_usd": ("user", "daily", "usd"),
    "user_monthly_tokens": ("user", "monthly", "tokens"),
    "user_monthly_usd": ("user", "monthly", "usd"),
    "total_daily_tokens": ("total", "daily", "tokens"),
    "total_daily_usd": ("total", "daily", "usd"),
    "total_monthly_tokens": ("total", "monthly", "tokens"),
    "total_monthly_usd": ("total", "monthly", "usd"),
}


class BudgetSettings(Section):
    # A session's spend, its sub-agents' included.
    session_tokens: Tokens = None
    session_usd: Dollars = None
    # What one person's sessions spend per UTC day and month (a session's owner; docs/teams.md).
    user_daily_tokens: Tokens = None
    user_daily_usd: Dollars = None
    user_monthly_tokens: Tokens = None
    user_monthly_usd: Dollars = None
    # What the whole deployment spends per UTC day and month.
    total_daily_tokens: Tokens = None
    total_daily_usd: Dollars = None
    total_monthly_tokens: Tokens = None
    total_monthly_usd: Dollars = None

    def caps(self) -> dict[str, float]:
        """The caps set, by key."""
        return {k: float(v) for k in CAPS if (v := getattr(self, k)) is not None}
