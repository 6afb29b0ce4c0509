"""Sign-on behind a company's reverse proxy (docs/teams.md): a real nginx from Debian's
packages authenticates the person (HTTP basic auth here, standing for the company's sign-on)
and names them in `X-Forwarded-User`; xclaw believes that header only from the proxy's
address (`teams.trusted_proxies`). The WebSocket upgrade goes through nginx too.

nginx runs as a non-daemon process with its own configuration file on a free port; it
connects to xclaw from 127.0.0.2 (`proxy_bind`), so the test's own direct connections, from
127.0.0.1, are not the proxy's — even when they name 127.0.0.2 in X-Forwarded-For. Without
nginx the tests that need it are skipped with the reason, unless XCLAW_TEST_REQUIRE_NGINX=1
(CI: .ci/run installs it), which makes that a failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.gateway.harness import Client, Server
from tests.gateway.teams_harness import (
    PROXY_ADDRESS,
    SCRIPT,
    Nginx,
    ProxiedServer,
    add_user,
    basic,
    nginx_binary,
    xclaw,
)
from xclaw.gateway.identity import Authenticator
from xclaw.gateway.settings import TeamSettings
from xclaw.store.sqlite.store import SQLiteStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """xclaw trusting the proxy's address, with alice, bob and boss (an admin)."""
    root = tmp_path_factory.mktemp("proxy")
    script = root / "xclaw" / "script.json"
    script.parent.mkdir()
    script.write_text(json.dumps(SCRIPT))
    server = ProxiedServer(root=root / "xclaw", script=script, approval="ask").start()
    try:
        add_user(server, "alice")
        add_user(server, "bob")
        add_user(server, "boss", "admin")
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def stack(proxied: Server) -> Iterator[tuple[Server, Nginx]]:
    nginx_binary()
    proxy = Nginx(proxied.root.parent / "nginx", proxied.port)
    try:
        yield proxied, proxy
    finally:
        proxy.stop()


async def test_the_proxy_signs_people_in_over_http_and_websocket(
    stack: tuple[Server, Nginx],
) -> None:
    server, proxy = stack
    async with httpx.AsyncClient(base_url=proxy.http, timeout=15) as http:
        me = (await http.get("/api/health", headers=basic("alice", "alice-pw"))).json()
        assert (me["user"], me["role"]) == ("alice", "member")
        # The page itself comes through the proxy too.
        assert (await http.get("/", headers=basic("alice", "alice-pw"))).status_code == 200
        # No sign-on at the proxy: nginx itself refuses.
        assert (await http.get("/api/health")).status_code == 401
        # A header the client sends is the proxy's to replace: Alice stays Alice.
        spoofed = {**basic("alice", "alice-pw"), "X-Forwarded-User": "bob"}
        assert (await http.get("/api/health", headers=spoofed)).json()["user"] == "alice"
        # Someone the proxy knows but xclaw does not: refused (proxy_adds_users is off).
        r = await http.get("/api/health", headers=basic("stranger", "stranger-pw"))
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    # The WebSocket upgrade through nginx, signed in as Alice, no token anywhere.
    url = proxy.http.replace("http://", "ws://") + "/ws"
    async with connect(url, additional_headers=basic("alice", "alice-pw")) as ws:
        c = Client(ws)
        await c.attach(None)
        await c.send({"type": "message", "sessionId": c.session_id, "content": "hello"})
        assert (await c.until_type("reply", timeout=30))["content"] == "hi there"
        sid = c.session_id
    assert sid is not None
    steps = json.loads(xclaw(server, "steps", sid, "--json").stdout)
    assert steps[0]["output"]["by"]["user"] == "alice"
    # Bob, through the proxy, does not see Alice's session.
    async with httpx.AsyncClient(base_url=proxy.http, timeout=15) as http:
        r = await http.get(f"/api/sessions/{sid}", headers=basic("bob", "bob-pw"))
        assert r.status_code == 404
        r = await http.get(f"/api/sessions/{sid}", headers=basic("alice", "alice-pw"))
        assert r.status_code == 200


async def test_the_header_is_believed_from_the_proxy_only(proxied: Server) -> None:
    """Straight to xclaw, not through nginx: the header signs nobody in."""
    async with httpx.AsyncClient(base_url=proxied.http, timeout=15) as http:
        r = await http.get("/api/health", headers={"X-Forwarded-User": "alice"})
        assert r.status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - refused: 4401 after the error frame
        async with connect(proxied.ws_url, additional_headers={"X-Forwarded-User": "alice"}) as ws:
            await ws.send(json.dumps({"type": "reconnect", "sessionId": None}))
            frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
            assert frame["code"] == "unauthorized"
            await asyncio.wait_for(ws.recv(), 15)


async def test_a_local_process_cannot_pass_for_the_proxy(proxied: Server) -> None:
    """The address checked is the socket's peer: a process on the machine that names the
    proxy's address in X-Forwarded-For (which the ASGI server would believe from loopback)
    signs in as nobody, over HTTP and WebSocket — least of all as an admin."""
    spoof = {"X-Forwarded-For": PROXY_ADDRESS, "X-Forwarded-User": "boss"}
    async with httpx.AsyncClient(base_url=proxied.http, timeout=15) as http:
        r = await http.get("/api/health", headers=spoof)
        assert r.status_code == 401, r.text
        r = await http.get("/api/sessions", headers={**spoof, "X-Real-IP": PROXY_ADDRESS})
        assert r.status_code == 401, r.text
    async with connect(proxied.ws_url, additional_headers=spoof) as ws:
        # Had the header been believed, this would attach as boss; it is the token frame.
        await ws.send(json.dumps({"type": "reconnect", "sessionId": None}))
        frame = json.loads(await asyncio.wait_for(ws.recv(), 15))
        assert frame.get("code") == "unauthorized", frame
    logs = proxied.logs()
    assert "client=127.0.0.1 via=http" in logs and "client=127.0.0.1 via=websocket" in logs
    assert f"client={PROXY_ADDRESS}" not in logs


async def test_proxy_adds_users_makes_a_member_of_a_name_it_vouches_for(tmp_path: Path) -> None:
    """With `teams.proxy_adds_users`, a name first seen from the proxy becomes a member (no
    token: they sign in through the proxy only); `admin` is never such a name."""
    store = SQLiteStore(tmp_path / "x.db")
    try:
        settings = TeamSettings(trusted_proxies=("10.1.0.0/16",), proxy_adds_users=True)
        auth = Authenticator("s" * 32, store.teams, settings)
        header = {"x-forwarded-user": "zoe"}
        signed = await auth.identify(None, "10.1.2.3", header)
        assert signed is not None and signed.identity.user == "zoe"
        zoe = store.teams.get_user("zoe")
        assert zoe is not None and zoe.role.value == "member" and zoe.token_hash is None
        assert await auth.identify(None, "10.2.0.1", header) is None  # not a trusted address
        assert await auth.identify(None, "10.1.2.3", {"x-forwarded-user": "admin"}) is None
        assert await auth.identify(None, "10.1.2.3", {"x-forwarded-user": "a b"}) is None
        # Behind the proxy, failures count against the client it names, not the proxy.
        assert auth.client_address("10.1.2.3", {"x-forwarded-for": "1.2.3.4, 5.6.7.8"}) == "5.6.7.8"
        assert auth.client_address("10.9.9.9", {"x-forwarded-for": "1.2.3.4"}) == "10.9.9.9"
    finally:
        store.close()
