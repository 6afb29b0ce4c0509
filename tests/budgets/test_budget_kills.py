"""A kill matrix over reservations and settlements (docs/budgets.md, "Counted once"): a real
`xclaw serve` is SIGKILLed while a model call is in flight (its hold written, not settled)
and while a tool runs (the call before it settled, the next not reserved), again after each
restart, on SQLite and on PostgreSQL — there also with two workers, the one driving the
session killed each time (and restarted) and whichever worker's sweep comes first taking it
over. Whatever the kills, every call made has exactly one
hold (nothing counted twice), each finished call's hold is settled at what it cost and each
killed one stays at its reservation, the counted spend stays within the cap (so what was
billed stays within cap + the largest reservation), and no tool ran twice. A deployment's cap
far above the session's makes every run claim a slice of its room (docs/budgets.md,
"Allowances"), so each kill strands a run's allowance: the session's next run gives it back,
a restarted worker's rebuilt counter counts it meanwhile, and at the end the counter is
exactly what the holds count (or absent: a worker restarted after the last hold dropped it,
to be rebuilt by the next)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Client, Server, write_script
from tests.gateway.test_workers import PgServer
from tests.runtime.harness import sh
from tests.store.conftest import PostgresBackend, postgres_url
from tests.waiting import until

CAP = 1300
TOTAL = 10**7
# Each call sleeps in the model (a window with its hold unsettled), then its tool sleeps (a
# window with the call settled and the next not reserved): long enough for a poll of the
# record on a loaded machine to land in it (at 0.8 s, under load, polls missed the windows
# and the session reached its cap before the third kill).
TURNS = [{"sleep": 1.5, "tool_calls": [sh(f"sleep 1.5; echo {i}")]} for i in range(6)]
TURNS.append({"text": "done"})
CONFIG = (
    "max_tokens: 100\n"
    f"budgets:\n  session_tokens: {CAP}\n  total_daily_tokens: {TOTAL}\n"
    "lease_ttl_s: 2\nsweep_grace_s: 0\nsweep_every_s: 0.3\n"
)
# Where each kill lands, in order: a model call in flight, then a tool running, twice.
MATRIX = ("held", "settled", "held", "settled")

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


class KillablePg(PgServer):
    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(XCLAW_LEASE_TTL_S="2", XCLAW_SWEEP_GRACE_S="0", XCLAW_SWEEP_EVERY_S="0.3")
        return env


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-2-workers", marks=pytest.mark.postgres),
    ]
)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[Server], Query]]:
    """The servers (one; or two workers on one PostgreSQL database, the one driving the
    session killed each time and the other taking it over) and a way to read the record."""
    script = write_script(tmp_path / "script.json", TURNS)
    if request.param == "sqlite":
        server = Server(root=tmp_path / "srv", script=script, approval="yolo")
        server.config_extra = CONFIG
        db = server.home / "xclaw.db"

        def query(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
                return conn.execute(sql, params).fetchall()

        yield [server], query
        server.kill()
        return
    pg = PostgresBackend(postgres_url())
    servers: list[Server] = []
    for i in range(2 if request.param == "postgres-2-workers" else 1):
        server = KillablePg(
            root=tmp_path / f"srv{i}",
            script=script,
            approval="yolo",
            db=pg.url,
            shared_workspace=tmp_path / "workspaces",
        )
        server.config_extra = CONFIG
        servers.append(server)
    yield servers, pg.query
    for server in servers:
        server.kill()
    pg.drop()


def driving(servers: list[Server], query: Query, sid: str) -> Server:
    """The server whose worker holds the session's lease (`host:pid:…`)."""
    owner = query("SELECT lease_owner FROM sessions WHERE session_id=?", (sid,))[0][0]
    pid = int(str(owner).split(":")[1])
    return next(s for s in servers if s.proc is not None and s.proc.pid == pid)


def _j(value: Any) -> Any:
    """A JSON column as SQLite (text) or PostgreSQL (decoded) gives it."""
    return json.loads(value) if isinstance(value, str) else value


async def test_spend_is_counted_once_under_kills_at_reservations_and_settlements(
    served: tuple[list[Server], Query],
) -> None:
    servers, query = served
    for server in servers:
        server.root.mkdir(parents=True, exist_ok=True)
        server.start()
    client = await Client.open(servers[0])
    await client.attach(None)
    await client.send({"type": "message", "content": "count"})
    await client.until(lambda f: f.get("type") == "step")
    sid = client.session_id
    assert sid is not None
    await client.conn.close()

    def holds() -> list[tuple[Any, ...]]:
        return query(
            "SELECT h.seq, h.held_tokens, h.spent_tokens, h.settled, t.status FROM budget_holds h"
            " JOIN traces t ON t.session_id = h.session_id AND t.seq = h.seq"
            " WHERE h.session_id=? ORDER BY h.seq",
            (sid,),
        )

    def tool_running_after(seq: int) -> bool:
        rows = query(
            "SELECT 1 FROM traces WHERE session_id=? AND step_type='tool_call' AND seq>? "
            "AND status='running'",
            (sid, seq),
        )
        return bool(rows)

    def ended() -> bool:
        rows = query(
            "SELECT current_status, awaiting_input FROM sessions WHERE session_id=?", (sid,)
        )
        status, waiting = rows[0]
        return status == "Success" or (status == "Running" and bool(waiting))

    killed_after = 0
    kills = 0
    for point in MATRIX:

        def reached(point: str = point, after: int = killed_after) -> bool:
            if ended():  # it reached the cap (or its answer) first: no more points to hit
                return True
            rows = [r for r in holds() if r[0] > after]
            if not rows:
                return False
            seq, _, _, settled, status = rows[-1]
            if point == "held":
                return not settled and status == "running"
            return bool(settled) and tool_running_after(seq)

        def said(point: str = point) -> str:
            state = query("SELECT current_status, awaiting_input, lease_owner FROM sessions", ())
            logs = "".join(s.logs()[-2000:] for s in servers)
            return f"{point}: {holds()} {state}\n{logs}"

        await until(reached, said, 60.0, in_thread=True)
        if ended():
            break
        driver = driving(servers, query, sid)
        driver.kill()  # SIGKILL
        kills += 1
        killed_after = max(r[0] for r in holds())
        # A sweep resumes the session once the dead worker's lease lapses: the other
        # worker's, or this one's once restarted.
        driver.start()

    # At least one kill of each kind, the second after a restart. The matrix aims at four, but
    # a poll that misses a window lets a call pass: on two workers under load 13 the session
    # reached its cap after two kills (CI, 2026-12-06).
    assert kills >= 2, kills
    await until(ended, "the session's answer or its stop at the cap", 120.0, in_thread=True)

    rows = holds()
    calls = query(
        "SELECT seq, status, error_message, output_data FROM traces WHERE session_id=? "
        "AND step_type='llm_call' ORDER BY seq",
        (sid,),
    )
    # Every call made has exactly one hold, keyed by its step: nothing counted twice.
    assert [r[0] for r in rows] == [c[0] for c in calls]
    killed = 0
    for (seq, _held, spent, settled, _), (_, status, error, output) in zip(
        rows, calls, strict=True
    ):
        if status == "completed":
            usage = _j(output)["usage"]
            assert settled and spent == usage["input"] + usage["output"], seq
        else:  # killed while the model thought: counted at its reservation
            assert status == "failed" and error == "interrupted", (seq, status, error)
            assert not settled and spent == 0, seq
            killed += 1
    # A kill aimed at a call in flight lands there unless, on a loaded machine, the call
    # finished first (then it lands in its tool): at least one did, none counted otherwise.
    assert 1 <= killed <= (kills + 1) // 2
    counted = sum(spent if settled else held for _, held, spent, settled, _ in rows)
    largest = max(held for _, held, _, _, _ in rows)
    assert counted <= CAP  # what was billed is at most this: within cap + `largest`
    assert counted <= CAP + largest
    session = query(
        "SELECT current_status, awaiting_input, metadata FROM sessions WHERE session_id=?", (sid,)
    )[0]
    print(
        f"kills={kills} killed_calls={killed} counted={counted} largest={largest} end={session[0]}"
    )
    if session[0] == "Running":  # stopped at the cap: the call not made would have passed it
        budget = _j(session[2])["budget"]
        assert budget["spent"] == counted and counted + budget["needed"] > CAP

    # Every run's allowance given back — the killed runs' by the session's next run, the
    # last one's as it stopped — and the deployment's counter counts the holds exactly.
    def allowances() -> list[tuple[Any, ...]]:
        return query("SELECT scope FROM budget_counters WHERE substr(scope, 1, 2) = 'a:'", ())

    await until(lambda: not allowances(), lambda: str(allowances()), 30.0, in_thread=True)
    (day,) = {str(r[0]) for r in query("SELECT day FROM budget_holds", ())}
    counter = query("SELECT tokens FROM budget_counters WHERE scope=?", (f"td:{day}",))
    # A worker drops the shared scopes' counters as it starts (they may be older than its
    # caps: xclaw/runtime/runtime.py), and the next hold that needs one rebuilds it from the
    # holds. The last restart can come after the last hold — the resumed run stopped at the
    # session's cap before reserving anything (seen under load with four kills), or on two
    # workers the other one finished the session first — and then no counter is left, which
    # is no count at all, not a wrong one. Kept, it is exact.
    assert counter in ([(counted,)], []), counter
    # No tool ran twice: a tool killed mid-run is not run again (no blind repeat).
    outputs = query(
        "SELECT input_data, status FROM traces WHERE session_id=? AND step_type='tool_call' "
        "ORDER BY seq",
        (sid,),
    )
    commands = [_j(i)["command"] for i, st in outputs if st == "completed"]
    assert len(commands) == len(set(commands))
