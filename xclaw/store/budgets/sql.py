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
from xclaw.store.steps.writes import (
    BudgetStop,
    Hold,
    Kind,
    Refused,
    ReturnAllowance,
    SetBudget,
    Spent,
)

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
    "INSERT INTO budget_counters (scope, tokens, usd) SELECT ?,"
    " coalesce(sum(CASE WHEN settled=1 THEN spent_tokens ELSE held_tokens END), 0) + ?,"
    " coalesce(sum(CASE WHEN settled=1 THEN spent_usd ELSE held_usd END), 0) + ?"
    " FROM budget_holds WHERE {} ON CONFLICT (scope) DO NOTHING"
)
# A run's allowance (docs/budgets.md, "Allowances"): room of a shared scope claimed ahead by
# one session's run, kept as counter rows of their own, `a:<session>:<after>:<scope>`
# (a session id holds no ':'), each what a claim added to the scope's counter; the
# session's holds with a seq past `after` draw on them. What they did not use is the
# allowance's sum less those holds' count: given back at the run's end (ReturnAllowance),
# counted in a counter rebuilt meanwhile.
_ALLOWANCE = "a:"
_GRANT = (
    "INSERT INTO budget_counters (scope, tokens, usd) VALUES {} ON CONFLICT (scope) DO UPDATE"
    " SET tokens=budget_counters.tokens+excluded.tokens, usd=budget_counters.usd+excluded.usd"
)
_ALLOWANCES = "SELECT scope, tokens, usd FROM budget_counters WHERE substr(scope, 1, ?) = ?"
_DROP_ALLOWANCES = "DELETE FROM budget_counters WHERE substr(scope, 1, ?) = ?"
_HOLDS_SINCE = (
    f"SELECT owner, day, {_COUNTED} FROM budget_holds WHERE session_id=? AND seq>?"
    " GROUP BY owner, day"
)
# Reservations a slice is worth, and how many slices' room a cap must still have past it
# for one to be claimed; nearer, a run claims what its room lacks, call by call.
SLICE = 4
FAR = 16
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
        """Count the hold — or, with a claim, its run's slice, or near a cap what the run's
        allowance lacks for it (`claim.granted` says which) — on its shared scopes' counters
        and check their caps, before its step is written: the counters' rows are locked until
        the commit (PostgreSQL; SQLite has one writer), so workers' claims on one scope are
        checked one after another and a cap is passed by at most the last reservation it let
        through. Over a cap, the counts are taken back and nothing is written (`Refused`)."""
        d = self._dialect
        scopes = list(dict.fromkeys(s.scope for s in hold.shared))
        marks = _marks(len(scopes))
        undo = d.sql(_COUNT.format(marks))
        count = d.sql(_COUNT.format(marks) + " RETURNING scope, tokens, usd")
        claim = hold.claim
        # What the counters are moved by: the run's slice (a claim), else the reservation.
        tokens, usd = (hold.tokens, hold.usd) if claim is None else claim.slice

        def tx(conn: Any) -> Refused | None:
            totals = {
                str(r[0]): (float(r[1]), float(r[2]))
                for r in conn.execute(count, (tokens, usd, *scopes)).fetchall()
            }
            missing = [s for s in scopes if s not in totals]
            if missing:  # a new period, or a cap just set: the holds so far (this one not yet)
                # ... and the counters of the periods that ended go (prune_counters_tx).
                prune_counters_tx(d, conn, hold.day, hold.month)
                for scope in missing:
                    rebuild_counter_tx(d, conn, scope)
                again = d.sql(_COUNT.format(_marks(len(missing))) + " RETURNING scope, tokens, usd")
                for r in conn.execute(again, (tokens, usd, *missing)).fetchall():
                    totals[str(r[0])] = (float(r[1]), float(r[2]))
            moved = (tokens, usd)
            if claim is not None:
                far = all(
                    _at(totals[s.scope], s.unit) + FAR * _at(claim.slice, s.unit) <= s.limit
                    for s in hold.shared
                )
                if far:
                    claim.granted = claim.slice
                    return None
                # Near a cap: only what the run's room lacks for this hold.
                moved = claim.short
                conn.execute(undo, (moved[0] - tokens, moved[1] - usd, *scopes))
                totals = {
                    k: (t - tokens + moved[0], u - usd + moved[1]) for k, (t, u) in totals.items()
                }
            for s in hold.shared:
                need = _at((hold.tokens, hold.usd), s.unit)
                total = _at(totals[s.scope], s.unit)
                if total > s.limit + (1e-9 if s.unit == "usd" else 0):
                    conn.execute(undo, (-moved[0], -moved[1], *scopes))
                    # What the scope counted before, this run's room included.
                    before = total - _at(moved, s.unit)
                    return Refused(s.cap, s.unit, s.limit, before, need)
            if claim is not None:
                claim.granted = moved
            return None

        return tx

    def _grant_tx(self, hold: Hold, session_id: str) -> Callable[[Any, int], None]:
        """The room a hold's claim was granted, the run's allowance from its step on (written
        after the step, in its transaction; nothing when the claim was refused)."""
        d = self._dialect
        scopes = tuple(dict.fromkeys(s.scope for s in hold.shared))
        claim = hold.claim
        assert claim is not None

        def tx(conn: Any, seq: int) -> None:
            if claim.granted is not None:
                # (the counters moved by the check, before the step)
                grant_tx(d, conn, session_id, seq - 1, scopes, claim.granted, count=False)

        return tx

    def _return_allowance_tx(self, w: ReturnAllowance, lease: Lease | None) -> Callable[[Any], int]:
        """A run's allowance given back: each scope's counter less what the session's holds
        since its claims did not use, and the allowance's rows gone; how many rows. Fenced
        by the run's lease: a worker that lost the session gives back nothing (its
        successor's run does, from the rows)."""
        d = self._dialect

        def tx(conn: Any) -> int:
            d.lock_session(conn, w.session_id, lease)
            unused, rows = allowances_tx(d, conn, w.session_id)
            if not rows:
                return 0
            # One statement per amount: the scopes a run claimed on together, alike.
            alike: dict[tuple[int, float], list[str]] = {}
            for scope, (t, u) in unused.items():
                if t or u:
                    alike.setdefault((t, u), []).append(scope)
            for (t, u), scopes in alike.items():
                conn.execute(d.sql(_COUNT.format(_marks(len(scopes)))), (-t, -u, *scopes))
            prefix = f"{_ALLOWANCE}{w.session_id}:"
            conn.execute(d.sql(_DROP_ALLOWANCES), (len(prefix), prefix))
            return rows

        return tx

    def _settle_tx(self, spent: Spent, session_id: str, seq: int) -> Callable[[Any], None]:
        """The shared scopes' counters moved from a hold's reservation to its cost, in the
        transaction whose completion settled it; for a hold of its run's allowance, the
        counters and the allowance both by `moved`."""
        d = self._dialect
        if spent.moved is not None:
            moved = spent.moved

            def grant(conn: Any) -> None:
                grant_tx(d, conn, session_id, seq - 1, spent.shared, moved)

            return grant
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
        been off (and their counters not kept) before it. The runs' allowances stay: a
        counter rebuilt counts what they did not use yet."""
        sql = self._dialect.sql("DELETE FROM budget_counters WHERE substr(scope, 1, 2) <> 'a:'")
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
    gone = int(conn.execute(d.sql(_PRUNE), (day, month)).rowcount)
    # ... and the allowances on them (of runs killed before giving them back).
    for (key,) in conn.execute(
        d.sql("SELECT scope FROM budget_counters WHERE substr(scope, 1, 2) = 'a:'")
    ).fetchall():
        scope = str(key).split(":", 3)[3]
        period = scope.rpartition(":")[2]
        if period < (day if scope.startswith(("ud:", "td:")) else month):
            drop = d.sql("DELETE FROM budget_counters WHERE scope=?")
            gone += int(conn.execute(drop, (key,)).rowcount)
    return gone


def rebuild_counter_tx(d: Dialect, conn: Any, scope: str) -> None:
    """A missing counter made from its scope's holds, the room the runs' allowances on it
    did not use yet added (the open transaction)."""
    where, values = scope_where(scope)
    unused = allowances_tx(d, conn, None, scope)[0].get(scope, (0, 0.0))
    conn.execute(d.sql(_REBUILD.format(where)), [scope, unused[0], unused[1], *values])


def grant_tx(
    d: Dialect,
    conn: Any,
    session_id: str,
    after: int,
    scopes: Iterable[str],
    moved: tuple[int, float],
    *,
    count: bool = True,
) -> None:
    """The session's allowance on the scopes from seq `after` on, and (`count`) their
    counters, moved by `moved` (the open transaction)."""
    scopes = tuple(scopes)
    if count:
        conn.execute(d.sql(_COUNT.format(_marks(len(scopes)))), (*moved, *scopes))
    values = ", ".join("(?, ?, ?)" for _ in scopes)
    params: list[Any] = []
    for scope in scopes:
        params += [f"{_ALLOWANCE}{session_id}:{after}:{scope}", *moved]
    conn.execute(d.sql(_GRANT.format(values)), params)


def allowances_tx(
    d: Dialect, conn: Any, session_id: str | None, scope: str | None = None
) -> tuple[dict[str, tuple[int, float]], int]:
    """What the allowances of a session (or, None, of every session) on each scope did not
    use — their sum less the count of the session's holds on the scope since the first of
    them — read from the rows (the open transaction), only `scope`'s if given; and how many
    rows there were."""
    prefix = _ALLOWANCE if session_id is None else f"{_ALLOWANCE}{session_id}:"
    got: dict[tuple[str, str], list[float]] = {}  # (session, scope) -> [tokens, usd, after]
    rows = conn.execute(d.sql(_ALLOWANCES), (len(prefix), prefix)).fetchall()
    for key, tokens, usd in rows:
        _, sid, after, on = str(key).split(":", 3)
        if scope is not None and on != scope:
            continue
        mine = got.setdefault((sid, on), [0.0, 0.0, float(after)])
        mine[0] += float(tokens)
        mine[1] += float(usd)
        mine[2] = min(mine[2], float(after))
    unused: dict[str, tuple[int, float]] = {}
    since: dict[tuple[str, int], list[Any]] = {}
    for (sid, on), (claimed_t, claimed_u, first) in got.items():
        key = (sid, int(first))
        if key not in since:
            since[key] = conn.execute(d.sql(_HOLDS_SINCE), key).fetchall()
        used_t = used_u = 0.0
        for owner, day, t, u in since[key]:
            if _counts_on(on, owner, str(day)):
                used_t += float(t)
                used_u += float(u)
        was = unused.get(on, (0, 0.0))
        unused[on] = (int(was[0] + claimed_t - used_t), was[1] + claimed_u - used_u)
    return unused, len(rows)


def _counts_on(scope: str, owner: Any, day: str) -> bool:
    """Whether a hold of `owner` on `day` counts on a shared scope."""
    kind, _, rest = scope.partition(":")
    if kind == "td":
        return day == rest
    if kind == "tm":
        return day[:7] == rest
    user, _, period = rest.rpartition(":")
    if owner is None or str(owner) != user:
        return False
    return day == period if kind == "ud" else day[:7] == period


def _at(pair: tuple[float, float], unit: str) -> float:
    return pair[0] if unit == "tokens" else pair[1]


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
