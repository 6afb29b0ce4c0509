"""`xclaw chat` shows what a schedule or a webhook sent as such, in a real terminal: the client
runs in tmux against a real `xclaw serve`, a schedule fires and a signed webhook delivery with a
hostile body arrives while it waits at its prompt, and the pane — what a person sees — holds
each message under its label, the body's control characters as visible stand-ins (the screen
not cleared, the title not set); a client started again shows the same labels in the history
(docs/schedules.md, "In the clients")."""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.harness import Server, clean_env, write_script, xclaw_cmd
from tests.waiting import wait_until
from xclaw.schedules.signing import sign

pytestmark = pytest.mark.slow

HOSTILE = "\x1b[2J\x1b]0;pwned\x07\u202eevil"


class Pane:
    """A client in a tmux session of its own (its own server socket: nothing else's)."""

    def __init__(self, socket: str, name: str) -> None:
        self.socket, self.name = socket, name

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, script: Path) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "48", str(script))

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", "-200")

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", self.name, "#{pane_title}")

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def until(self, text: str, timeout: float = 60) -> str:
        return wait_until(
            lambda: self.screen() if text in self.screen() else "",
            lambda: f"{text!r} on the screen:\n{self.screen()}",
            timeout=timeout,
            every=0.2,
        )


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (apt-get install -y tmux)")
    socket = f"xclaw-test-{os.getpid()}-{time.monotonic_ns()}"
    yield socket
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)


def _lines(screen: str) -> str:
    return "\n".join(ln.rstrip() for ln in screen.splitlines()) + "\n"


def _chat_script(server: Server, root: Path, session_id: str, name: str) -> Path:
    env = clean_env(XCLAW_HOME=str(server.home), TERM="xterm-256color", NO_COLOR="1")
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    cmd = shlex.join([*xclaw_cmd(), "chat", "--url", server.http, "--session", session_id])
    script = root / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(root))}\n{exports}exec {cmd}\n")
    script.chmod(0o755)
    return script


def test_fires_are_labelled_live_and_in_the_history(tmp_path: Path, tmux_socket: str) -> None:
    root = tmp_path / "srv"
    root.mkdir()
    turns = [{"text": "Noted the ping."}, {"text": "Noted the build."}, {"text": "x"}]
    server = Server(root=root, script=write_script(root / "script.json", turns), approval="yolo")
    server.start()
    try:
        api = httpx.Client(
            base_url=f"{server.http}/api",
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=30,
        )
        with api:
            sid = api.post("/sessions", json={"title": "fired"}).json()["sessionId"]
            hook = api.post(
                "/hooks", json={"name": "ci", "sessionId": sid, "template": "Build {status}"}
            ).json()
            live = Pane(tmux_socket, "live")
            live.start(_chat_script(server, tmp_path, sid, "live"))
            live.until(f"[session] {sid}")  # attached: the session's frames come to it
            live.until("You:")
            title_before = live.title()
            sch = api.post(
                "/schedules",
                json={"at": "2020-01-01T00:00:00Z", "sessionId": sid, "message": "Ping"},
            ).json()
            live.until("Noted the ping.")
            body = json.dumps({"status": f"green {HOSTILE}"}).encode()
            ts = str(int(time.time()))
            headers = {
                "X-Xclaw-Timestamp": ts,
                "X-Xclaw-Delivery": "build-7",
                "X-Xclaw-Signature": sign(hook["secret"], ts, body),
            }
            r = httpx.post(f"{server.http}/hooks/ci", content=body, headers=headers, timeout=30)
            assert r.status_code == 202, r.text
            screen = live.until("Noted the build.")
            # A moment already past fires at once: its tick is when it was made.
            tick = dt.datetime.fromtimestamp(sch["nextFire"] / 1000, dt.UTC)
            label = f"⏰ schedule {sch['id']} · {tick.strftime('%Y-%m-%d %H:%M:%SZ')}"
            # Line by line as a person reads them (the prompt may share a line: `You: …`).
            shown = _lines(screen)
            fired = f"{label}\n  Ping\n"
            hooked = "↪ hook ci · delivery build-7\n  Build green ␛[2J␛]0;pwned␇�evil\n"
            assert fired in shown and hooked in shown, screen
            assert shown.index(fired) < shown.index(hooked), screen
            # The escape codes did nothing: the screen kept what came before, the title stayed.
            assert live.title() == title_before != "pwned"
            live.send("/quit", "Enter")
            # Started again on the same session: the history shows the same labels.
            again = Pane(tmux_socket, "again")
            again.start(_chat_script(server, tmp_path, sid, "again"))
            screen = _lines(again.until("[history] --- history ends ---"))
            assert f"[history] {label}\n[history]   Ping\n" in screen, screen
            assert "[history] ↪ hook ci · delivery build-7\n" in screen, screen
            assert "You: Ping" not in screen and "You: Build" not in screen
    finally:
        server.kill()
