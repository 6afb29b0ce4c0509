"""Settled by evidence: a call cut short by a crash whose tool declares a settle check is
settled by asking the check — recorded as a step — before anyone is asked. Real `xclaw run`
processes SIGKILLed before the effect and between the effect and its recording, a real outside
ledger (SQLite), and the headless run's lack of a terminal as the witness that nobody was
asked (it would have denied the question)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ledger import Ledger, pay
from tests.runtime.test_crash import Scenario, kill
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


def _scenario(tmp: Path, ledger: Ledger, tool: str = "record_payment") -> Scenario:
    sc = Scenario(
        tmp,
        [
            {"tool_calls": [pay("A-1", tool=tool)]},
            {"tool_calls": [pay("B-2", tool=tool)]},
            {"text": "all done"},
        ],
    )
    ledger.install(tmp)
    sc.env.update(ledger.env())
    return sc


def _killed_mid_call(sc: Scenario, ledger: Ledger, pause: str, *, after_effect: bool) -> None:
    sc.env[pause] = "60"
    proc = sc.start("--approval", "yolo", "pay both")
    sc.wait_for("SELECT 1 FROM traces WHERE step_type='tool_call' AND status='running'", 60)
    if after_effect:  # aimed: the effect is there, its step still `running`
        wait_until(lambda: "A-1" in ledger.refs(), "the payment is in the ledger", 60)
    kill(proc)
    del sc.env[pause]


def _checks(sc: Scenario) -> list[dict[str, object]]:
    return [
        json.loads(r[0])
        for r in sc.query("SELECT input_data FROM traces WHERE name='settle_check' ORDER BY seq")
    ]


def test_an_interrupted_call_whose_effect_happened_is_settled_by_its_check_without_a_question(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path)
    sc = _scenario(tmp_path, ledger)
    _killed_mid_call(sc, ledger, "PAY_PAUSE_AFTER", after_effect=True)
    out = sc.resume()
    assert "may or may not have run" not in out
    assert "its settle check shows it ran" in out
    assert "all done" in out
    assert ledger.refs() == ["A-1", "B-2"]  # applied once each
    assert ledger.calls() == ["pay A-1", "pay B-2"]
    assert sc.query("SELECT 1 FROM traces WHERE name='approval'") == []  # nobody was asked
    (check,) = _checks(sc)
    assert check["outcome"] == "done" and check["tool"] == "record_payment"
    rows = sc.query(
        "SELECT status, error_message, output_data FROM traces WHERE name='record_payment' ORDER BY seq"
    )
    assert [r[:2] for r in rows] == [
        ("failed", "interrupted"),
        ("completed", None),
        ("completed", None),
    ]
    # The settling step holds what the call returned, as the check found it.
    assert json.loads(json.loads(rows[1][2]))["ref"] == "A-1"
    alert = json.loads(sc.query("SELECT input_data FROM traces WHERE name='resume'")[0][0])
    assert alert["mayHaveRun"] == [] and len(alert["settledByCheck"]) == 1
    sc.check_record()


def test_an_interrupted_call_whose_effect_did_not_happen_runs_again_at_once(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path)
    sc = _scenario(tmp_path, ledger)
    _killed_mid_call(sc, ledger, "PAY_PAUSE_BEFORE", after_effect=False)
    assert ledger.refs() == []
    out = sc.resume()
    assert "may or may not have run" not in out
    assert "its settle check says not done): it runs now" in out
    assert ledger.refs() == ["A-1", "B-2"]  # not lost: run again, once
    assert sc.query("SELECT 1 FROM traces WHERE name='approval'") == []
    (check,) = _checks(sc)
    assert check["outcome"] == "not_done"
    alert = json.loads(sc.query("SELECT input_data FROM traces WHERE name='resume'")[0][0])
    assert alert["notDone"] == alert["retrying"] and len(alert["notDone"]) == 1
    sc.check_record()


def test_without_a_check_the_call_still_goes_to_a_person(tmp_path: Path) -> None:
    """The old rule where nothing tells: "may or may not have run", re-run only if the model
    asks again and a person approves (here no terminal: nobody can approve)."""
    ledger = Ledger(tmp_path)
    sc = _scenario(tmp_path, ledger, tool="record_payment_unchecked")
    _killed_mid_call(sc, ledger, "PAY_PAUSE_AFTER", after_effect=True)
    out = sc.resume()
    assert "may or may not have run" in out
    assert _checks(sc) == []
    assert ledger.refs() == ["A-1", "B-2"]
