"""[budgets] The budget check, answered in memory (docs/budgets.md).

`Ledger` holds running totals per scope — a session, a person's day or month, the
deployment's day or month — of what the record's holds count (their cost once settled, their
reservation until then). The record rebuilds them: each turn that runs under a cap reads
its scopes' sums once (`Budgets.gate_for`, xclaw/runtime/budgets.py); between reads every
hold and settlement this worker writes is added here as it is put. The session's caps are
checked by arithmetic on these totals — no query; the caps on scopes sessions share, on
their counters, exact across workers: a run claims a slice of their room in a hold's own
transaction (store/budgets/sql.py) and draws its other calls on it here, by arithmetic (the
run's allowance, `Gate.room`), giving back what it did not use at its end.
A turn under no cap has no gate at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from xclaw.budgets.settings import CAPS
from xclaw.budgets.words import words
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.messages import Usage
from xclaw.llm.prices import PriceTable
from xclaw.store.budgets.sql import SLICE
from xclaw.store.steps.writes import Claim, Hold, Refused, Shared, Spent


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

    def load(self, sums: Mapping[str, tuple[int, float]]) -> None:
        """The record's sums, as they are: every hold is committed before its call is made
        (a settlement not yet committed only leaves a total a little high)."""
        for scope, (tokens, usd) in sums.items():
            self.totals[scope] = [float(tokens), usd]

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
        # The session's caps are checked here (one driver: its total is exact); the caps on
        # scopes sessions share, in the hold's transaction against their counters.
        self.own = tuple(lim for lim in limits if lim.scope.startswith("s:"))
        self.shared = tuple(
            Shared(lim.cap, lim.scope, lim.unit, lim.amount)
            for lim in limits
            if not lim.scope.startswith("s:")
        )
        self.shared_scopes = tuple(dict.fromkeys(s.scope for s in self.shared))
        # The run's allowance on its shared scopes (docs/budgets.md, "Allowances"): room
        # claimed on their counters and not yet drawn (tokens, dollars); `near`: the last
        # claim found a cap near (refunds are then given back at once); `claimed`: there is
        # an allowance to give back at the run's end.
        self.room = [0.0, 0.0]
        self.near = False
        self.claimed = False

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
        """The hold of a call of at most `tokens` (`usd`), counted; or the first of the
        session's caps it would go past, nothing counted. The shared caps are the hold's
        to check when it is written (`refused` when one has no room)."""
        ledger = self.ledger
        for lim in self.own:
            need = tokens if lim.unit == "tokens" else usd
            spent = ledger.spent(lim.scope, lim.unit)
            if spent + need > lim.amount:
                return Reached(lim.cap, lim.unit, lim.amount, spent, need)
        ledger.add(self.scopes, tokens, usd)
        if not self.shared:
            return Hold(tokens=tokens, usd=usd, owner=self.owner, day=self.day, month=self.month)
        room = self.room
        if room[0] >= tokens and room[1] >= usd:  # drawn on the run's allowance: no statement
            room[0] -= tokens
            room[1] -= usd
            return Hold(
                tokens=tokens,
                usd=usd,
                owner=self.owner,
                day=self.day,
                month=self.month,
                drawn=True,
            )
        short = (max(0, int(tokens - room[0] + 0.5)), max(0.0, usd - room[1]))
        claim = Claim((tokens * SLICE, usd * SLICE), short)
        return Hold(
            tokens=tokens,
            usd=usd,
            owner=self.owner,
            day=self.day,
            month=self.month,
            shared=self.shared,
            claim=claim,
        )

    def written(self, hold: Hold) -> None:
        """The hold's transaction committed: the room its claim was granted joins the run's
        allowance, and the hold draws on it."""
        claim = hold.claim
        if claim is None or claim.granted is None:
            return
        granted = claim.granted
        self.room[0] += granted[0] - hold.tokens
        self.room[1] += granted[1] - hold.usd
        self.near = granted != claim.slice
        self.claimed = True

    def returned(self) -> None:
        """The run's allowance is being given back (writes.ReturnAllowance): later holds claim
        anew."""
        self.room = [0.0, 0.0]
        self.claimed = False

    def refused(self, hold: Hold, no: Refused) -> Reached:
        """The hold's transaction found no room under a shared cap: not counted, and that
        scope's total is what the record said."""
        self.ledger.add(self.scopes, -hold.tokens, -hold.usd)
        for s in self.shared:
            if s.cap == no.cap:
                total = self.ledger.totals.setdefault(s.scope, [0.0, 0.0])
                total[0 if no.unit == "tokens" else 1] = no.spent
        return Reached(no.cap, no.unit, no.limit, no.spent, no.needed)

    def settle(self, hold: Hold, tokens: int, usd: float) -> Spent:
        """The call cost `tokens` (`usd`): its hold's reservation replaced by it."""
        self.ledger.add(self.scopes, tokens - hold.tokens, usd - hold.usd)
        if hold.drawn or (hold.claim is not None and hold.claim.granted is not None):
            return self._settle_drawn(hold, tokens, usd)
        return Spent(
            tokens=tokens,
            usd=usd,
            held_tokens=hold.tokens,
            held_usd=hold.usd,
            shared=self.shared_scopes if hold.shared else (),
        )

    def _settle_drawn(self, hold: Hold, tokens: int, usd: float) -> Spent:
        """A hold of the run's allowance settled: what it did not cost stays in the room (no
        statement) — or, near a cap, is given back to the counters at once; a cost past the
        reservation is taken from the room, or claimed where the room is short."""
        room = self.room
        back = (hold.tokens - tokens, hold.usd - usd)
        spent = Spent(tokens=tokens, usd=usd, held_tokens=hold.tokens, held_usd=hold.usd)
        if self.near and back[0] >= 0 and back[1] >= 0:
            if back == (0, 0.0):
                return spent
            moved = (-back[0], -back[1])
            return replace(spent, shared=self.shared_scopes, moved=moved)
        room[0] += back[0]
        room[1] += back[1]
        if room[0] >= 0 and room[1] >= 0:
            return spent
        more = (max(0, int(-room[0] + 0.5)), max(0.0, -room[1]))
        room[0] += more[0]
        room[1] += more[1]
        return replace(spent, shared=self.shared_scopes, moved=more)

    def status(self) -> list[dict[str, Any]]:
        """Every cap that applies: spent and left (the `budget` of a status frame)."""
        out = []
        for lim in self.limits:
            spent = self.ledger.spent(lim.scope, lim.unit)
            out.append(Reached(lim.cap, lim.unit, lim.amount, spent, 0).to_json())
        return out
