"""A change made outside the server reaches its open clients (docs/protocol.md, "Changes
made outside the server"): `xclaw rollback` and `xclaw gc` run as real processes on the
database a real `xclaw serve` serves — one SQLite file, or PostgreSQL — while a real
WebSocket client is attached to the session; and a rollback never races a run in flight."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.harness import Client, clean_env, write_script, xclaw_cmd
from tests.gateway.test_workers import TOKEN, PgServer, health, sh
from tests.store.conftest import PostgresBackend, postgres_url

pytestmark = pytest.mark.slow

# Bounded: the server reads the change log twice a second.
TOLD_WITHIN_S = 10.0


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


@pytest.fixture
def server(tmp_path: Path, database: str) -> Iterator[PgServer]:
    script = write_script(
        tmp_path / "script.json",
        [{"text": "", "tool_calls": [sh("echo one > a.txt")]}, {"text": "first answer"}],
    )
    root = tmp_path / "srv"
    root.mkdir()
    s = PgServer(
        root=root,
        script=script,
        approval="yolo",
        db=database,
        shared_workspace=tmp_path / "workspaces",
    )
    s.start()
    yield s
    s.kill()


async def cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `xclaw` command in a process of its own (off the test's event loop, whose
    WebSocket client must keep reading meanwhile)."""
    return await asyncio.to_thread(
        subprocess.run,
        [*xclaw_cmd(), *args, "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(XCLAW_LEASE_TTL_S="10"),
        check=False,
    )


async def test_a_rollback_from_the_command_line_reaches_the_open_page(
    server: PgServer, database: str, tmp_path: Path
) -> None:
    c = await Client.open(server, token=TOKEN)
    await c.attach(None)
    sid = c.session_id
    assert (await c.turn("make a file"))["content"] == "first answer"
    r = await cli(
        database,
        "rollback",
        sid,
        "s0001",
        "-y",
        "--workspace",
        str(tmp_path / "workspaces"),
    )
    assert r.returncode == 0, r.stderr
    # The client hears it as it hears an online rollback: notice, rolledback, history, status.
    notice = await c.until(
        lambda f: f.get("type") == "notice" and f["content"].startswith("[rollback]"),
        TOLD_WITHIN_S,
    )
    assert "reset to before step s0001" in notice["content"]
    assert "outside this server" in notice["content"]
    rolled = await c.until_type("rolledback", TOLD_WITHIN_S)
    assert rolled["stepId"] == "s0001" and rolled["deleted"] >= 4
    history = await c.until_type("history", TOLD_WITHIN_S)
    assert history["sessionId"] == sid and json.loads(history["content"]) == []
    status = await c.until(lambda f: f.get("type") == "status" and "busy" in f, TOLD_WITHIN_S)
    assert status["awaitingInput"] is True and status["state"] == "waiting"
    await c.close()


async def test_a_rollback_under_a_run_in_flight_is_refused_naming_the_server(
    tmp_path: Path, database: str
) -> None:
    script = write_script(
        tmp_path / "slow.json", [{"text": "", "tool_calls": [sh("sleep 30")]}, {"text": "done"}]
    )
    root = tmp_path / "slow"
    root.mkdir()
    s = PgServer(
        root=root, script=script, approval="yolo", db=database, shared_workspace=tmp_path / "ws"
    )
    s.start()
    try:
        c = await Client.open(s, token=TOKEN)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "sleep"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        worker = health(s)["worker"]
        r = await cli(database, "rollback", sid, "s0001", "-y")
        assert r.returncode == 1
        assert f"run in flight on worker {worker}" in r.stderr and "Traceback" not in r.stderr
        steps = await cli(database, "steps", sid, "--json")
        # nothing deleted: user, llm, the running call
        assert [x["id"] for x in json.loads(steps.stdout)] == ["s0001", "s0002", "s0003"]
        assert not any(f.get("type") == "rolledback" for f in c.seen)
        await c.send({"type": "cancel", "sessionId": sid})
        await c.until(lambda f: f.get("type") == "notice" and "[cancel]" in f["content"])
        # Stopped: now it may be rolled back.
        r = await cli(database, "rollback", sid, "s0001", "-y")
        assert r.returncode == 0, r.stderr
        await c.until_type("rolledback", TOLD_WITHIN_S)
        await c.close()
    finally:
        s.kill()


async def test_a_session_collected_by_gc_is_said_to_its_open_page(
    server: PgServer, database: str, tmp_path: Path
) -> None:
    c = await Client.open(server, token=TOKEN)
    await c.attach(None)
    sid = c.session_id
    assert (await c.turn("make a file"))["content"] == "first answer"
    # `--older-than 0s`: anything updated before the command started, this session included.
    r = await cli(
        database,
        "gc",
        "--older-than",
        "0s",
        "--yes",
        "--workspace",
        str(tmp_path / "workspaces"),
    )
    assert r.returncode == 0, r.stderr
    assert sid in r.stdout
    notice = await c.until(
        lambda f: f.get("type") == "notice" and f["content"].startswith("[deleted]"),
        TOLD_WITHIN_S,
    )
    assert "outside this server" in notice["content"]
    await c.close()


async def test_a_rollback_through_another_server_reaches_this_ones_clients(
    server: PgServer, database: str, tmp_path: Path
) -> None:
    root = tmp_path / "other"
    root.mkdir()
    other = PgServer(
        root=root,
        script=server.script,
        approval="yolo",
        db=database,
        shared_workspace=tmp_path / "workspaces",
    )
    other.start()
    try:
        c = await Client.open(server, token=TOKEN)
        await c.attach(None)
        sid = c.session_id
        assert (await c.turn("make a file"))["content"] == "first answer"
        d = await Client.open(other, token=TOKEN)
        await d.attach(sid)
        await d.send({"type": "message", "sessionId": sid, "content": "/rollback s0001"})
        await d.until_type("rolledback")
        history = await c.until_type("history", TOLD_WITHIN_S)
        assert json.loads(history["content"]) == []
        assert not [f for f in d.seen if f.get("type") == "notice" and "outside" in f["content"]]
        await c.close()
        await d.close()
    finally:
        other.kill()
