"""Helpers for the team tests: users made with the real `xclaw users` command, a script that
asks an approval, answers plainly, or takes its time."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Server, clean_env, xclaw_cmd
from tests.ports import free_port


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


# --- a real reverse proxy (tests/gateway/test_proxy_signon.py, tests/web) -------------------

PROXY_ADDRESS = "127.0.0.2"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        reason = "nginx is not installed (apt-get install -y nginx)"
        if os.environ.get("XCLAW_TEST_REQUIRE_NGINX") == "1":
            pytest.fail(f"{reason} (XCLAW_TEST_REQUIRE_NGINX=1 makes this a failure)")
        pytest.skip(reason)
    return found


class ProxiedServer(Server):
    """An xclaw server with a `teams:` section: by default, trusting the proxy's address."""

    teams: str = f"  trusted_proxies: [{PROXY_ADDRESS}]\n"

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(config.read_text() + "teams:\n" + self.teams)
        return env


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    server {{
        listen 127.0.0.1:{port};
        auth_basic "company sign-on";
        auth_basic_user_file {root}/htpasswd;
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {proxy};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            # Who signed in, as the proxy knows it; whatever the client sent is replaced.
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Authorization "";
            proxy_read_timeout 120s;
        }}
    }}
}}
"""


class Nginx:
    def __init__(self, root: Path, upstream: int) -> None:
        self.root = root
        self.port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        # {PLAIN}: nginx's plain-text htpasswd scheme (a test's passwords).
        (root / "htpasswd").write_text(
            "alice:{PLAIN}alice-pw\nbob:{PLAIN}bob-pw\nstranger:{PLAIN}stranger-pw\n"
        )
        conf = root / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(root=root, port=self.port, upstream=upstream, proxy=PROXY_ADDRESS)
        )
        self.proc = subprocess.Popen(
            [nginx_binary(), "-c", str(conf), "-p", str(root), "-e", str(root / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise AssertionError("nginx did not start: " + (root / "error.log").read_text())

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def basic(user: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


class LoadBalancer:
    """nginx running the shipped examples/deploy/nginx.conf, on the test's ports and paths. It
    listens on 127.0.0.1 and reaches the workers from 127.0.0.1."""

    def __init__(self, root: Path, upstreams: list[int]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        text = (EXAMPLES / "nginx.conf").read_text()
        servers = "".join(
            f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in upstreams
        )
        text = re.sub(r"(?m)^        server 127\.0\.0\.1:300\d[^\n]*\n", "", text)
        text = text.replace("upstream xclaw_workers {\n", "upstream xclaw_workers {\n" + servers)
        text = text.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{self.port};")
        text = text.replace("/tmp/xclaw-nginx.pid", str(root / "nginx.pid"))
        text = text.replace("/tmp/xclaw-nginx-error.log", str(root / "error.log"))
        conf = root / "nginx.conf"
        conf.write_text(text)
        self.root = root
        self.proc = subprocess.Popen(
            [nginx_binary(), "-c", str(conf), "-p", str(root), "-e", str(root / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.http}/api/health", timeout=2)  # any answer: nginx is up
                return
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise AssertionError("nginx did not start: " + (root / "error.log").read_text())

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
