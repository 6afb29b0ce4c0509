"""Helpers for the team tests: users made with the real `xclaw users` command, a script that
asks an approval, answers plainly, or takes its time."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.gateway.harness import Server, clean_env, xclaw_cmd


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


# "write …" asks an approval (shell in ask mode); "hello" answers at once; "slow" waits.
SCRIPT: dict[str, Any] = {
    "turns": [{"text": "", "tool_calls": [sh("echo hi > f")]}, {"text": "done"}],
    "branches": [
        {"when": "hello", "turns": [{"text": "hi there"}]},
        {
            "when": "write",
            "turns": [{"text": "", "tool_calls": [sh("echo hi > f")]}, {"text": "done"}],
        },
        {"when": "slow", "turns": [{"text": "", "sleep": 30}, {"text": "late"}]},
    ],
}


def team_server(factory: Any, name: str = "team", **kwargs: Any) -> Server:
    """A server running SCRIPT (ask mode)."""
    server: Server = factory(None, approval="ask", name=name, **kwargs)
    server.kill()
    path = server.root / "script.json"
    path.write_text(json.dumps(SCRIPT))
    server.script = path
    return server.start()


def xclaw(server: Server, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real `xclaw` command on the server's database."""
    r = subprocess.run(
        [*xclaw_cmd(), *args, "--db", str(server.home / "xclaw.db")],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(XCLAW_HOME=str(server.home), NO_COLOR="1"),
        check=False,
    )
    if check:
        assert r.returncode == 0, r.stderr + r.stdout
    return r


def add_user(server: Server, name: str, role: str = "member") -> str:
    """`xclaw users add NAME --role ROLE`: the token it prints (once)."""
    out = xclaw(server, "users", "add", name, "--role", role).stdout.strip()
    assert out.startswith("xcu_") and len(out) > 40, out
    return out


def share(server: Server, session_id: str, user: str, role: str) -> None:
    xclaw(server, "share", session_id, user, "--role", role)
