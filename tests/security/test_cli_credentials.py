"""Credentials given on the command line or substituted into MCP server settings stay out of
what other local users and the owner's terminal see (found by the second campaign):

- `ps` shows every process's command line to every local user: `xclaw serve --db
  postgresql://u:PW@…` and `xclaw chat --token T` put the database password and the gateway
  token there. xclaw overwrites them in its own command line as it starts.
- `xclaw tools` (and `--json`, `--check`) printed MCP server settings with their `${VAR}`
  values substituted (args, URL, the stderr of a server that failed to start)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.harness import Server, clean_env, xclaw_cmd
from tests.store.conftest import PostgresBackend
from xclaw.security.credentials import hide_in_cmdline

pytestmark = pytest.mark.slow

PG = os.environ.get("XCLAW_TEST_PG_URL", "")
MCP_SECRET = "mcp-secret-value-51515151"
MCP_TOKEN = "mcp-token-value-52525252"


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_hide_in_cmdline_overwrites_our_own_command_line() -> None:
    code = (
        "import sys, time; from xclaw.security.credentials import hide_in_cmdline; "
        "print(hide_in_cmdline(['pw-secret-777777']), flush=True); time.sleep(30)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--db", "postgresql://u:pw-secret-777777@h/x"],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"1"
        line = _cmdline(proc.pid)
        assert "pw-secret-777777" not in line and "postgresql://u:****************@h/x" in line
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    assert hide_in_cmdline([]) == 0


@pytest.mark.skipif(not PG, reason="set XCLAW_TEST_PG_URL (PostgreSQL trusts the test user)")
def test_the_database_password_is_not_in_the_servers_command_line(tmp_path: Path) -> None:
    password = "cmdline-pg-password-4545"
    pg = PostgresBackend(PG)  # a schema of its own: the database is shared with other runs
    url = pg.url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@")
    assert password in url
    server = Server(tmp_path, None).start("--db", url)
    try:
        assert server.proc is not None
        assert password not in _cmdline(server.proc.pid)
        assert "postgresql://postgres:" in _cmdline(server.proc.pid)
    finally:
        server.kill()
        pg.drop()


def test_the_token_is_not_in_the_chat_clients_command_line(tmp_path: Path) -> None:
    token = "chat-token-on-the-command-line-4646"
    proc = subprocess.Popen(
        [*xclaw_cmd(), "chat", "--url", "http://127.0.0.1:9", "--token", token],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(XCLAW_HOME=str(tmp_path / "home")),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        seen = ""
        while time.monotonic() < deadline and proc.poll() is None:
            seen = _cmdline(proc.pid)
            if "chat" in seen and "xclaw" in seen and "import" not in seen:
                # past the interpreter's start-up: xclaw's own code has run once it parsed
                time.sleep(0.05)
                if token not in _cmdline(proc.pid):
                    break
        assert proc.poll() is None or token not in seen, "exited before the check"
        assert token not in _cmdline(proc.pid)
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()


def test_xclaw_tools_prints_no_mcp_secret(tmp_path: Path) -> None:
    (tmp_path / "xclaw.yaml").write_text(
        "mcp_servers:\n"
        "  leaky:\n"
        "    command: sh\n"
        "    args: [-c, 'echo key=$API_KEY arg=$0 >&2; exit 3', '${LEAKY_ARG}']\n"
        "    env: {API_KEY: '${LEAKY_KEY}'}\n"
        "  remote:\n"
        "    url: 'http://user:${LEAKY_KEY}@127.0.0.1:9/mcp?k=${LEAKY_ARG}'\n"
        "    headers: {Authorization: 'Bearer ${LEAKY_ARG}'}\n"
    )
    # Names that do not say "secret": only their use in mcp_servers makes them so.
    (tmp_path / ".env").write_text(f"LEAKY_KEY={MCP_SECRET}\nLEAKY_ARG={MCP_TOKEN}\n")
    env = clean_env(XCLAW_HOME=str(tmp_path / "home"), NO_COLOR="1")
    for args in (
        ["tools"],
        ["tools", "--json"],
        ["tools", "--check"],
        ["tools", "--check", "--json"],
    ):
        done = subprocess.run(
            [*xclaw_cmd(), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        out = done.stdout + done.stderr
        assert "leaky" in out and "remote" in out, out
        assert MCP_SECRET not in out and MCP_TOKEN not in out, (args, out)
    assert "[REDACTED]" in out
