"""Schedules and webhooks checked from outside: two `xclaw serve` processes on one
PostgreSQL database, a schedule every 2 s made with `xclaw schedule add`, the worker that
fired it SIGKILLed: every tick from the first to the last ran exactly once, none missed,
none twice. A webhook made with `xclaw hook add`: a bad signature is refused (401), an old
timestamp too, a good request delivered twice runs once."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import clean_env, write_script, xclaw_cmd
from tests.gateway.test_workers import TOKEN, PgServer
from tests.store.conftest import PostgresBackend, postgres_url
from tests.waiting import wait_until
from xclaw.schedules.signing import sign

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    yield backend
    backend.drop()


@pytest.fixture
def two(tmp_path: Path, pg: PostgresBackend) -> Iterator[list[PgServer]]:
    script = write_script(tmp_path / "script.json", [{"text": "done"}] * 200)
    servers = []
    for i in range(2):
        root = tmp_path / f"worker{i}"
        root.mkdir()
        s = PgServer(
            root=root,
            script=script,
            approval="yolo",
            db=pg.url,
            shared_workspace=tmp_path / "workspaces",
            lease_ttl_s=5.0,
        )
        s.config_extra = "schedules:\n  poll_s: 0.2\n"
        servers.append(s)
        s.start()
    yield servers
    for s in servers:
        if s.proc is not None and s.proc.poll() is None:
            os.kill(s.proc.pid, signal.SIGCONT)
        s.kill()


def xclaw(pg: PostgresBackend, *args: str) -> str:
    done = subprocess.run(
        [*xclaw_cmd(), *args, "--db", pg.url],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def new_session(server: PgServer) -> str:
    r = httpx.post(
        f"{server.http}/api/sessions", params={"token": TOKEN}, json={"title": "t"}, timeout=10
    )
    assert r.status_code == 201, r.text
    return str(r.json()["sessionId"])


def message_ids(pg: PostgresBackend, sid: str) -> list[str]:
    rows = pg.query(
        "SELECT output_data FROM traces WHERE session_id=? AND step_type='user_input' ORDER BY seq",
        (sid,),
    )
    return [json.loads(r[0])["messageId"] for r in rows]


def fires(pg: PostgresBackend, source: str) -> list[tuple[Any, ...]]:
    return pg.query(
        "SELECT fire_id, tick, state, worker_id FROM fires WHERE source_id=? ORDER BY tick",
        (source,),
    )


def test_every_two_seconds_on_two_workers_once_per_tick_across_a_kill(
    two: list[PgServer], pg: PostgresBackend
) -> None:
    sid = new_session(two[0])
    sch = xclaw(pg, "schedule", "add", "--every", "2s", "--session", sid, "-m", "tick")
    assert sch in xclaw(pg, "schedule", "list")
    wait_until(
        lambda: len([f for f in fires(pg, sch) if f[2] == "delivered"]) >= 3, "3 fires", 30, 0.2
    )
    # The worker that fired the latest tick is killed, in the middle of its work.
    by_worker = {s.proc.pid: s for s in two if s.proc is not None}
    last = fires(pg, sch)[-1]
    killed = next(s for pid, s in by_worker.items() if f":{pid}:" in str(last[3]))
    killed.kill(signal.SIGKILL)
    ticks_at_kill = len(fires(pg, sch))
    wait_until(lambda: len(fires(pg, sch)) >= ticks_at_kill + 4, "4 more ticks", 40, 0.2)
    xclaw(pg, "schedule", "pause", sch)
    # Whatever the dead worker had claimed and not delivered is delivered once its claim
    # runs out (15 s), by the living one.
    wait_until(lambda: all(f[2] == "delivered" for f in fires(pg, sch)), "all delivered", 60, 0.2)
    wait_until(
        lambda: (
            not pg.query(
                "SELECT 1 FROM sessions WHERE session_id=? AND current_status='Running'", (sid,)
            )
        ),
        "the session's run ends",
        30,
        0.2,
    )
    got = fires(pg, sch)
    ticks = [int(f[1]) for f in got]
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 2000)), "a tick was missed"
    ran = Counter(message_ids(pg, sid))
    assert ran == Counter({f[0]: 1 for f in got}), "a tick ran twice or not at all"
    assert len({f[3] for f in got}) == 2, "both workers fired ticks"


def post_hook(server: PgServer, name: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{server.http}/hooks/{name}", content=body, headers=headers, timeout=30)


def test_a_webhook_refuses_a_bad_signature_and_runs_a_redelivery_once(
    two: list[PgServer], pg: PostgresBackend
) -> None:
    sid = new_session(two[0])
    secret = xclaw(
        pg, "hook", "add", "ci", "--session", sid, "--template", "build {status} of {repo.name}"
    )
    assert secret.startswith("whsec_")
    body = json.dumps({"status": "failed", "repo": {"name": "xclaw"}}).encode()
    now = str(int(time.time()))
    good = {
        "X-Xclaw-Timestamp": now,
        "X-Xclaw-Delivery": "d-" + secrets.token_hex(4),
        "X-Xclaw-Signature": sign(secret, now, body),
        "Content-Type": "application/json",
    }
    bad = {**good, "X-Xclaw-Signature": sign("whsec_wrong", now, body)}
    assert post_hook(two[0], "ci", body, bad).status_code == 401
    old = str(int(time.time()) - 3600)  # a capture replayed an hour later
    stale = {**good, "X-Xclaw-Timestamp": old, "X-Xclaw-Signature": sign(secret, old, body)}
    assert post_hook(two[0], "ci", body, stale).status_code == 401
    assert post_hook(two[0], "nope", body, good).status_code == 401  # as a bad signature
    first = post_hook(two[0], "ci", body, good)
    assert first.status_code == 202, first.text
    assert first.json()["fire"]["state"] == "delivered"
    again = post_hook(two[1], "ci", body, good)  # the sender's retry, to the other worker
    assert again.status_code == 200 and again.json()["duplicate"] is True
    wait_until(
        lambda: (
            not pg.query(
                "SELECT 1 FROM sessions WHERE session_id=? AND current_status='Running'", (sid,)
            )
        ),
        "the session's run ends",
        30,
        0.2,
    )
    assert message_ids(pg, sid) == [f"hook.ci.{good['X-Xclaw-Delivery']}"]
    text = pg.query(
        "SELECT input_data FROM traces WHERE session_id=? AND step_type='user_input'", (sid,)
    )[0][0]
    assert "build failed of xclaw" in text
