"""Behind the shipped load balancer (examples/deploy/nginx.conf, the real nginx from Debian's
packages): failed sign-ins are counted per client, not per balancer, without believing any
sign-on header from it; a valid token is never locked out by others' failures, nor by its own
address's; and the balancer drops a sign-on header the client sends, so it names nobody even
where its address is listed as a trusted proxy (docs/teams.md, "Failed sign-ins").

Clients reach nginx from addresses of their own on loopback (127.0.0.3, 127.0.0.4); nginx
reaches xclaw from 127.0.0.1. Without nginx the tests are skipped with the reason, unless
XCLAW_TEST_REQUIRE_NGINX=1 (CI), which makes that a failure."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.gateway.harness import Client
from tests.gateway.teams_harness import (
    SCRIPT,
    LoadBalancer,
    ProxiedServer,
    add_user,
    nginx_binary,
)

pytestmark = pytest.mark.slow

A, B = "127.0.0.3", "127.0.0.4"  # two clients behind the balancer
BALANCER = "127.0.0.1"  # where nginx reaches xclaw from


class Stack:
    def __init__(self, root: Path, teams: str) -> None:
        script = root / "script.json"
        script.write_text(json.dumps(SCRIPT))
        self.server = ProxiedServer(root=root / "xclaw", script=script, approval="ask")
        self.server.teams = teams
        self.server.start()
        self.lb: LoadBalancer | None = None
        try:
            self.tokens = {name: add_user(self.server, name) for name in ("alice",)}
            add_user(self.server, "boss", "admin")
            self.lb = LoadBalancer(root / "nginx", [self.server.port])
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.lb is not None:
            self.lb.stop()
        self.server.kill()

    @asynccontextmanager
    async def http(self, client: str) -> AsyncIterator[httpx.AsyncClient]:
        """The HTTP API through the balancer, from the address `client`."""
        assert self.lb is not None
        transport = httpx.AsyncHTTPTransport(local_address=client)
        async with httpx.AsyncClient(
            base_url=f"{self.lb.http}/api", transport=transport, timeout=15
        ) as http:
            yield http

    async def socket(self, client: str, headers: dict[str, str]) -> Client:
        """A WebSocket through the balancer, from the address `client`, attached to a new
        session; raises when it is refused (the refusal's frames in the exception)."""
        assert self.lb is not None
        conn = await connect(
            self.lb.ws_url, additional_headers=headers, local_addr=(client, 0), open_timeout=10
        )
        c = Client(conn)
        try:
            await c.attach(None)
        except ConnectionClosed as e:
            with contextlib.suppress(ConnectionClosed, TimeoutError):
                while True:  # what came before the close (the send may have failed first)
                    await c.recv(timeout=5)
            raise Refused(c.seen) from e
        return c


class Refused(Exception):
    def __init__(self, seen: list[dict[str, object]]) -> None:
        super().__init__(seen)
        self.codes = [f.get("code") for f in seen]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """xclaw believing the balancer's X-Forwarded-For, and nothing else of it."""
    nginx_binary()
    stack = Stack(tmp_path_factory.mktemp("balancer"), f"  client_address_from: [{BALANCER}]\n")
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def trusting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """xclaw whose admin listed the balancer as a trusted proxy (its sign-on header believed):
    the shipped configuration must keep a client from naming anyone through it."""
    nginx_binary()
    stack = Stack(tmp_path_factory.mktemp("trusting"), f"  trusted_proxies: [{BALANCER}]\n")
    yield stack
    stack.stop()


async def test_one_clients_failures_lock_out_neither_another_nor_a_valid_token(
    counted: Stack,
) -> None:
    alice = counted.tokens["alice"]
    async with counted.http(A) as a, counted.http(B) as b:
        codes = [
            (await a.get("/health", headers=bearer(f"wrong-token-{i}"))).status_code
            for i in range(30)
        ]
        assert set(codes) == {401}
        refused = await a.get("/health", headers=bearer("wrong-token-31"))
        assert refused.status_code == 429 and refused.json()["code"] == "too_many_attempts"
        # Naming another address itself changes nothing: nginx puts the real one last.
        spoof = {**bearer("wrong-token-32"), "X-Forwarded-For": "10.9.9.9"}
        assert (await a.get("/health", headers=spoof)).status_code == 429
        # Another client behind the same balancer: its own count, untouched.
        assert (await b.get("/health", headers=bearer(alice))).json()["user"] == "alice"
        assert (await b.get("/health", headers=bearer("wrong-token-b"))).status_code == 401
        # And the blocked client itself: a valid token is never locked out.
        assert (await a.get("/health", headers=bearer(alice))).json()["user"] == "alice"
    # The same over the WebSocket, through the balancer.
    with pytest.raises(Refused) as blocked:
        await counted.socket(A, bearer("wrong-token-ws"))
    assert "too_many_attempts" in blocked.value.codes
    for client in (B, A):
        c = await counted.socket(client, bearer(alice))
        assert c.session_id is not None
        await c.conn.close()
    logs = counted.server.logs()
    assert logs.count(f"event=refused reason=token given=yes client={A} via=http") == 30
    assert logs.count(f"event=throttled client={A} via=http") == 1
    assert logs.count(f"event=refused reason=token given=yes client={B} via=http") == 1
    # Never the balancer's address for a client's token (its readiness probe gave none).
    assert set(re.findall(r"reason=token given=yes client=(\S+)", logs)) == {A, B}


async def test_the_balancers_address_vouches_for_no_one(counted: Stack) -> None:
    """`client_address_from` believes the client's address, never a sign-on header: straight
    from the balancer's address, X-Forwarded-User names nobody."""
    async with httpx.AsyncClient(base_url=f"{counted.server.http}/api", timeout=15) as direct:
        r = await direct.get("/health", headers={"X-Forwarded-User": "boss"})
        assert r.status_code == 401
    async with counted.http(B) as b:
        r = await b.get("/health", headers={"X-Forwarded-User": "boss"})
        assert r.status_code == 401


async def test_the_shipped_balancer_drops_a_sign_on_header_the_client_sends(
    trusting: Stack,
) -> None:
    alice = trusting.tokens["alice"]
    async with trusting.http(A) as a:
        r = await a.get("/health", headers={"X-Forwarded-User": "boss"})
        assert r.status_code == 401, r.text
        # With a token of their own they are who the token says, not whom they named.
        r = await a.get("/health", headers={**bearer(alice), "X-Forwarded-User": "boss"})
        assert r.json()["user"] == "alice"
    with pytest.raises(Refused) as refused:
        await trusting.socket(B, {"X-Forwarded-User": "boss"})
    assert "unauthorized" in refused.value.codes
