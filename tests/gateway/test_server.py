"""`xclaw serve` as a process: banner, token file, logs, starting without a model, graceful
stop on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.gateway.harness import Client, Server, xclaw_cmd

pytestmark = pytest.mark.slow


async def test_starts_without_a_model_and_says_how_to_configure_one(server_factory) -> None:
    server = server_factory(None, name="nomodel")
    assert (
        "no model configured: set ANTHROPIC_API_KEY / OPENAI_API_KEY in .env "
        "or XCLAW_MODEL=script:path" in server.banner
    )
    assert f"listening on http://127.0.0.1:{server.port}/?token={server.token}" in server.banner
    assert f"database:  {server.home / 'xclaw.db'}" in server.banner
    sandbox = next(line for line in server.banner.splitlines() if "sandbox:" in line)
    assert "bubblewrap" in sandbox or "plain" in sandbox  # how shell commands are isolated
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{server.http}/api/health", params={"token": server.token})
    health = r.json()
    assert health["model"] is None
    c = await Client.open(server)
    await c.attach(None)
    err = await c.turn("hello")
    assert err["type"] == "error" and err["code"] == "config_error"
    assert "XCLAW_MODEL=script:" in err["content"]
    # commands that need no model still work; the failed first message made no
    # session (a session exists from its first message, once a model can answer it)
    await c.send({"type": "message", "content": "/steps"})
    assert (await c.until_type("notice"))["content"].startswith("No steps yet")
    await c.send({"type": "message", "content": "/sessions"})
    assert (await c.until_type("notice"))["content"].startswith("No sessions yet.")


async def test_token_generated_once_kept_0600_and_reused(server_factory) -> None:
    server = server_factory([{"text": "ok"}], name="tok")
    path = server.home / "token"
    assert path.read_text().strip() == server.token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = server.token
    server.restart()
    assert server.token == first
    logs = server.logs()
    # Connect with the token in the URL: the logs must not carry it.
    c = await Client.open(server, url=f"{server.ws_url}?token={first}")
    await c.attach(None)
    await c.close()
    deadline = time.monotonic() + 15
    while "event=attach" not in (logs := server.logs()):
        assert time.monotonic() < deadline, logs
        await asyncio.sleep(0.02)
    assert "event=connect" in logs and "event=attach" in logs
    assert first not in logs
    for line in logs.splitlines():
        assert line.startswith("ts=") and " level=" in line and " logger=" in line, line


async def test_sigterm_stops_gracefully_and_the_run_resumes_after_restart(server_factory) -> None:
    server = server_factory(
        [
            {"text": "Slow.", "tool_calls": [{"name": "shell", "input": {"command": "sleep 20"}}]},
            {"text": "After restart."},
        ],
        approval="yolo",
    )
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    await c.send({"type": "message", "content": "go"})
    await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    started = time.monotonic()
    code = server.kill(signal.SIGTERM)
    assert code == 0
    assert time.monotonic() - started < 10
    with pytest.raises(ConnectionClosed) as info:
        while True:
            await c.recv(timeout=5)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1012  # "service restart"
    assert "event=stopped" in server.logs()
    # The step in flight ended as interrupted: recorded, not half-written, not deleted.
    with sqlite3.connect(server.home / "xclaw.db") as db:
        rows = db.execute(
            "SELECT step_type, status, error_message FROM traces"
            " WHERE session_id=? ORDER BY start_time",
            (sid,),
        ).fetchall()
    assert ("tool_call", "failed", "interrupted") in rows
    assert not [r for r in rows if r[1] == "running"]

    server.start()
    c2 = await Client.open(server)
    await c2.send({"type": "reconnect", "sessionId": sid})
    assert (await c2.until_type("notice"))["content"].startswith("[resume]")
    assert (await c2.until_type("reply"))["content"] == "After restart."


def test_sigint_stops_cleanly(server_factory) -> None:
    server = server_factory([{"text": "ok"}], name="int")
    assert server.kill(signal.SIGINT) == 0
    assert "event=stopped" in server.logs()


def test_port_in_use_is_one_error_line_exit_2_and_no_worker_registered(server_factory) -> None:
    """A second `xclaw serve` on a taken port (here: a second worker on the same database)
    says so in one `error:` line naming the port, exits 2, and leaves no worker behind in the
    database: the socket is bound before anything is registered."""
    first = server_factory([{"text": "ok"}], name="one")
    db = str(first.home / "xclaw.db")
    other = Server(root=first.root.parent / "two", script=first.script, port=first.port)
    other.root.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [*xclaw_cmd(), "serve", "--port", str(first.port), "--db", db],
        cwd=other.root,
        env=other.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert str(first.port) in lines[0] and "already in use" in lines[0]
    assert "--port" in lines[0]  # what to do about it
    workers = subprocess.run(
        [*xclaw_cmd(), "workers", "--json", "--db", db],
        env=other.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    registered = json.loads(workers.stdout)["workers"]
    assert [w["pid"] for w in registered] == [first.proc.pid]


def test_a_host_that_cannot_be_bound_is_one_error_line(tmp_path) -> None:
    """Not only a taken port: any address the socket cannot bind is one line naming it."""
    server = Server(root=tmp_path, script=None)
    tmp_path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [*xclaw_cmd(), "serve", "--host", "192.0.2.1", "--port", str(server.port)],
        cwd=tmp_path,
        env=server.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"192.0.2.1:{server.port}" in lines[0]
    assert not (tmp_path / "home" / "xclaw.db").exists()  # nothing was opened or written


@pytest.mark.parametrize("on_path", [False, True])
def test_the_banner_names_a_chat_command_a_fresh_shell_can_run(tmp_path, on_path: bool) -> None:
    """Started as .venv/bin/xclaw from a shell whose PATH lacks the environment (no activate),
    the banner must not say `xclaw chat`: that is "command not found" in the next terminal."""
    script = Path(sys.executable).parent / "xclaw"
    server = Server(root=tmp_path, script=None)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = os.defpath + (f"{os.pathsep}{script.parent}" if on_path else "")
    env = {**server.env(), "PATH": path}
    with subprocess.Popen(
        [str(script), "serve", "--port", str(server.port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = next(line for line in proc.stdout if "in another terminal" in line)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    command = line.split("run `", 1)[1].split("`", 1)[0]
    assert command.endswith(" chat")
    assert (command == "xclaw chat") is on_path, command
    # ... and that command works in another directory, with that PATH
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    argv = [*shlex.split(command)[:-1], "--version"]
    done = subprocess.run(argv, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "xclaw" in done.stdout, done


@pytest.mark.parametrize("host", ["::", "0.0.0.0"])
def test_the_banner_link_of_a_wildcard_host_works(tmp_path, host: str) -> None:
    """Listening on every address of one family, the banner's link must reach the server:
    `--host ::` binds IPv6 only, where 127.0.0.1 is refused."""
    server = Server(root=tmp_path, script=None)
    try:
        server.start("--host", host)
        link = next(
            line.split("listening on ", 1)[1].strip()
            for line in server.banner.splitlines()
            if "listening on " in line
        )
        origin = link.split("/?token=", 1)[0]
        r = httpx.get(f"{origin}/api/health", params={"token": server.token}, timeout=15)
        assert r.status_code == 200 and r.json()["status"] == "ok", link
        assert httpx.get(link, timeout=15).status_code == 200  # the page itself
    finally:
        server.kill()


def test_a_blob_store_that_names_no_place_in_a_bucket_stops_the_start(tmp_path) -> None:
    """`../x` would reach the object store and be refused there again and again (the
    session waiting for a store that never answers): refused at start instead, in one line."""
    server = Server(root=tmp_path, script=None)
    tmp_path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [*xclaw_cmd(), "serve", "--port", str(server.port)],
        cwd=tmp_path,
        env={**server.env(), "XCLAW_BLOB_STORE": "s3://bucket/../x"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: XCLAW_BLOB_STORE"), done.stderr
    assert "'..'" in lines[0]
    assert not (tmp_path / "home" / "xclaw.db").exists()  # nothing was opened or written
