"""A person's cap across workers (docs/budgets.md, "Several workers"): two real `xclaw serve`
workers on one PostgreSQL database run six sessions of one person at once against her
`user_daily_tokens` cap. Each hold is checked on the person's counter in its own
transaction (the counter's row locked), so what her holds count never passes the cap —
however the two workers' calls interleave — and every call made has exactly one hold. Under
a cap far above what they spend, the runs on both workers claim slices of its room at once
and draw on them (docs/budgets.md, "Allowances"); when all are done, every allowance is
given back and the counter is what the holds count."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.harness import Client, clean_env, write_script, xclaw_cmd
from tests.gateway.test_workers import PgServer
from tests.runtime.harness import sh
from tests.store.conftest import PostgresBackend, postgres_url
from tests.waiting import until

pytestmark = [pytest.mark.postgres]

CAP = 2500
# Quick calls (an instant model, `echo`): both workers' sessions reserve within the same
# second, far more than the cap between them.
TURNS = [{"tool_calls": [sh(f"echo {i}")]} for i in range(10)]
TURNS.append({"text": "done"})
CONFIG = f"max_tokens: 100\nbudgets:\n  user_daily_tokens: {CAP}\n"
SESSIONS_PER_WORKER = 3


# Far enough above what the six sessions spend (~10 k) for the first claims to be slices
# (16 slices' room past them, a slice ~4 reservations of ~280 tokens), near for the rest.
FAR_CAP = 30000


@pytest.fixture
def workers(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[list[PgServer], PostgresBackend]]:
    config = getattr(request, "param", CONFIG)
    pg = PostgresBackend(postgres_url())
    script = write_script(tmp_path / "script.json", TURNS)
    servers = []
    for i in range(2):
        server = PgServer(
            root=tmp_path / f"srv{i}",
            script=script,
            approval="yolo",
            db=pg.url,
            shared_workspace=tmp_path / "workspaces",
        )
        server.config_extra = config
        servers.append(server)
    yield servers, pg
    for server in servers:
        server.kill()
    pg.drop()


async def _run_all(
    servers: list[PgServer], pg: PostgresBackend, seen: list[str] | None = None
) -> list[str]:
    """Alice's six sessions, three on each worker, all sent at once, until each answered or
    stopped at the cap; `seen`: the allowances' rows seen meanwhile."""
    for server in servers:
        server.root.mkdir(parents=True, exist_ok=True)
        server.start()
    made = await asyncio.to_thread(
        subprocess.run,
        [*xclaw_cmd(), "users", "add", "alice", "--role", "member", "--db", pg.url],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(XCLAW_HOME=str(servers[0].home), NO_COLOR="1"),
        check=True,
    )
    token = made.stdout.strip()
    assert token.startswith("xcu_"), made.stdout + made.stderr

    clients = []
    for server in servers:
        for _ in range(SESSIONS_PER_WORKER):
            client = await Client.open(server, token=token)
            await client.attach(None)
            clients.append(client)
    # All at once: every session's first call is reserved while the others' are in flight.
    await asyncio.gather(
        *(
            c.send({"type": "message", "sessionId": c.session_id, "content": "count"})
            for c in clients
        )
    )
    sids = [c.session_id for c in clients]

    def ended() -> bool:
        rows = pg.query(
            "SELECT current_status, awaiting_input FROM sessions WHERE session_id = ANY(?)",
            (sids,),
        )
        return len(rows) == len(sids) and all(
            s == "Success" or (s == "Running" and bool(w)) for s, w in rows
        )

    def ended_watching() -> bool:
        if seen is not None:
            rows = pg.query(
                "SELECT scope FROM budget_counters WHERE substr(scope, 1, 2) = 'a:'", ()
            )
            seen.extend(str(r[0]) for r in rows)
        return ended()

    def said() -> str:
        rows = pg.query(
            "SELECT session_id, current_status, awaiting_input FROM sessions WHERE"
            " session_id = ANY(?)",
            (sids,),
        )
        logs = "".join(s.logs()[-3000:] for s in servers)
        return f"every session's answer or its stop at the cap: {rows}\n{logs}"

    await until(ended_watching, said, 120.0, in_thread=True)
    return sids


async def test_a_persons_daily_cap_holds_across_two_workers(
    workers: tuple[list[PgServer], PostgresBackend],
) -> None:
    servers, pg = workers
    sids = await _run_all(servers, pg)
    holds = pg.query(
        "SELECT h.session_id, h.seq, h.owner, h.held_tokens, h.spent_tokens, h.settled"
        " FROM budget_holds h ORDER BY h.session_id, h.seq",
        (),
    )
    calls = pg.query(
        "SELECT session_id, seq FROM traces WHERE step_type = 'llm_call' ORDER BY session_id, seq",
        (),
    )
    # Every call made has exactly one hold, counted on alice.
    assert [(h[0], h[1]) for h in holds] == [(c[0], c[1]) for c in calls]
    assert {h[2] for h in holds} == {"alice"}
    # Both workers made calls for her.
    workers_seen = pg.query("SELECT DISTINCT worker FROM traces WHERE step_type = 'llm_call'", ())
    assert len(workers_seen) == 2, workers_seen
    counted = sum(spent if settled else held for _, _, _, held, spent, settled in holds)
    largest = max(h[3] for h in holds)
    # What her holds count stays within her cap (each checked on the counter in its own
    # transaction); what was billed, within cap + the largest reservation.
    assert counted <= CAP, (counted, CAP, len(holds))
    assert counted <= CAP + largest
    # The cap stopped someone: she asked for far more than it allows.
    states = pg.query(
        "SELECT current_status, awaiting_input, metadata FROM sessions WHERE session_id = ANY(?)",
        (sids,),
    )
    stopped = [
        json.loads(m) if isinstance(m, str) else m for s, w, m in states if s == "Running" and w
    ]
    assert stopped, states
    assert all(m["budget"]["cap"] == "user_daily_tokens" for m in stopped)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    [(tokens,)] = pg.query(
        "SELECT tokens FROM budget_counters WHERE scope = ?", (f"ud:alice:{day}",)
    )
    assert tokens == counted  # the counter is what the holds count


@pytest.mark.parametrize(
    "workers",
    [f"max_tokens: 100\nmax_iterations: 50\nbudgets:\n  user_daily_tokens: {FAR_CAP}\n"],
    indirect=True,
)
async def test_runs_on_two_workers_draw_on_allowances_and_give_them_back(
    workers: tuple[list[PgServer], PostgresBackend],
) -> None:
    servers, pg = workers
    seen: list[str] = []
    sids = await _run_all(servers, pg, seen)
    # The runs claimed slices on both workers at once (their allowances' rows were there).
    assert seen, "no run claimed an allowance"
    states = pg.query("SELECT current_status FROM sessions WHERE session_id = ANY(?)", (sids,))
    assert [s for (s,) in states] == ["Success"] * len(sids)
    holds = pg.query("SELECT held_tokens, spent_tokens, settled FROM budget_holds", ())
    assert len(holds) == 11 * len(sids)
    counted = sum(spent if settled else held for held, spent, settled in holds)
    assert counted <= FAR_CAP
    # Every allowance given back (the answer's commit): the counter is what the holds count.
    day = time.strftime("%Y-%m-%d", time.gmtime())

    def given_back() -> bool:
        return not pg.query(
            "SELECT scope FROM budget_counters WHERE substr(scope, 1, 2) = 'a:'", ()
        )

    await until(given_back, "every allowance given back", 30.0, in_thread=True)
    [(tokens,)] = pg.query(
        "SELECT tokens FROM budget_counters WHERE scope = ?", (f"ud:alice:{day}",)
    )
    assert tokens == counted
