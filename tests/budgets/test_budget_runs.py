"""A session under a token cap stops in state `budget` — not Failed — before the call that
would go past the cap, and goes on where it stopped after a grant (docs/budgets.md). Real
runtime, real SQLite store, the scripted model."""

from __future__ import annotations

import sqlite3
from typing import Any

from tests.runtime.harness import sh
from tests.waiting import until
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.scripted import ScriptedModel
from xclaw.runtime.runtime import Runtime
from xclaw.store.steps.model import Status, StepType

TURNS = [
    {"tool_calls": [sh("echo one")]},
    {"tool_calls": [sh("echo two")]},
    {"tool_calls": [sh("echo three")]},
    {"text": "counted to three"},
]


def counted(h: Any, sid: str) -> tuple[int, list[tuple[int, int, int, bool]]]:
    holds = h.store.budgets.budget_holds(sid)
    return sum(spent if settled else held for _, held, spent, settled in holds), holds


async def test_a_token_cap_stops_the_session_in_budget_and_a_grant_resumes_it(make) -> None:
    h = make(TURNS, max_tokens=100)
    # First without a cap: what each call reserves and costs.
    free = await h.ask("count")
    assert h.store.record.get_session(free).status is Status.SUCCESS
    _, holds = counted(h, free)
    assert holds == []  # no cap: no holds written at all
    calls = [s for s in h.store.record.steps(free) if s.step_type is StepType.LLM_CALL]
    assert len(calls) == 4
    await h.close()

    h = make(TURNS, max_tokens=100, budgets={"session_tokens": 400})
    sid = await h.ask("count")
    session = h.store.record.get_session(sid)
    assert session.status is Status.RUNNING and session.awaiting_input
    assert session.state_key == "budget", session.state_text
    detail = session.metadata["budget"]
    assert detail["cap"] == "session_tokens" and detail["limit"] == 400
    spent, holds = counted(h, sid)
    # Stopped exactly at the cap: what was counted stays within it, and the call not made
    # would have gone past it.
    assert spent <= 400
    assert detail["spent"] == spent and detail["left"] == 400 - spent
    assert spent + detail["needed"] > 400
    assert all(settled for *_, settled in holds)
    made = [s for s in h.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert [s.seq for s in made] == [seq for seq, *_ in holds]  # one hold per call made
    notices = [f["content"] for f in h.of("notice") if f["content"].startswith("[budget]")]
    assert notices and "session_tokens" in notices[0] and "left" in notices[0]
    assert not h.of("error")

    # A grant: the run goes on where it stopped, to its answer.
    shown = await h.runtime.set_budget(sid, grant_tokens=2000)
    assert shown["set"]["grantedTokens"] == 2000
    await until(
        lambda: h.store.record.get_session(sid).status is Status.SUCCESS,
        "the run's answer after the grant",
        in_thread=True,
    )
    spent_after, holds_after = counted(h, sid)
    made = [s for s in h.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert len(made) == 4 and len(holds_after) == 4  # nothing called or counted twice
    assert [s.seq for s in made] == [seq for seq, *_ in holds_after]
    assert spent_after <= 2400
    shell = [s for s in h.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
    assert [s.input_data["command"] for s in shell] == ["echo one", "echo two", "echo three"]


async def test_under_a_cap_the_model_is_called_only_once_its_hold_is_committed(make) -> None:
    """What another connection reads of the database when the provider receives each call:
    its hold, and its `running` step, are committed already (a kill then loses neither)."""
    h = make(TURNS, max_tokens=100, budgets={"session_tokens": 100000})
    seen: list[tuple[int, int]] = []
    db = h.settings.database

    class Watching(ScriptedModel):
        async def complete(self, request: LLMRequest, on_event: Any = None) -> LLMResponse:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                holds = conn.execute("SELECT count(*) FROM budget_holds").fetchone()[0]
                running = conn.execute(
                    "SELECT count(*) FROM traces WHERE step_type='llm_call' AND status='running'"
                ).fetchone()[0]
            seen.append((int(holds), int(running)))
            return await super().complete(request, on_event)

    await h.runtime.shutdown()
    h.runtime = Runtime(h.store, h.settings, model=Watching(h.tmp / "script.json"))
    sid = await h.ask("count")
    assert h.store.record.get_session(sid).status is Status.SUCCESS
    # The nth call finds n holds committed, its own among them, and its step running.
    assert seen == [(1, 1), (2, 1), (3, 1), (4, 1)]


async def test_under_a_cap_a_calls_hold_shares_the_commit_of_the_tool_result_before_it(
    make,
) -> None:
    """The hold is committed before its call, but not in a commit of its own: the tool's
    result, written just before, is not awaited under a cap, so the two commit together. The
    same run commits as often with a cap as without one (before: one more commit a call)."""
    turns = [{"tool_calls": [sh(f"echo {i}")]} for i in range(8)] + [{"text": "done"}]
    commits = {}
    for label, budgets in (("free", None), ("capped", {"session_tokens": 10**9})):
        h = make(turns, max_tokens=100, **({} if budgets is None else {"budgets": budgets}))
        before = h.store.record.commits
        sid = await h.ask("count")
        assert h.store.record.get_session(sid).status is Status.SUCCESS
        commits[label] = h.store.record.commits - before
        if budgets is not None:
            assert len(h.store.budgets.budget_holds(sid)) == 9
            # Clients heard of every tool's result, in order, each after its commit.
            done = [f for f in h.of("tool") if f.get("state") == "completed"]
            assert [f["output"].strip() for f in done] == [str(i) for i in range(8)]
        await h.close()
    # Nine calls: one more commit per call before (the hold's own); now at most the first
    # call's (its user message is not awaited either) and one a loaded machine may split.
    assert commits["capped"] - commits["free"] <= 2, commits
