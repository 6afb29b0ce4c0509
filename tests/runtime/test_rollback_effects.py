"""Rollback undoes what can be undone outside the workspace, and says exactly what cannot
(xclaw/runtime/rollbacks.py): a Python tool recording payments in a real ledger — a SQLite file
and a table in the local PostgreSQL server — with a delete declared as its compensation; an
undeclared twin that is irreversible. In process, on the runtime the gateway and the Python
API use; the kills are in test_rollback_kills.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ledger import Ledger, pay, pg_url
from xclaw.errors import CompensationFailed, IrreversibleEffects, RollbackPending
from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import Step, StepStatus, StepType


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Ledger]:
    url = None
    if request.param == "postgres":
        url = pg_url()
        if not url:
            pytest.skip("set XCLAW_TEST_PG_URL for the PostgreSQL ledger")
    led = Ledger(tmp_path, url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key, value in led.env().items():
        monkeypatch.setenv(key, value)
    try:
        yield led
    finally:
        led.close()


def harness(make: Any, ledger: Ledger, turns: list[dict[str, Any]], **settings: Any) -> Any:
    name = ledger.install(ledger.tmp)
    tools = [
        f"{name}:{t}"
        for t in ("record_payment", "record_payment_unchecked", "record_payment_strict")
    ]
    return make(turns, tools=tools, **settings)


def payments(*refs: str, tool: str = "record_payment") -> list[dict[str, Any]]:
    return [{"text": f"paying {r}", "tool_calls": [pay(r, tool=tool)]} for r in refs] + [
        {"text": "paid"}
    ]


def of(steps: list[Step], name: str) -> list[Step]:
    return [s for s in steps if s.step_type is StepType.SYSTEM_ALERT and s.name == name]


def first_user(steps: list[Step]) -> str:
    return next(s.display_id for s in steps if s.step_type is StepType.USER_INPUT)


async def test_rollback_undoes_the_payments_in_reverse_order_and_keeps_the_record(
    make: Any, ledger: Ledger
) -> None:
    h = harness(make, ledger, payments("A", "B"))
    sid = await h.ask("pay A and B")
    assert ledger.refs() == ["A", "B"]
    steps = h.store.record.steps(sid)
    target = first_user(steps)
    preview = await h.runtime.rollback_preview(sid, target)
    assert [e.tool for e in preview.to_undo] == ["record_payment", "record_payment"]
    assert [e.input["ref"] for e in preview.to_undo] == ["B", "A"]  # the latest first
    assert preview.not_undone == []
    effects = {e.step_id for e in preview.to_undo}

    outcome = await h.runtime.rollback(sid, target)

    assert ledger.refs() == []
    assert ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]
    after = h.store.record.steps(sid)
    # The effects' own steps are gone; the plan and the compensations stay, as the record.
    assert not effects & {s.display_id for s in after}
    (plan,) = of(after, "rollback")
    assert plan.status is StepStatus.COMPLETED
    assert plan.output_data["compensated"] == [c.display_id for c in outcome.compensated]
    comps = of(after, "compensation")
    assert [c.status for c in comps] == [StepStatus.COMPLETED, StepStatus.COMPLETED]
    assert [c.input_data["effect"] for c in comps] == [
        e.step_id for e in preview.to_undo
    ]  # beside the effect each undid (its parent then, its id kept)
    assert all(c.parent_step_id is None for c in comps)  # the effect's step is deleted
    assert comps[0].input_data["by"]["kind"] == "person"
    assert "reversed: 1 row(s) deleted" in comps[0].output_data
    # `xclaw steps` / `/steps` say it in words: what undid what, who asked.
    from xclaw.views.record import format_steps

    listing = format_steps(after, sid, PriceTable.with_overrides(None))
    assert f"rollback to before {target}: 2 to undo · asked by" in listing
    assert f"undoes {comps[0].input_data['effect']} record_payment by" in listing
    session = h.store.record.get_session(sid)
    assert session.awaiting_input
    # The conversation (memory) is rewound: nothing of the payments is in it.
    assert h.runtime.history_frame(sid)["messages"] == []


async def test_an_irreversible_effect_is_named_and_needs_explicit_acceptance(
    make: Any, ledger: Ledger
) -> None:
    turns = [
        {"tool_calls": [pay("A")]},
        {"tool_calls": [pay("M", tool="record_payment_unchecked")]},
        {"text": "done"},
    ]
    h = harness(make, ledger, turns)
    sid = await h.ask("go")
    target = first_user(h.store.record.steps(sid))
    before = h.store.record.steps(sid)
    with pytest.raises(IrreversibleEffects) as refused:
        await h.runtime.rollback(sid, target)
    assert "record_payment_unchecked (irreversible)" in refused.value.message
    assert refused.value.effects["irreversible"][0]["tool"] == "record_payment_unchecked"
    # Nothing was done: no plan, nothing undone, nothing rewound.
    assert h.store.record.steps(sid) == before
    assert ledger.refs() == ["A", "M"]

    outcome = await h.runtime.rollback(sid, target, accept_irreversible=True)
    assert ledger.refs() == ["M"]  # the irreversible one stays, and says so
    assert [e.tool for e in outcome.not_undone] == ["record_payment_unchecked"]
    (plan,) = of(h.store.record.steps(sid), "rollback")
    assert plan.input_data["acceptIrreversible"] is True
    assert len(plan.output_data["notUndone"]) == 1
    assert "NOT undone" in outcome.text()


async def test_a_failing_compensation_stops_the_rollback_consistently_then_retry_finishes_it(
    make: Any, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness(make, ledger, payments("A", "B"))
    sid = await h.ask("pay")
    target = first_user(h.store.record.steps(sid))
    monkeypatch.setenv("UNDO_FAIL", "A")
    with pytest.raises(CompensationFailed) as stopped:
        await h.runtime.rollback(sid, target)
    words = stopped.value.message
    assert "undo_payment raised RuntimeError: the ledger refuses" in words
    assert "Memory and files are not rewound" in words and "--retry" in words
    # Consistent: B undone, A not; nothing rewound; the session waits, no turn may start.
    assert ledger.refs() == ["A"]
    steps = h.store.record.steps(sid)
    assert [c.status for c in of(steps, "compensation")] == [
        StepStatus.COMPLETED,
        StepStatus.FAILED,
    ]
    assert of(steps, "rollback")[0].status is StepStatus.RUNNING
    assert [s.name for s in steps if s.step_type is StepType.TOOL_CALL] == ["record_payment"] * 2
    assert h.store.record.get_session(sid).awaiting_input
    with pytest.raises(RollbackPending, match="--retry"):
        await h.runtime.send(sid, "something else")
    with pytest.raises(RollbackPending):  # another target: this one first
        await h.runtime.rollback(sid, steps[-1].display_id)
    # The automatic path never retries a failed one (a restart, a reconnect).
    assert await h.runtime.resume_if_needed(sid) is False

    monkeypatch.delenv("UNDO_FAIL")
    outcome = await h.runtime.rollback(sid, target, retry=True)
    assert ledger.refs() == []
    assert ledger.calls().count("undo B") == 1  # completed ones are not run again
    comps = of(h.store.record.steps(sid), "compensation")
    assert [c.status for c in comps] == [
        StepStatus.COMPLETED,
        StepStatus.FAILED,
        StepStatus.COMPLETED,
    ]
    assert len(outcome.compensated) == 2


async def test_an_abandoned_rollback_undoes_nothing_more_and_rewinds_nothing(
    make: Any, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness(make, ledger, [*payments("A", "B")[:-1], {"text": "paid"}, {"text": "ok"}])
    sid = await h.ask("pay")
    target = first_user(h.store.record.steps(sid))
    monkeypatch.setenv("UNDO_FAIL", "A")
    with pytest.raises(CompensationFailed):
        await h.runtime.rollback(sid, target)
    plan = await h.runtime.abandon_rollback(sid)
    assert plan.status is StepStatus.FAILED and "abandoned by" in (plan.error_message or "")
    assert ledger.refs() == ["A"]  # B stays undone, A stays done, both recorded
    await h.turn(sid, "carry on")  # the session is usable again
    assert h.store.record.get_session(sid).status.value == "Success"


async def test_a_hanging_compensation_fails_in_bounded_time(
    make: Any, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xclaw.tools.traits import ToolPolicy

    h = harness(
        make,
        ledger,
        payments("A"),
        tool_policies={"record_payment": ToolPolicy(effect_timeout_s=0.5)},
    )
    sid = await h.ask("pay")
    monkeypatch.setenv("UNDO_PAUSE", "3")
    with pytest.raises(CompensationFailed, match=r"did not finish within 0\.5 s"):
        await h.runtime.rollback(sid, first_user(h.store.record.steps(sid)))


async def test_a_missing_compensation_is_an_effect_nothing_undoes(
    make: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """The tool is gone from xclaw.yaml by the time of the rollback: its effect is named as
    one nothing here undoes, and the rollback needs the explicit word."""
    h = harness(make, ledger, payments("A"))
    sid = await h.ask("pay")
    del h.runtime.toolbox.tools["record_payment"]
    preview = await h.runtime.rollback_preview(sid, first_user(h.store.record.steps(sid)))
    (gone,) = preview.not_undone
    assert gone.why == "its tool record_payment is not configured here"
    with pytest.raises(IrreversibleEffects):
        await h.runtime.rollback(sid, first_user(h.store.record.steps(sid)))
    assert ledger.refs() == ["A"]


async def test_a_fork_leaves_the_originals_effects_to_the_original(
    make: Any, ledger: Ledger
) -> None:
    h = harness(make, ledger, [*payments("A")[:-1], {"text": "paid"}, {"text": "next"}])
    sid = await h.ask("pay")
    steps = h.store.record.steps(sid)
    fork = await h.runtime.fork(sid, steps[-1].display_id)
    target = first_user(h.store.record.steps(fork.session_id))
    preview = await h.runtime.rollback_preview(fork.session_id, target)
    (owned,) = preview.not_undone
    assert sid in owned.why and "owns it" in owned.why
    with pytest.raises(IrreversibleEffects):
        await h.runtime.rollback(fork.session_id, target)
    await h.runtime.rollback(fork.session_id, target, accept_irreversible=True)
    assert ledger.refs() == ["A"]  # the fork undid nothing of the original's
    await h.runtime.rollback(sid, first_user(steps))
    assert ledger.refs() == []  # the original did


async def test_the_gateway_command_previews_first_and_runs_on_confirmation(
    make: Any, ledger: Ledger
) -> None:
    from xclaw.gateway.commands import CommandRunner
    from xclaw.wire.frames import undeclared
    from xclaw.wire.protocol import parse_command

    turns = [
        {"tool_calls": [pay("A")]},
        {"tool_calls": [pay("M", tool="record_payment_unchecked")]},
        {"text": "done"},
    ]
    h = harness(make, ledger, turns)
    sid = await h.ask("go")
    runner = CommandRunner(h.runtime, h.store)
    target = first_user(h.store.record.steps(sid))

    async def run(text: str) -> list[dict[str, Any]]:
        cmd = parse_command(text)
        assert cmd is not None
        result = await runner.run(sid, cmd)
        return result.reply + result.broadcast

    # Forking past the effects says they stay the original's.
    last = h.store.record.steps(sid)[-1].display_id
    forked = await run(f"/fork {last}")
    fork_note = next(f["content"] for f in forked if f["type"] == "notice")
    assert "the new session holds 2 outside effects of the original" in fork_note
    assert f"the original session {sid} still owns them" in fork_note

    shown = await run(f"/rollback {target}")
    notice = next(f["content"] for f in shown if f["type"] == "notice")
    assert "undone by" in notice and "record_payment" in notice
    assert "NOT undone" in notice and "record_payment_unchecked" in notice
    assert f"/rollback {target} --accept-irreversible" in notice
    (frame,) = [f for f in shown if f["type"] == "rollback_preview"]
    assert undeclared(frame) == []
    assert frame["compensable"][0]["compensation"]["action"].endswith("undo_payment")
    assert ledger.refs() == ["A", "M"]  # a preview does nothing

    with pytest.raises(IrreversibleEffects):
        await run(f"/rollback {target} --confirm")
    done = await run(f"/rollback {target} --accept-irreversible")
    rolled = next(f for f in done if f["type"] == "rolledback")
    assert undeclared(rolled) == []
    assert rolled["compensated"][0]["tool"] == "record_payment"
    assert rolled["notUndone"][0]["tool"] == "record_payment_unchecked"
    assert ledger.refs() == ["M"]
    json.dumps(done)
