"""[budgets] The budget check, answered in memory (docs/budgets.md).

`Ledger` holds running totals per scope — a session, a person's day or month, the
deployment's day or month — of what the record's holds count (their cost once settled, their
reservation until then). The record rebuilds them: each turn that runs under a cap reads
its scopes' sums once (`Budgets.gate_for`, xclaw/runtime/budgets.py); between reads every
hold and settlement this worker writes is added here as it is put. A step's check is
arithmetic on these totals — no query — and a turn under no cap has no gate at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xclaw.budgets.settings import CAPS
from xclaw.budgets.words import words
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.messages import Usage
from xclaw.llm.prices import PriceTable
from xclaw.store.steps.writes import Hold, Spent


def periods(now_s: float) -> tuple[str, str]:
    """(UTC day, UTC month) of a moment: 2026-12-06, 2026-12."""
    t = time.gmtime(now_s)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}", f"{t.tm_year:04d}-{t.tm_mon:02d}"


def scope_of(cap: str, session_id: str, owner: str | None, day: str, month: str) -> str | None:
    """The scope whose total a cap limits (None: a person's cap on the admin's session)."""
    scope, period, _unit = CAPS[cap]
    if scope == "session":
        return f"s:{session_id}"
    if scope == "user":
        if owner is None:
            return None
        return f"ud:{owner}:{day}" if period == "daily" else f"um:{owner}:{month}"
    return f"td:{day}" if period == "daily" else f"tm:{month}"


@dataclass(frozen=True, slots=True)
class Limit:
    """One cap applying to a session: its key, the scope it limits, and the amount."""

    cap: str
    scope: str
    amount: float

    @property
    def unit(self) -> str:
        return CAPS[self.cap][2]


@dataclass(frozen=True, slots=True)
class Reached:
    """The cap a call would go past: which, what its scope spent, what is left, and the
    call's reservation. What every client says of a session that waits for a budget."""

    cap: str
    unit: str  # tokens | usd
    limit: float
    spent: float
    needed: float

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    def to_json(self) -> dict[str, Any]:
        return {
            "cap": self.cap,
            "unit": self.unit,
            "limit": _num(self.limit, self.unit),
            "spent": _num(self.spent, self.unit),
            "left": _num(self.left, self.unit),
            "needed": _num(self.needed, self.unit),
        }

    def words(self) -> str:
        return words(self.to_json())


def _num(v: float, unit: str) -> float | int:
    return round(v, 6) if unit == "usd" else int(v)


class Ledger:
    """Running totals per scope, (tokens, dollars), on one worker's event loop."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}

    def load(self, sums: Mapping[str, tuple[int, float]], *, exact: frozenset[str]) -> None:
        """The record's sums: a scope in `exact` (the session's: one driver) takes them as
        they are; a shared one keeps what this worker counted if that is more (its writes
        not yet committed)."""
        for scope, (tokens, usd) in sums.items():
            have = self.totals.get(scope)
            if have is None or scope in exact:
                self.totals[scope] = [float(tokens), usd]
            else:
                have[0], have[1] = max(have[0], float(tokens)), max(have[1], usd)

    def add(self, scopes: tuple[str, ...], tokens: float, usd: float) -> None:
        for scope in scopes:
            total = self.totals.setdefault(scope, [0.0, 0.0])
            total[0] += tokens
            total[1] += usd

    def spent(self, scope: str, unit: str) -> float:
        total = self.totals.get(scope)
        return 0.0 if total is None else total[0 if unit == "tokens" else 1]


class Gate:
    """One run's budget check (shared by its sub-agents: they draw on the same remainder):
    a reservation checked against every cap that applies and counted, or `Reached`."""

    def __init__(
        self,
        ledger: Ledger,
        limits: tuple[Limit, ...],
        *,
        owner: str | None,
        day: str,
        month: str,
        prices: PriceTable | None = None,
    ) -> None:
        self.prices = prices
        self.ledger = ledger
        self.limits = limits
        self.owner = owner
        self.day = day
        self.month = month
        self.scopes = tuple(dict.fromkeys(lim.scope for lim in limits))

    def reserve_call(self, request: LLMRequest, model: str) -> Hold | Reached:
        """A model call's hold: its maximum cost, the prompt's estimate and `max_tokens`
        (in dollars at the model's price, where one is known; else nothing)."""
        prompt, most = request.prompt_estimate, request.max_tokens
        price = None if self.prices is None else self.prices.price_of(model)
        usd = 0.0 if price is None else price.cost(Usage(prompt, most))
        return self.reserve(prompt + most, usd)

    def settle_call(self, hold: Hold, response: LLMResponse, model: str) -> Spent:
        """The hold settled at what the provider reported (its estimate when it gave none)."""
        u = response.usage
        cost = None
        if self.prices is not None:
            cost = self.prices.cost(response.model or model, u, endpoint=response.endpoint)
        return self.settle(hold, u.prompt_tokens + u.completion_tokens, cost or 0.0)

    def reserve(self, tokens: int, usd: float) -> Hold | Reached:
        """The hold of a call of at most `tokens` (`usd`), counted; or the first cap it
        would go past, nothing counted."""
        ledger = self.ledger
        for lim in self.limits:
            need = tokens if lim.unit == "tokens" else usd
            spent = ledger.spent(lim.scope, lim.unit)
            if spent + need > lim.amount:
                return Reached(lim.cap, lim.unit, lim.amount, spent, need)
        ledger.add(self.scopes, tokens, usd)
        return Hold(tokens=tokens, usd=usd, owner=self.owner, day=self.day, month=self.month)

    def settle(self, hold: Hold, tokens: int, usd: float) -> Spent:
        """The call cost `tokens` (`usd`): its hold's reservation replaced by it."""
        self.ledger.add(self.scopes, tokens - hold.tokens, usd - hold.usd)
        return Spent(tokens=tokens, usd=usd)

    def status(self) -> list[dict[str, Any]]:
        """Every cap that applies: spent and left (the `budget` of a status frame)."""
        out = []
        for lim in self.limits:
            spent = self.ledger.spent(lim.scope, lim.unit)
            out.append(Reached(lim.cap, lim.unit, lim.amount, spent, 0).to_json())
        return out
