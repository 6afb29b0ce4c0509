"""A turn's totals of the scopes sessions share (a person's, the deployment's) come from their
counters where kept — one key each — not from a sum over every hold of the day or month
(docs/budgets.md, "Cost per step"); the session's own is summed. Real SQLite store."""

from __future__ import annotations

from pathlib import Path

from xclaw.llm.prices import PriceTable
from xclaw.recorder.caller import StoreCaller
from xclaw.runtime.budgets import REFRESH_S, Budgets
from xclaw.store.budgets.sql import SLICE
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import BeginStep, Hold, Kind, Shared


async def test_shared_totals_are_read_from_their_counters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    try:
        now = [1_796_601_600.0]  # 2026-12-07 00:00 UTC
        budgets = Budgets(
            {"session_tokens": 10**9, "total_daily_tokens": 10**9},
            PriceTable({}),
            clock=lambda: now[0],
        )
        sid = store.record.create_session(title="t").session_id
        reader = StoreCaller(store)
        gate = await budgets.gate_for(reader, sid)
        assert gate is not None
        day = "td:2026-12-07"
        hold = gate.reserve(500, 0.0)
        assert isinstance(hold, Hold) and hold.shared == (
            Shared("total_daily_tokens", day, "tokens", 10**9),
        )
        step = NewStep(step_type=StepType.LLM_CALL, name="script:x", input_data={})
        store.record.write(BeginStep(session_id=sid, step=step, hold=hold))
        # The run's first hold claimed a slice for its allowance (docs/budgets.md).
        assert store.budgets.budget_counters([day]) == {day: (500 * SLICE, 0.0)}
        # The counter says something the holds do not (as no write ever makes it): what the
        # next turn loads is the counter's, read by its key; the session's is the holds' sum.
        store.budgets._write(  # type: ignore[attr-defined]
            lambda c: c.execute("UPDATE budget_counters SET tokens=4242"), Kind.BUDGET_SET
        )
        now[0] += REFRESH_S
        again = await budgets.gate_for(reader, sid)
        assert again is not None
        assert budgets.ledger.spent(day, "tokens") == 4242
        assert budgets.ledger.spent(f"s:{sid}", "tokens") == 500
    finally:
        store.close()
