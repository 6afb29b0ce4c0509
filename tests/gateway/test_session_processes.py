"""Every client shows the processes a session's commands left running between steps
(docs/containers.md, "Processes live between steps"): the HTTP API
(`GET /api/sessions/{id}/processes`), the Python API over `xclaw.connect`
(`session.processes()`), `/ps` on the WebSocket and in `xclaw chat` — all from the one list
the runtime computes. Another member's session answers as an unknown one; a session without
a container answers an empty list with its reason.

Real components: an `xclaw serve` with `sandbox.isolation: container` (podman with runc and
the test image of tests/containers.py; under XCLAW_TEST_REQUIRE_PODMAN these fail rather
than skip), its SQLite database, loopback HTTP and WebSocket, the real `xclaw chat`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import xclaw
from tests.containers import remove_containers, test_image
from tests.gateway.harness import Client, Server, clean_env, write_script, xclaw_cmd
from tests.gateway.teams_harness import add_user

pytestmark = pytest.mark.slow

# The server's command line quotes a token of xclaw's form: every answer masks it as it
# leaves (docs/security.md), as it does the record's copy of the command.
QUOTED = "xcu_" + "Q" * 24
SERVER = f"httpd -p 127.0.0.1:8097 -h /opt/{QUOTED}"
SERVER_CMD = "httpd -p 127.0.0.1:8097 -h /opt/[REDACTED]"  # as every client shows it
TURNS: list[dict[str, Any]] = [
    {
        "text": "",
        "tool_calls": [
            {"name": "shell", "input": {"command": f"mkdir -p /opt/{QUOTED} && {SERVER}"}}
        ],
    },
    {"text": "started"},
]


@pytest.fixture
def container_server(tmp_path: Path) -> Iterator[Server]:
    image = test_image()  # fails (XCLAW_TEST_REQUIRE_PODMAN) or skips without podman
    root = tmp_path / "srv"
    root.mkdir()
    server = Server(
        root=root,
        script=write_script(root / "script.json", TURNS),
        approval="yolo",
        config_extra=f"sandbox:\n  isolation: container\n  image: {image}\n",
    )
    try:
        yield server.start()
    finally:
        server.kill()
        remove_containers(server.home / "workspaces")


def api(server: Server, path: str, token: str | None = None) -> httpx.Response:
    return httpx.get(
        f"{server.http}/api{path}",
        headers={"Authorization": f"Bearer {token or server.token}"},
        timeout=30,
    )


def chat_ps(server: Server, sid: str, cwd: Path) -> str:
    """`/ps` typed into the real `xclaw chat`, attached to `sid`."""
    done = subprocess.run(
        [*xclaw_cmd(), "chat", "--url", server.http, "--session", sid],
        input="/ps\n",
        cwd=cwd,
        env=clean_env(XCLAW_HOME=str(server.home), NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_every_client_lists_what_a_container_sessions_commands_left_running(
    container_server: Server, tmp_path: Path
) -> None:
    server = container_server
    async with xclaw.connect(server.http, token=server.token) as agent:
        session = await agent.new_session(title="a server")
        result = await session.send("start a server")
        assert result.reply == "started"
        [shell] = [s for s in await session.steps() if s.name == "shell"]

        # The Python API, typed.
        listing = await session.processes()
        assert isinstance(listing, xclaw.SessionProcesses)
        assert listing.isolation == "container" and listing.state == "running"
        assert listing.container is not None and session.id in listing.container
        assert listing.reason is None
        [proc] = listing.processes
        assert isinstance(proc, xclaw.ProcessInfo)
        assert (proc.command, proc.step_id) == (SERVER_CMD, shell.id)
        assert proc.pid > 0 and proc.epoch is not None and proc.epoch > 0

        # The HTTP API: the same list, the same words.
        answer = api(server, f"/sessions/{session.id}/processes")
        assert answer.status_code == 200, answer.text
        assert answer.json() == listing.wire()

        # /ps on the WebSocket (what the web page and every client may type).
        client = await Client.open(server)
        await client.attach(session.id)
        await client.send({"type": "message", "sessionId": session.id, "content": "/ps"})
        notice = await client.until(lambda f: f.get("type") == "notice" and "[ps]" in f["content"])
        assert f"{shell.id}  pid {proc.pid}" in notice["content"], notice
        assert SERVER_CMD in notice["content"]

        # xclaw chat's /ps.
        out = chat_ps(server, session.id, tmp_path)
        assert "[ps] 1 background process(es)" in out, out
        assert SERVER_CMD in out and shell.id in out
        seen = [listing.model_dump_json(), answer.text, notice["content"], out]
        assert not [text for text in seen if QUOTED in text]

    # Another member's session answers as an id nobody has (docs/teams.md).
    bob = add_user(server, "bob")
    theirs = api(server, f"/sessions/{session.id}/processes", token=bob)
    nobody = api(server, "/sessions/no-such-session/processes", token=bob)
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["code"] == nobody.json()["code"] == "unknown_session"
    assert session.id in theirs.json()["error"]
    assert "httpd" not in theirs.text


async def test_a_session_without_a_container_answers_an_empty_list_and_why(
    tmp_path: Path,
) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    server = Server(
        root=root,
        script=write_script(root / "script.json", TURNS),
        approval="yolo",
        config_extra="sandbox:\n  isolation: none\n",
    ).start()
    try:
        async with xclaw.connect(server.http, token=server.token) as agent:
            session = await agent.new_session()
            assert (await session.send("start a server")).reply == "started"
            listing = await session.processes()
            assert listing.processes == [] and listing.container is None
            assert listing.isolation == "none"
            assert listing.reason is not None and "runs no container" in listing.reason
            answer = api(server, f"/sessions/{session.id}/processes")
            assert answer.status_code == 200 and answer.json() == listing.wire()
        out = chat_ps(server, session.id, tmp_path)
        assert "[ps] no background process: this session runs no container" in out, out
    finally:
        server.kill()
