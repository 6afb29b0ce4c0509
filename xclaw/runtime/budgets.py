"""[runtime] Budgets on this worker (docs/budgets.md): which caps apply to a session's run, its gate
(xclaw/budgets/ledger.py) with the running totals the record rebuilds, and a session that
waits for a budget let go on once a grant or a raised cap makes room.

The caps are xclaw.yaml's `budgets:` under the admin's (`budget_caps`, read again at most
every `REFRESH_S`, so a cap set by the command line or another worker is seen without a
query per turn), and so are the totals of the scopes several sessions share (what other
workers spent). A turn under no cap gets no gate: nothing more is read or written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from xclaw.budgets.ledger import Gate, Ledger, Limit, Reached, periods, scope_of
from xclaw.budgets.settings import CAPS
from xclaw.llm.prices import PriceTable
from xclaw.recorder.caller import StoreCaller
from xclaw.store.base import BudgetStore, TeamStore
from xclaw.store.budgets.sql import BudgetRow

REFRESH_S = 2.0

# The keys each target's caps may hold.
SESSION_KEYS = tuple(k for k, (scope, _, _) in CAPS.items() if scope == "session")
USER_KEYS = tuple(k for k, (scope, _, _) in CAPS.items() if scope == "user")
TOTAL_KEYS = tuple(k for k, (scope, _, _) in CAPS.items() if scope == "total")


def target_keys(target: str) -> tuple[str, ...]:
    """The cap keys a target (`session:<id>`, `user:<name>`, `total`) takes."""
    if target.startswith("session:"):
        return SESSION_KEYS
    if target.startswith("user:"):
        return USER_KEYS
    if target == "total":
        return TOTAL_KEYS
    raise ValueError(f"no budget target {target!r}: session:<id>, user:<name> or total")


def limits_for(
    configured: Mapping[str, float],
    rows: Mapping[str, BudgetRow],
    session_id: str,
    owner: str | None,
    day: str,
    month: str,
) -> tuple[Limit, ...]:
    """Every cap on a session: xclaw.yaml's, each overridden by its target's row (None: no
    cap), a session's grants added."""
    out: list[Limit] = []
    targets = {"session": f"session:{session_id}", "user": f"user:{owner}", "total": "total"}
    for cap, (scope, _period, unit) in CAPS.items():
        row = rows.get(targets[scope])
        amount: float | None = configured.get(cap)
        if row is not None and cap in row.caps:
            amount = row.caps[cap]
        if amount is None:
            continue
        if scope == "session" and row is not None:
            amount += row.granted_tokens if unit == "tokens" else row.granted_usd
        where = scope_of(cap, session_id, owner, day, month)
        if where is not None:
            out.append(Limit(cap, where, amount))
    return tuple(out)


class BudgetRoles(Protocol):
    """The roles a budget reads: the caps and totals, and who owns a session."""

    @property
    def budgets(self) -> BudgetStore: ...

    @property
    def teams(self) -> TeamStore: ...


class Budgets:
    """The caps and running totals of this worker's runs."""

    def __init__(
        self,
        configured: Mapping[str, float],
        prices: PriceTable,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.configured = dict(configured)
        self.prices = prices
        self.clock = clock
        self.ledger = Ledger()
        self._rows: dict[str, BudgetRow] = {}
        self._read_at: float | None = None
        # When each shared scope's total was last read from the record.
        self._loaded: dict[str, float] = {}

    def caps_shared(self) -> bool:
        """Whether xclaw.yaml caps a person's or the deployment's spend."""
        return any(k in self.configured for k in (*USER_KEYS, *TOTAL_KEYS))

    def forget_rows(self) -> None:
        """The admin changed a cap here: read them again at the next turn."""
        self._read_at = None

    async def gate_for(self, reader: StoreCaller[BudgetRoles], session_id: str) -> Gate | None:
        """The gate of a run of `session_id`; None when no cap applies (then nothing is
        read, but the admin's caps every REFRESH_S). One trip to a thread: the session's
        own total (exact: one driver), and the shared scopes' (a person's, the
        deployment's) when not read for REFRESH_S — between reads this worker counts its
        own holds as it puts them, so a turn costs one indexed sum."""
        now = self.clock()
        refresh = self._read_at is None or now - self._read_at >= REFRESH_S
        if not refresh and not self.configured and not self._rows:
            return None
        day, month = periods(now)
        read = partial(self._read, reader.store, session_id, day, month, refresh, now)
        rows, owner, limits, sums = await reader(read)
        if refresh:
            self._rows, self._read_at = rows, now
        if not limits:
            return None
        for scope in sums:
            self._loaded[scope] = now
        self.ledger.load(sums)
        return Gate(self.ledger, limits, owner=owner, day=day, month=month, prices=self.prices)

    def _read(
        self, store: BudgetRoles, session_id: str, day: str, month: str, refresh: bool, now: float
    ) -> tuple[dict[str, BudgetRow], str | None, tuple[Limit, ...], dict[str, tuple[int, float]]]:
        """On a thread: the admin's caps (when due), the session's owner (when a person's
        cap may apply), the caps on the session and the totals of their scopes to read."""
        rows = store.budgets.budget_rows() if refresh else self._rows
        per_user = any(k in self.configured for k in USER_KEYS) or any(
            t.startswith("user:") for t in rows
        )
        owner = store.teams.session_owner(session_id) if per_user else None
        limits = limits_for(self.configured, rows, session_id, owner, day, month)
        if not limits:
            return rows, owner, limits, {}
        mine = f"s:{session_id}"
        stale = list(
            dict.fromkeys(
                lim.scope
                for lim in limits
                if lim.scope == mine or now - self._loaded.get(lim.scope, -REFRESH_S) >= REFRESH_S
            )
        )
        # A shared scope's total is its counter where one is kept (what its holds count, row
        # by row: one key read, where the sum reads every hold of the day or month); the
        # session's, and a scope without a counter yet, are summed.
        shared = [s for s in stale if s != mine]
        counted = store.budgets.budget_counters(shared) if shared else {}
        summed = [s for s in stale if s not in counted]
        return rows, owner, limits, store.budgets.budget_totals(summed) | counted


def parse_target(ref: str) -> str:
    """`session:<id>`, `user:<name>` or `total`; a bare session id is `session:<id>`."""
    ref = ref.strip()
    named = ref == "total" or ref.startswith(("session:", "user:"))
    target = ref if named else f"session:{ref}"
    target_keys(target)  # ValueError for what is no target
    return target


def check_caps(target: str, caps: Mapping[str, float | None]) -> None:
    """ValueError naming a key the target does not take, or a negative amount."""
    keys = target_keys(target)
    for key, value in caps.items():
        if key not in keys:
            raise ValueError(
                f"{target} takes no cap {key!r}; it takes {', '.join(keys)}"
                + ("" if key in CAPS else f" (the caps: {', '.join(CAPS)})")
            )
        if value is not None and (not isinstance(value, int | float) or value < 0):
            raise ValueError(f"{key}: a cap is a number, 0 or more (null: no cap)")


def report(
    store: BudgetRoles, configured: Mapping[str, float], target: str, now_s: float
) -> dict[str, Any]:
    """What `xclaw budget show`, the HTTP API and a client show of a target: each cap that
    applies, with what its scope spent and what is left (a session: its own, its owner's and
    the deployment's), and what an admin set and granted."""
    day, month = periods(now_s)
    rows = store.budgets.budget_rows()
    owner: str | None = None
    session_id = ""
    if target.startswith("session:"):
        session_id = target.removeprefix("session:")
        owner = store.teams.session_owner(session_id)
    elif target.startswith("user:"):
        owner = target.removeprefix("user:")
    limits = limits_for(configured, rows, session_id, owner, day, month)
    if target.startswith("user:"):
        limits = tuple(lim for lim in limits if CAPS[lim.cap][0] == "user")
    elif target == "total":
        limits = tuple(lim for lim in limits if CAPS[lim.cap][0] == "total")
    sums = store.budgets.budget_totals(tuple(dict.fromkeys(lim.scope for lim in limits)))
    caps = []
    for lim in limits:
        tokens, usd = sums.get(lim.scope, (0, 0.0))
        spent = float(tokens) if lim.unit == "tokens" else usd
        caps.append(Reached(lim.cap, lim.unit, lim.amount, spent, 0).to_json())
    out: dict[str, Any] = {"target": target, "caps": caps, "day": day, "month": month}
    if target.startswith("session:"):
        held = store.budgets.budget_totals((f"s:{session_id}",))[f"s:{session_id}"]
        out["spent"] = {"tokens": held[0], "usd": round(held[1], 6)}
    row = rows.get(target)
    if row is not None:
        out["set"] = row.to_json()
    return out
