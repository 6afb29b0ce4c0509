"""Checked from outside: a real `xclaw serve`, a session with a token cap driven through the
Python API's remote client, the HTTP API's budget routes. The run stops in state `budget`
(not Failed) and every client says which cap, what was spent and what is left; a grant over
HTTP resumes it where it stopped, to its answer."""

from __future__ import annotations

from pathlib import Path

import httpx

import xclaw
from tests.gateway.harness import Server, write_script
from tests.runtime.harness import sh
from tests.waiting import until

TURNS = [
    {"tool_calls": [sh("echo one")]},
    {"tool_calls": [sh("echo two")]},
    {"tool_calls": [sh("echo three")]},
    {"text": "counted to three"},
]


async def test_a_capped_session_waits_in_budget_and_a_grant_over_http_resumes_it(
    tmp_path: Path,
) -> None:
    server = Server(
        root=tmp_path,
        script=write_script(tmp_path / "script.json", TURNS),
        approval="yolo",
        config_extra="max_tokens: 100\nbudgets:\n  session_tokens: 400\n",
    )
    server.start()
    try:
        api = httpx.AsyncClient(
            base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
        )
        async with xclaw.connect(server.http, token=server.token) as agent, api:
            session = await agent.new_session(title="count")
            result = await session.send("count").result()
            assert result.reply is None and result.error is None  # not Failed
            budget = result.budget
            assert budget is not None and budget.cap == "session_tokens"
            assert budget.limit == 400 and budget.spent <= 400
            assert budget.left == 400 - budget.spent and budget.spent + budget.needed > 400
            notices = [n.content for n in result.of_type("notice")]
            assert any(n.startswith("[budget]") and "left" in n for n in notices)
            info = (await api.get(f"/sessions/{session.id}")).json()
            assert info["status"] == "Running" and info["state"] == "budget"
            assert "session_tokens: spent" in info["stateText"]

            shown = (await api.get(f"/budgets/{session.id}")).json()
            [cap] = shown["caps"]
            assert cap["cap"] == "session_tokens" and cap["spent"] == budget.spent
            assert (await api.get("/budgets/no-such-session")).status_code == 404
            wrong = await api.put("/budgets/total", json={"caps": {"session_tokens": 5}})
            assert wrong.status_code == 400 and "takes no cap" in wrong.json()["error"]

            granted = await api.post(f"/budgets/session:{session.id}/grant", json={"tokens": 5000})
            assert granted.status_code == 200, granted.text
            assert granted.json()["set"]["grantedTokens"] == 5000

            async def answered() -> bool:
                info = (await api.get(f"/sessions/{session.id}")).json()
                return bool(info["status"] == "Success")

            await until(answered, "the run's answer after the grant")
            steps = (await api.get(f"/sessions/{session.id}/steps?limit=100")).json()["steps"]
            shell = [s["input"]["command"] for s in steps if s["type"] == "tool_call"]
            assert shell == ["echo one", "echo two", "echo three"]  # each once, in order
            calls = [s for s in steps if s["type"] == "llm_call"]
            assert len(calls) == 4 and all(s["status"] == "completed" for s in calls)
    finally:
        server.kill()
