"""`xclaw budget show|set|grant` (the real command, in its own process) and xclaw.yaml's
`budgets:` refused in words like every other section."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.gateway.harness import clean_env, xclaw_cmd
from xclaw.errors import EXIT_USAGE
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import BUDGET_KEY, Status
from xclaw.store.steps.writes import BudgetStop

DETAIL = {"cap": "session_tokens", "unit": "tokens", "limit": 100, "spent": 90, "left": 10}


def _run(tmp: Path, *args: str, yaml: str | None = None) -> subprocess.CompletedProcess[str]:
    if yaml is not None:
        (tmp / "xclaw.yaml").write_text(yaml)
    return subprocess.run(
        [*xclaw_cmd(), "budget", *args],
        capture_output=True,
        text=True,
        env=clean_env(XCLAW_HOME=str(tmp / "home"), NO_COLOR="1"),
        cwd=tmp,
        timeout=60,
        check=False,
    )


def test_grant_lets_a_session_waiting_for_a_budget_go_on(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with SQLiteStore(db) as store:
        sid = store.record.create_session(title="t").session_id
        store.record.transition(sid, Status.RUNNING)
        store.record.write(BudgetStop(session_id=sid, detail=DETAIL))
        assert store.record.get_session(sid).state_key == "budget"
    yaml = "budgets:\n  session_tokens: 100\n  total_daily_usd: 5\n"
    shown = _run(tmp_path, "show", sid[:8], "--json", "--db", str(db), yaml=yaml)
    assert shown.returncode == 0, shown.stderr
    caps = {c["cap"]: c for c in json.loads(shown.stdout)["caps"]}
    assert caps["session_tokens"]["limit"] == 100 and caps["session_tokens"]["left"] == 100
    assert caps["total_daily_usd"]["limit"] == 5.0
    granted = _run(tmp_path, "grant", sid, "--tokens", "500", "--db", str(db))
    assert granted.returncode == 0, granted.stderr
    assert "goes on where it stopped" in granted.stderr
    assert "session_tokens: spent 0 tokens of 600 tokens, 600 tokens left" in granted.stdout
    with SQLiteStore(db) as store:
        s = store.record.get_session(sid)
        assert s.status is Status.RUNNING and not s.awaiting_input  # resumes when opened
        assert BUDGET_KEY not in s.metadata
        assert store.budgets.budget_rows()[f"session:{sid}"].granted_tokens == 500


def test_set_takes_the_caps_of_its_target_and_refuses_the_others(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    SQLiteStore(db).close()
    ok = _run(tmp_path, "set", "user:alice", "--user-daily-tokens", "1000", "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    assert "user_daily_tokens: spent 0 tokens of 1000 tokens" in ok.stdout
    wrong = _run(tmp_path, "set", "total", "--session-tokens", "5", "--db", str(db))
    assert wrong.returncode == EXIT_USAGE
    assert "total takes no cap 'session_tokens'" in wrong.stderr
    bad = _run(tmp_path, "set", "total", "--total-daily-tokens", "1.5", "--db", str(db))
    assert bad.returncode == EXIT_USAGE and "whole" in bad.stderr
    off = _run(tmp_path, "set", "total", "--total-daily-usd", "none", "--db", str(db))
    assert off.returncode == 0, off.stderr
    with SQLiteStore(db) as store:
        rows = store.budgets.budget_rows()
        assert rows["user:alice"].caps == {"user_daily_tokens": 1000}
        assert rows["total"].caps == {"total_daily_usd": None}


def test_a_misspelt_or_negative_cap_in_xclaw_yaml_is_refused_in_words(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    SQLiteStore(db).close()
    typo = _run(tmp_path, "show", "--db", str(db), yaml="budgets:\n  session_token: 5\n")
    assert typo.returncode == EXIT_USAGE
    assert "budgets.session_token" in typo.stderr and "session_tokens" in typo.stderr
    negative = _run(tmp_path, "show", "--db", str(db), yaml="budgets:\n  session_usd: -1\n")
    assert negative.returncode == EXIT_USAGE and "budgets.session_usd" in negative.stderr
