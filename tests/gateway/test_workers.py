"""Several `xclaw serve` processes on one PostgreSQL database (one driver, failover).

Real processes, real PostgreSQL (a schema of its own per test), one shared workspace root.
- 30 scripted sessions spread over three workers; one worker is SIGKILLed mid-run; its
  clients reconnect to the others, which take the sessions over and finish them. Every
  completed side effect ran exactly once, and no session was ever written by two workers
  at once (traces.worker never interleaves). Observers attached to another worker than the
  driver see the run's frames (LISTEN/NOTIFY).
- A zombie: the driver is SIGSTOPped past its lease, another worker takes over and finishes,
  the zombie is SIGCONTinued: its late writes are refused and logged; the trace stays whole.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, clean_env, write_script, xclaw_cmd
from tests.store.conftest import PostgresBackend, postgres_url
from tests.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TOKEN = "workers-test-" + secrets.token_hex(8)


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@dataclass
class PgServer(Server):
    """An `xclaw serve` on the test's PostgreSQL schema, with the shared workspace root."""

    db: str = ""
    shared_workspace: Path | None = None
    lease_ttl_s: float = 10.0  # a busy CI machine must not lose leases by slowness

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(
            XCLAW_DB=self.db,
            XCLAW_TOKEN=TOKEN,
            XCLAW_LEASE_TTL_S=str(self.lease_ttl_s),
            XCLAW_SWEEP_GRACE_S="30",
        )
        return env

    def start(self, *extra_args: str) -> Server:
        return super().start("--workspace", str(self.shared_workspace), *extra_args)


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    backend.url = backend.url.replace("pool_max=4", "pool_max=8")
    yield backend
    backend.drop()


@pytest.fixture
def cluster(tmp_path: Path, pg: PostgresBackend) -> Iterator[Any]:
    servers: list[PgServer] = []
    workspace = tmp_path / "workspaces"

    def start(turns: list[dict[str, Any]], n: int, **kw: Any) -> list[PgServer]:
        script = write_script(tmp_path / "script.json", turns)
        for i in range(n):
            root = tmp_path / f"worker{i}"
            root.mkdir()
            s = PgServer(
                root=root,
                script=script,
                approval="yolo",
                db=pg.url,
                shared_workspace=workspace,
                **kw,
            )
            servers.append(s)
            s.start()
        return servers

    yield start
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            os.kill(s.proc.pid, signal.SIGCONT)
        s.kill()


def health(server: Server) -> dict[str, Any]:
    return httpx.get(f"{server.http}/api/health", params={"token": TOKEN}, timeout=10).json()


def writers(pg: PostgresBackend, sid: str) -> list[str | None]:
    rows = pg.query("SELECT worker FROM traces WHERE session_id=? ORDER BY seq", (sid,))
    return [r[0] for r in rows]


def runs_of(seq: list[str | None]) -> list[str | None]:
    """Consecutive equal writers collapsed: [A, A, B, B] -> [A, B]."""
    out: list[str | None] = []
    for w in seq:
        if not out or out[-1] != w:
            out.append(w)
    return out


SESSIONS = 30
SCRIPT = [
    {"text": "", "tool_calls": [sh("echo a >> effects.txt")]},
    {"text": "", "tool_calls": [sh("sleep 1.5")]},
    {"text": "", "tool_calls": [sh("echo b >> effects.txt")]},
    {"text": "", "tool_calls": [sh("sleep 1")]},
    {"text": "", "tool_calls": [sh("echo c >> effects.txt")]},
    {"text": "done"},
]


async def test_thirty_sessions_three_workers_one_killed(cluster, pg: PostgresBackend) -> None:
    servers = cluster(SCRIPT, 3)
    ids = [health(s)["worker"] for s in servers]
    assert len(set(ids)) == 3 and all(health(s)["backend"] == "postgresql" for s in servers)
    # Each session: a driver client on worker i % 3, an observer on the next worker.
    drivers: list[Client] = []
    observers: list[Client] = []
    for i in range(SESSIONS):
        c = await Client.open(servers[i % 3], token=TOKEN)
        await c.attach(None)
        drivers.append(c)
        o = await Client.open(servers[(i + 1) % 3], token=TOKEN)
        await o.attach(c.session_id)
        observers.append(o)
    sids = [c.session_id for c in drivers]
    for c in drivers:
        await c.send({"type": "message", "sessionId": c.session_id, "content": "go"})
    # Worker 0 dies in the middle of its sessions' runs.
    victim = servers[0]
    mine = [i for i in range(SESSIONS) if i % 3 == 0]
    for i in mine:
        await drivers[i].until(lambda f: f.get("type") == "tool" and "sleep" in json.dumps(f))
    assert sorted(health(victim)["sessionsDriven"]) == sorted(sids[i] for i in mine)
    victim.kill()
    # Its clients reconnect to the others (as behind a load balancer), which take over at
    # once: the dead worker's presence lock went with its database connection.
    for n, i in enumerate(mine):
        c = await Client.open(servers[1 + n % 2], token=TOKEN)
        status = await c.attach(sids[i])
        assert status["busy"] is True
        drivers[i] = c
    replies = await asyncio.gather(*(c.until_type("reply", timeout=60) for c in drivers))
    assert [r["content"] for r in replies] == ["done"] * SESSIONS
    # Observers on another worker than the driver saw the run's frames (LISTEN/NOTIFY),
    # except those attached to the killed worker.
    for i, o in enumerate(observers):
        if (i + 1) % 3 != 0:
            await o.until_type("reply", timeout=30)
            assert any(f.get("type") == "step" for f in o.seen)

    rows = dict(pg.query("SELECT session_id, current_status FROM sessions"))
    assert all(rows[s] == "Success" for s in sids)
    for i, sid in enumerate(sids):
        who = writers(pg, sid)
        assert None not in who
        runs = runs_of(who)
        assert len(runs) == len(set(runs)), (sid, runs)  # no interleaving of two drivers
        if i % 3 == 0:
            assert runs[0] == ids[0] and len(runs) == 2 and runs[1] in ids[1:]
        else:
            assert runs == [ids[i % 3]]
        # Side effects: a completed echo ran exactly once; an interrupted one at most once.
        steps = pg.query(
            "SELECT input_data->>'command', status, error_message FROM traces "
            "WHERE session_id=? AND step_type='tool_call' AND input_data->>'command' LIKE 'echo%%'",
            (sid,),
        )
        done = Counter(cmd.split()[1] for cmd, st, _ in steps if st == "completed")
        maybe = Counter(cmd.split()[1] for cmd, st, err in steps if err == "interrupted")
        effects = (pg_workspace(servers[1], sid) / "effects.txt").read_text().split()
        got = Counter(effects)
        assert set(done) | set(maybe) == {"a", "b", "c"}, (sid, steps)
        for token in set(done) | set(maybe) | set(got):
            assert done[token] <= got[token] <= done[token] + maybe[token], (sid, token, effects)
            assert got[token] <= 1 or maybe[token], (sid, effects)

    # `xclaw workers` sees two live workers and the dead one (until swept).
    out = await asyncio.to_thread(
        subprocess.run,
        [*xclaw_cmd(), "workers", "--json", "--db", pg.url],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    listed = {w["workerId"]: w["alive"] for w in json.loads(out.stdout)["workers"]}
    assert listed.get(ids[1]) is True and listed.get(ids[2]) is True
    assert listed.get(ids[0]) in (False, None)
    for c in [*drivers, *observers]:
        await c.close()


def pg_workspace(server: PgServer, sid: str) -> Path:
    assert server.shared_workspace is not None
    return server.shared_workspace / sid


async def test_a_zombie_driver_cannot_write_after_a_takeover(cluster, pg: PostgresBackend) -> None:
    servers = cluster(
        [
            {
                "text": "",
                "tool_calls": [sh("echo start >> effects.txt; sleep 4; echo end >> effects.txt")],
            },
            {"text": "finished after the takeover"},
        ],
        2,
        lease_ttl_s=2.0,
    )
    a, b = servers
    za = await Client.open(a, token=TOKEN)
    await za.attach(None)
    sid = za.session_id
    await za.send({"type": "message", "sessionId": sid, "content": "go"})
    await za.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    a_id = health(a)["worker"]
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGSTOP)  # paused: alive, connected, silent
    try:
        c = await Client.open(b, token=TOKEN)
        status = await c.attach(sid)
        assert status["busy"] is True  # A's lease is still live: B observes first...
        reply = await c.until_type("reply", timeout=30)  # ...and takes over once it lapses
        assert reply["content"] == "finished after the takeover"
        before = pg.query(
            "SELECT seq, status, error_message, worker, end_time FROM traces "
            "WHERE session_id=? ORDER BY seq",
            (sid,),
        )
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    # The zombie wakes: its shell command finishes, its completion write is refused.
    log = lambda: a.logs()[-3000:]  # noqa: E731
    await until(lambda: "event=lease_lost" in a.logs(), log, 20, 0.2, in_thread=True)
    # The zombie's run is over once it drives nothing: no late write of it can still come.
    await until(lambda: not health(a)["sessionsDriven"], log, 20, 0.1, in_thread=True)
    after = pg.query(
        "SELECT seq, status, error_message, worker, end_time FROM traces "
        "WHERE session_id=? ORDER BY seq",
        (sid,),
    )
    assert after == before  # not one late write of the zombie landed
    tool = next(r for r in after if r[0] == 3)
    assert tool[1:3] == ("failed", "interrupted") and tool[3] == a_id
    runs = runs_of([r[3] for r in after])
    assert runs[0] == a_id and len(runs) == 2 and runs[1] != a_id
    assert pg.query("SELECT current_status FROM sessions WHERE session_id=?", (sid,)) == [
        ("Success",)
    ]
    assert a_id not in health(b)["sessionsDriven"]
    assert health(a)["sessionsDriven"] == []  # the zombie drives nothing any more
    await za.close()
    await c.close()


async def test_a_message_id_recorded_through_one_worker_is_known_to_another(
    cluster, pg: PostgresBackend
) -> None:
    """A client that sent a message through one worker and lost it resends it through
    another (a load balancer's choice): acknowledged again, never run twice
    (docs/protocol.md, "Sending a message exactly once")."""
    first, second = cluster([{"text": "one"}, {"text": "two"}], 2)
    a = await Client.open(first, token=TOKEN)
    await a.attach(None)
    sid = a.session_id
    frame = {"type": "message", "sessionId": sid, "content": "hello", "messageId": "m-pg"}
    await a.send(frame)
    ack = await a.until(lambda f: f.get("type") == "ack")
    assert ack["duplicate"] is False and ack["stepId"] == "s0001"
    await a.until_type("reply")
    b = await Client.open(second, token=TOKEN)
    await b.attach(sid)
    await b.send(frame)
    again = await b.until(lambda f: f.get("messageId") == "m-pg")
    assert again["type"] == "ack" and again["duplicate"] is True and again["stepId"] == "s0001"
    rows = pg.query("SELECT seq FROM traces WHERE session_id=? AND step_type='user_input'", (sid,))
    assert [r[0] for r in rows] == [1]
