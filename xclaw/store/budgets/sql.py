"""[store/budgets] Budgets in the record (migrations `budgets`, `budget_holds_in_steps`;
docs/budgets.md): each LLM call's hold, in its step's own row — written with its `running`
step and settled with its finish (writes.BeginStep.hold, FinishStep.spent) — and the caps and
grants an admin set (writes.SetBudget).

Both backends, one SQL text (dialect.py): `store.budgets`, a role over the connection layer. A
hold is its step's (session, seq): written once, settled once, never counted twice. Its spend
counts what it cost once settled, its reservation until then — a call cut short by a kill
stays counted at its maximum. Holds outlive rollbacks and deletions (the money was spent): a
trigger keeps a deleted step's hold in `budget_holds_kept`, and the view `budget_holds` reads
both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from xclaw.errors import SessionNotFound
from xclaw.store.dialect import Dialect
from xclaw.store.leases import Lease
from xclaw.store.role import Role
from xclaw.store.steps.model import BUDGET_KEY, Status
from xclaw.store.steps.rows import load_json
from xclaw.store.steps.writes import BudgetStop, Hold, Kind, Refused, SetBudget, Spent

if TYPE_CHECKING:
    pass

T = TypeVar("T")

# A hold rides in its step's own row (migration `budget_holds_in_steps`): written by the INSERT
# of the `running` step, settled by the UPDATE that finishes it (the record's bodies:
# rows.HOLD_COLUMNS, rows.FINISH_STEP_SPENT), once — `spent_tokens` is NULL until then.
# What a hold counts: its cost once settled, its reservation until then.
_COUNTED = (
    "coalesce(sum(CASE WHEN settled=1 THEN spent_tokens ELSE held_tokens END), 0),"
    " coalesce(sum(CASE WHEN settled=1 THEN spent_usd ELSE held_usd END), 0)"
)
# `budget_holds` is the view of the holds in the steps' rows and the kept ones (migration
# `budget_holds_in_steps`); a condition on it reaches both.
# Scope -> the holds it sums: `s:<session>`, `ud:<user>:<day>`, `um:<user>:<month>`,
# `td:<day>`, `tm:<month>` (xclaw/budgets/ledger.py names them).
# A month is read as a range of days (the day indexes serve it).
_SCOPE_WHERE = {
    "s": "session_id=?",
    "ud": "owner=? AND day=?",
    "um": "owner=? AND day BETWEEN ? AND ?",
    "td": "day=?",
    "tm": "day BETWEEN ? AND ?",
}
# A shared scope's counter (migration `budget_counters`): moved by each hold and settlement
# while a cap on the scope is set; rebuilt from the holds when missing.
_COUNT = "UPDATE budget_counters SET tokens=tokens+?, usd=usd+? WHERE scope IN ({})"
_REBUILD = (
    "INSERT INTO budget_counters (scope, tokens, usd) SELECT ?, {} FROM budget_holds WHERE {}"
    " ON CONFLICT (scope) DO NOTHING"
)
# The counters of periods that have ended (before the day, before the month given): a
# counter names its period last, a day in ten characters, a month in seven.
_PRUNE = (
    "DELETE FROM budget_counters WHERE"
    " (substr(scope, 1, 3) IN ('ud:', 'td:') AND substr(scope, length(scope) - 9) < ?)"
    " OR (substr(scope, 1, 3) IN ('um:', 'tm:') AND substr(scope, length(scope) - 6) < ?)"
)
_GET_CAPS = "SELECT target, caps, granted_tokens, granted_usd, updated_at FROM budget_caps"
_UPSERT_CAPS = (
    "INSERT INTO budget_caps (target, caps, granted_tokens, granted_usd, updated_at)"
    " VALUES (?, ?::jsonb, ?, ?, ?) ON CONFLICT (target) DO UPDATE SET caps=excluded.caps,"
    " granted_tokens=excluded.granted_tokens, granted_usd=excluded.granted_usd,"
    " updated_at=excluded.updated_at"
)
_SESSION_META = "SELECT metadata, current_status FROM sessions WHERE session_id=?"
_STOP = "UPDATE sessions SET metadata=?::jsonb, awaiting_input=?, updated_at=? WHERE session_id=?"


@dataclass(frozen=True, slots=True)
class BudgetRow:
    """An admin's caps for one target, and what was granted to it (a session's)."""

    target: str
    caps: dict[str, float | None] = field(default_factory=dict)
    granted_tokens: int = 0
    granted_usd: float = 0.0
    updated_at: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "caps": self.caps,
            "grantedTokens": self.granted_tokens,
            "grantedUsd": self.granted_usd,
        }


def scope_where(scope: str) -> tuple[str, list[Any]]:
    """The condition on `budget_holds` of a scope's holds, and its parameters."""
    kind, _, rest = scope.partition(":")
    where = _SCOPE_WHERE[kind]
    # A user name may hold ':': the period is the last part.
    user, _, period = rest.rpartition(":")
    values: list[Any] = [user, period] if kind == "ud" else [rest]
    if kind == "um":
        values = [user, f"{period}-01", f"{period}-31"]
    elif kind == "tm":
        values = [f"{rest}-01", f"{rest}-31"]
    return where, values


def scope_query(scopes: Iterable[str]) -> tuple[str, list[Any], list[str]]:
    """One statement summing the holds of each scope (UNION ALL), its parameters, and the
    scopes in row order."""
    parts: list[str] = []
    params: list[Any] = []
    order: list[str] = []
    for scope in scopes:
        where, values = scope_where(scope)
        parts.append(f"SELECT {_COUNTED} FROM budget_holds WHERE {where}")
        params += values
        order.append(scope)
    return " UNION ALL ".join(parts), params, order


def counters_of(target: str) -> tuple[str, ...]:
    """The prefixes of the counters a target's caps limit (dropped when they change)."""
    if target.startswith("user:"):
        name = target.removeprefix("user:")
        return (f"ud:{name}:", f"um:{name}:")
    return ("td:", "tm:") if target == "total" else ()


class BudgetMethods(Role):
    """Budgets' transaction bodies and reads, for both backends."""

    # --- transaction bodies (writes.prepare) -----------------------------------------------
    def _shared_check_tx(self, hold: Hold) -> Callable[[Any], Refused | None]:
        """Count the hold on its shared scopes' counters and check their caps, before its
        step is written: the counters' rows are locked until the commit (PostgreSQL; SQLite
        has one writer), so workers' holds on one scope are checked one after another and a
        cap is passed by at most the last reservation it let through. Over a cap, the counts
        are taken back and nothing is written (`Refused`)."""
        d = self._dialect
        scopes = list(dict.fromkeys(s.scope for s in hold.shared))
        marks = _marks(len(scopes))
        undo = d.sql(_COUNT.format(marks))
        count = d.sql(_COUNT.format(marks) + " RETURNING scope, tokens, usd")

        def tx(conn: Any) -> Refused | None:
            totals = {
                str(r[0]): (float(r[1]), float(r[2]))
                for r in conn.execute(count, (hold.tokens, hold.usd, *scopes)).fetchall()
            }
            missing = [s for s in scopes if s not in totals]
            if missing:  # a new period, or a cap just set: the holds so far (this one not yet)
                # ... and the counters of the periods that ended go (prune_counters_tx).
                prune_counters_tx(d, conn, hold.day, hold.month)
                for scope in missing:
                    where, values = scope_where(scope)
                    conn.execute(d.sql(_REBUILD.format(_COUNTED, where)), [scope, *values])
                again = d.sql(_COUNT.format(_marks(len(missing))) + " RETURNING scope, tokens, usd")
                for r in conn.execute(again, (hold.tokens, hold.usd, *missing)).fetchall():
                    totals[str(r[0])] = (float(r[1]), float(r[2]))
            for s in hold.shared:
                need = hold.tokens if s.unit == "tokens" else hold.usd
                total = totals[s.scope][0 if s.unit == "tokens" else 1]
                if total > s.limit + (1e-9 if s.unit == "usd" else 0):
                    conn.execute(undo, (-hold.tokens, -hold.usd, *scopes))
                    return Refused(s.cap, s.unit, s.limit, total - need, need)
            return None

        return tx

    def _settle_tx(self, spent: Spent) -> Callable[[Any], None]:
        """The shared scopes' counters moved from a hold's reservation to its cost, in the
        transaction whose completion settled it."""
        d = self._dialect
        count = d.sql(_COUNT.format(_marks(len(spent.shared))))
        params = (spent.tokens - spent.held_tokens, spent.usd - spent.held_usd, *spent.shared)

        def tx(conn: Any) -> None:
            conn.execute(count, params)

        return tx

    def _set_budget_tx(self, w: SetBudget) -> Callable[[Any], BudgetRow]:
        d, now = self._dialect, self._now()

        def tx(conn: Any) -> BudgetRow:
            row = conn.execute(d.sql(f"{_GET_CAPS} WHERE target=?"), (w.target,)).fetchone()
            old = _row(row) if row is not None else BudgetRow(w.target)
            new = BudgetRow(
                w.target,
                {**old.caps, **dict(w.caps)},
                old.granted_tokens + w.grant_tokens,
                old.granted_usd + w.grant_usd,
                now,
            )
            conn.execute(
                d.sql(_UPSERT_CAPS),
                (w.target, d.json(new.caps, "caps"), new.granted_tokens, new.granted_usd, now),
            )
            prefixes = counters_of(w.target)
            if prefixes:  # its caps changed: its counters are rebuilt from the holds when due
                conn.execute(
                    d.sql("DELETE FROM budget_counters WHERE substr(scope, 1, ?) IN (?, ?)"),
                    (len(prefixes[0]), *prefixes),
                )
            return new

        return tx

    def _budget_stop_tx(self, w: BudgetStop, lease: Lease | None) -> Callable[[Any], bool]:
        """Stop (or let go on) a Running session; False when it is not Running (a stop
        for a budget only ever holds a Running session)."""
        d, now = self._dialect, self._now()

        def tx(conn: Any) -> bool:
            d.lock_session(conn, w.session_id, lease)
            row = conn.execute(d.sql(_SESSION_META), (w.session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(w.session_id)
            meta = load_json(row[0]) or {}
            if Status(row[1]) is not Status.RUNNING:
                return False
            if w.detail is None:
                if BUDGET_KEY not in meta:
                    return False
                meta.pop(BUDGET_KEY, None)
            else:
                meta[BUDGET_KEY] = dict(w.detail)
            conn.execute(
                d.sql(_STOP),
                (d.json(meta, "metadata"), 1 if w.detail is not None else 0, now, w.session_id),
            )
            return True

        return tx

    def drop_budget_counters(self) -> None:
        """Every shared scope's counter dropped, to be rebuilt from the holds when next
        needed: a worker starting with xclaw.yaml's caps on shared scopes, which may have
        been off (and their counters not kept) before it."""
        sql = self._dialect.sql("DELETE FROM budget_counters")
        self._write(lambda c: c.execute(sql), Kind.BUDGET_SET)

    # --- reads -----------------------------------------------------------------------------
    def budget_rows(self, targets: Iterable[str] | None = None) -> dict[str, BudgetRow]:
        """The admin's caps (every target's, or these targets')."""
        d = self._dialect
        wanted = None if targets is None else list(targets)
        params: tuple[Any, ...] = ()
        if wanted is None:
            sql = d.sql(_GET_CAPS)
        else:
            if not wanted:
                return {}
            cond, bound = d.in_ids("target", wanted)
            sql, params = d.sql(f"{_GET_CAPS} WHERE {cond}"), (bound,)
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return {str(r[0]): _row(r) for r in rows}

    def budget_totals(self, scopes: Iterable[str]) -> dict[str, tuple[int, float]]:
        """What each scope's holds count (tokens, dollars), in one statement."""
        text, params, order = scope_query(scopes)
        if not order:
            return {}
        sql = self._dialect.sql(text)
        rows = self._read(lambda c: c.execute(sql, params).fetchall())
        return {s: (int(r[0]), float(r[1])) for s, r in zip(order, rows, strict=True)}

    def budget_holds(self, session_id: str) -> list[tuple[int, int, int, bool]]:
        """A session's holds: (seq, held tokens, spent tokens, settled), by seq."""
        sql = self._dialect.sql(
            "SELECT seq, held_tokens, spent_tokens, settled FROM budget_holds"
            " WHERE session_id=? ORDER BY seq"
        )
        rows = self._read(lambda c: c.execute(sql, (session_id,)).fetchall())
        return [(int(r[0]), int(r[1]), int(r[2]), bool(r[3])) for r in rows]

    def budget_counters(self, scopes: Iterable[str]) -> dict[str, tuple[int, float]]:
        """The counters kept of these shared scopes (a scope without one: absent)."""
        wanted = list(scopes)
        if not wanted:
            return {}
        sql = self._dialect.sql(
            f"SELECT scope, tokens, usd FROM budget_counters WHERE scope IN "
            f"({', '.join('?' * len(wanted))})"
        )
        rows = self._read(lambda c: c.execute(sql, wanted).fetchall())
        return {str(r[0]): (int(r[1]), float(r[2])) for r in rows}


def prune_counters_tx(d: Dialect, conn: Any, day: str, month: str) -> int:
    """The shared scopes' counters of periods before `day` (a person's or the deployment's
    day) and `month` deleted, in the open transaction; how many. Asked when a counter is made
    for a new period, so the table holds the periods in use, not one row per person per day
    for ever. A counter is a running sum of its scope's holds (which are all kept) for the
    hold check alone — `xclaw budget show` sums the holds — so one deleted that is still
    wanted (a worker whose clock is behind, still in yesterday) is rebuilt from the holds,
    exactly, by the next hold that needs it."""
    return int(conn.execute(d.sql(_PRUNE), (day, month)).rowcount)


@lru_cache(maxsize=8)
def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _row(r: Any) -> BudgetRow:
    caps = load_json(r[1]) or {}
    return BudgetRow(
        str(r[0]),
        {str(k): (None if v is None else float(v)) for k, v in dict(caps).items()},
        int(r[2] or 0),
        float(r[3] or 0.0),
        int(r[4] or 0),
    )


def caps_of(rows: Mapping[str, BudgetRow], target: str) -> BudgetRow:
    return rows.get(target) or BudgetRow(target)
