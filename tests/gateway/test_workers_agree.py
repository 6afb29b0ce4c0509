"""Workers agree on what a session runs with (docs/postgres.md, "What a session runs with"):
two real `xclaw serve` processes with different models on one database — one SQLite file, or
PostgreSQL — the first SIGKILLed mid-run. The second does not continue the session with its
own model: it says so (a notice, a session_config step) and the session waits; a third that
has the session's model among its own drives it with that model, and says so too."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Client, clean_env, write_script, xclaw_cmd
from tests.gateway.test_workers import TOKEN, PgServer, health, sh
from tests.store.conftest import PostgresBackend, postgres_url
from xclaw.store import open_store

pytestmark = pytest.mark.slow


@dataclass
class ModelServer(PgServer):
    """A worker on the shared database with a model chain of its own (XCLAW_MODEL)."""

    chain: str = ""

    def env(self) -> dict[str, str]:
        env = super().env()
        env["XCLAW_MODEL"] = self.chain
        return env


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    backend = PostgresBackend(postgres_url())
    try:
        yield backend.url
    finally:
        backend.drop()


def workers_json(db: str) -> dict[str, Any]:
    r = subprocess.run(
        [*xclaw_cmd(), "workers", "--json", "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def config_alerts(db: str, sid: str) -> list[dict[str, Any]]:
    r = subprocess.run(
        [*xclaw_cmd(), "steps", sid, "-n", "100", "--json", "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return [s["input"] for s in json.loads(r.stdout) if s["name"] == "session_config"]


async def said(client: Client, start: str) -> dict[str, Any]:
    """The first notice starting with `start`, already received or still to come."""

    def match(f: dict[str, Any]) -> bool:
        return f.get("type") == "notice" and str(f.get("content", "")).startswith(start)

    return next((f for f in client.seen if match(f)), None) or await client.until(match, 30)


async def test_a_takeover_keeps_the_sessions_model_or_waits(tmp_path: Path, database: str) -> None:
    a_script = write_script(
        tmp_path / "a.json", [{"text": "", "tool_calls": [sh("sleep 30")]}, {"text": "A's answer"}]
    )
    b_script = write_script(tmp_path / "b.json", [{"text": "B's answer"}])
    servers: list[ModelServer] = []

    def start(name: str, chain: str, approval: str) -> ModelServer:
        root = tmp_path / name
        root.mkdir()
        s = ModelServer(
            root=root,
            script=None,
            approval=approval,
            db=database,
            shared_workspace=tmp_path / "workspaces",
            chain=chain,
        )
        servers.append(s)
        s.start()
        return s

    try:
        a = start("a", f"script:{a_script}", "yolo")
        b = start("b", f"script:{b_script}", "ask")
        a_id, b_id = health(a)["worker"], health(b)["worker"]
        # B says at start that a live worker runs sessions with another model and mode.
        assert f"warning: live worker {a_id} runs model script:{a_script}" in b.banner
        listed = {w["workerId"]: w for w in workers_json(database)["workers"]}
        assert (listed[a_id]["models"], listed[a_id]["approval"]) == (
            [f"script:{a_script}"],
            "yolo",
        )
        assert (listed[b_id]["models"], listed[b_id]["approval"]) == ([f"script:{b_script}"], "ask")

        c = await Client.open(a, token=TOKEN)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "work"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        a.kill()  # SIGKILL: its presence lock goes with it, its lease is free at once

        # ...once the database has noticed: PostgreSQL drops the advisory lock when the server
        # process of A's connection sees it closed, a moment after the kill. That moment is
        # held open here (A's presence taken over by this test, on both backends): a client
        # attaching to B then is told the session is busy, which is true as far as anyone
        # can tell, and is told it is not as soon as B finds out.
        ghost = open_store(database)
        await asyncio.to_thread(ghost.leases.register_worker, a_id, {})
        try:
            cb = await Client.open(b, token=TOKEN)
            status = await cb.attach(sid)
            assert status["busy"] is True
        finally:
            ghost.close()

        # B cannot run the session's model and nobody asked it to change: it says so, and
        # that the session waits, nobody driving it.
        notice = await said(cb, "[worker]")
        assert f"this session runs with model script:{a_script}" in notice["content"]
        assert "does not drive it" in notice["content"]
        status = await cb.until(lambda f: f.get("type") == "status" and f.get("busy") is False)
        assert status["state"] == "interrupted"
        assert not any(f.get("type") == "reply" for f in cb.seen)
        (refused,) = config_alerts(database, sid)
        assert refused["decision"] == "refused" and refused["worker"]["id"] == b_id
        assert refused["session"] == {"models": [f"script:{a_script}"], "approval": "yolo"}

        # A worker that has A's model in its chain joins: a message sent to B is refused and
        # names it; a reconnect to it continues the session with A's model.
        c3 = start("c", f"script:{b_script},script:{a_script}", "ask")
        c3_id = health(c3)["worker"]
        await cb.send({"type": "message", "sessionId": sid, "content": "go on"})
        err = await cb.until_type("error")
        assert err["code"] == "config_mismatch" and c3_id in err["content"]

        cc = await Client.open(c3, token=TOKEN)
        await cc.attach(sid)
        adopted = await said(cc, "[worker]")
        assert (
            f"drives the session with model script:{a_script} and approval ask"
            in (adopted["content"])
        )
        assert (await cc.until_type("reply", timeout=60))["content"] == "A's answer"
        alerts = config_alerts(database, sid)
        assert [x["decision"] for x in alerts] == ["refused", "adopted"]
        assert alerts[1]["used"] == {"models": [f"script:{a_script}"], "approval": "ask"}
        for client in (c, cb, cc):
            await client.close()
    finally:
        for s in servers:
            s.kill()
