"""A user's token never reaches another user's sessions, by any route (docs/teams.md,
docs/security.md): every WebSocket frame that names a session, every HTTP route the app has
(enumerated from the app itself, so a route added later is tried too), prefixes of ids,
/switch, the session list and its search, branch comparison, exports, a second socket of the
same user. Another's session answers exactly as an id nobody has; nothing of it leaks into an
answer, and nothing of it changes. Tokens are compared in constant time and never logged.
A real server, real sockets, the real CLI."""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route, WebSocketRoute
from websockets.asyncio.client import connect

from tests.gateway.harness import Client, Server
from tests.gateway.teams_harness import add_user, team_server, xclaw
from tests.security.existence_probe import KINDS, probe_pairs
from xclaw.config.settings import Settings
from xclaw.gateway.app import create_app
from xclaw.gateway.identity import Authenticator
from xclaw.gateway.settings import TeamSettings
from xclaw.people.teams import UserRole, new_token, token_hash
from xclaw.runtime.runtime import Runtime
from xclaw.store.sqlite.store import SQLiteStore

pytestmark = pytest.mark.slow

SECRET_TITLE = "alice private plans 7f3a"


class Victim:
    """Alice's sessions: one that waits for her approval, one with a history to rewind."""

    def __init__(self, server: Server, token: str) -> None:
        self.server = server
        self.token = token
        self.waiting = ""  # a session Paused on an approval
        self.step = ""  # its pending approval's step id
        self.done = ""  # a finished session
        self.client: Client | None = None

    async def set_up(self) -> None:
        c = await Client.open(self.server, token=self.token)
        await c.attach("alice-done-1")  # an id she chose: guessable, still hers
        await c.send({"type": "message", "sessionId": "alice-done-1", "content": "hello"})
        await c.until_type("reply", timeout=30)
        await c.send({"type": "message", "content": f"/title {SECRET_TITLE}"})
        await c.until(lambda f: f.get("type") == "renamed")
        self.done = "alice-done-1"
        await c.attach(None)
        await c.send({"type": "message", "sessionId": c.session_id, "content": "write f"})
        ask = await c.until_type("approval_request", timeout=30)
        assert c.session_id is not None
        self.waiting, self.step = c.session_id, ask["stepId"]
        self.client = c

    def record(self) -> dict[str, Any]:
        """What her sessions hold, read by the admin: compared before and after."""
        with httpx.Client(
            base_url=f"{self.server.http}/api",
            headers={"Authorization": f"Bearer {self.server.token}"},
            timeout=15,
        ) as admin:
            out = {}
            for sid in (self.done, self.waiting):
                s = admin.get(f"/sessions/{sid}").json()
                steps = admin.get(f"/sessions/{sid}/steps", params={"n": 0}).json()["steps"]
                out[sid] = (s["title"], s["status"], [(x["id"], x["status"]) for x in steps])
            return out


@pytest.fixture(scope="module")
def server(module_server_factory: Any) -> Server:
    return team_server(module_server_factory, name="isolation")


@pytest.fixture(scope="module")
def tokens(server: Server) -> dict[str, str]:
    return {name: add_user(server, name) for name in ("alice", "mallory")}


@pytest.fixture
async def victim(server: Server, tokens: dict[str, str]) -> Victim:
    v = Victim(server, tokens["alice"])
    await v.set_up()
    return v


def leaks(text: str, v: Victim) -> bool:
    return any(x in text for x in (v.waiting, v.done, SECRET_TITLE, "alice-done"))


async def refused(c: Client, frame: dict[str, Any], v: Victim) -> dict[str, Any]:
    await c.send(frame)
    err = await c.until_type("error")
    assert err["code"] == "unknown_session", (frame, err)
    return err


async def test_no_websocket_frame_reaches_another_users_session(
    server: Server, tokens: dict[str, str], victim: Victim
) -> None:
    before = victim.record()
    m = await Client.open(server, token=tokens["mallory"])
    await m.attach(None)
    await m.send({"type": "message", "sessionId": m.session_id, "content": "hello"})
    await m.until_type("reply", timeout=30)
    own = m.session_id
    hits = [
        {"type": "reconnect", "sessionId": victim.done},
        {"type": "reconnect", "sessionId": victim.waiting},
        {"type": "message", "sessionId": victim.done, "content": "hello"},
        {"type": "message", "sessionId": victim.done, "content": "/steps"},
        {"type": "message", "sessionId": victim.done, "content": "/rollback s0001"},
        {"type": "message", "sessionId": victim.done, "content": "/fork s0001 mine"},
        {"type": "message", "sessionId": victim.done, "content": "/title pwned"},
        {"type": "message", "sessionId": victim.done, "content": "/compact"},
        {"type": "message", "sessionId": victim.done, "content": "/share mallory collaborator"},
        {"type": "approval", "sessionId": victim.waiting, "stepId": victim.step, "approve": True},
        {"type": "cancel", "sessionId": victim.waiting},
        {"type": "message", "content": f"/switch {victim.done}"},
        {"type": "message", "content": "/switch alice-"},  # a prefix of her id
        {"type": "message", "content": f"/switch {victim.waiting[:6]}"},
    ]
    for frame in hits:
        err = await refused(m, frame, victim)
        assert SECRET_TITLE not in json.dumps(err)
    # Her step ids named from his own session stay hers: a bad step, not hers.
    await m.send({"type": "message", "sessionId": own, "content": f"/rollback {victim.done}:s0001"})
    assert (await m.until_type("error"))["code"] == "bad_step"
    # /sessions lists his only; every frame he got says nothing of hers.
    await m.send({"type": "message", "sessionId": own, "content": "/sessions"})
    await m.until(lambda f: f.get("type") == "notice" and "this session" in f["content"])
    assert not any(leaks(json.dumps(f), victim) for f in m.seen if f.get("type") != "error")
    # A second socket of his: the same.
    m2 = await Client.open(server, token=tokens["mallory"])
    await refused(m2, {"type": "reconnect", "sessionId": victim.done}, victim)
    await refused(
        m2,
        {"type": "approval", "sessionId": victim.waiting, "stepId": victim.step, "approve": False},
        victim,
    )
    # Her session is as it was, and her approval still waits for her.
    assert victim.record() == before
    assert victim.client is not None
    await victim.client.send(
        {"type": "approval", "sessionId": victim.waiting, "stepId": victim.step, "approve": True}
    )
    assert (await victim.client.until_type("reply", timeout=30))["content"] == "done"
    await m.close()
    await m2.close()


async def test_an_id_taken_by_another_cannot_be_started_or_joined(
    server: Server, tokens: dict[str, str], victim: Victim
) -> None:
    """Client-chosen ids (the tutorial's clients bring their own): one that someone else
    holds is refused as unknown, never attached as new and written into."""
    before = victim.record()
    m = await Client.open(server, token=tokens["mallory"])
    await m.send({"type": "message", "sessionId": victim.done, "content": "hello"})
    assert (await m.until_type("error"))["code"] == "unknown_session"
    # Attached to a new session of his own under her id, his first message is refused too.
    await m.send({"type": "reconnect", "sessionId": victim.done})
    assert (await m.until_type("error"))["code"] == "unknown_session"
    await m.send({"type": "message", "content": "hello"})
    await m.until(lambda f: f.get("type") in ("reply", "error"), timeout=30)
    assert "mallory" not in xclaw(server, "steps", victim.done, "--json").stdout
    assert victim.record() == before
    await m.close()


async def test_another_users_session_is_refused_as_fast_as_an_unknown_id(
    server: Server, tokens: dict[str, str], victim: Victim
) -> None:
    """Existence by timing: `message`, `approval` and `cancel` naming her session and naming
    an id nobody has take one lookup (existence and part together), the same path, the same
    time. Before, hers took a second lookup: ~50-100 µs slower, told apart from one probe in
    65-95 % of tries (bench/existence_bench.py gives the figures)."""
    async with connect(
        server.ws_url, additional_headers={"Authorization": f"Bearer {tokens['mallory']}"}
    ) as ws:
        for kind in KINDS:
            t = await probe_pairs(ws, victim.done, kind, pairs=1000)
            seen = (kind, t.medians, t.paired_difference_us, t.accuracy())
            assert abs(t.paired_difference_us) < 20, seen
            assert t.accuracy() < 0.6, seen


def _app_routes(tmp: Path) -> list[tuple[str, str, bool]]:
    """(kind, path, is a Mount of files) of every route the real app has, Mounts walked."""
    settings = Settings(home=tmp, database=str(tmp / "x.db"), workspace_root=tmp / "ws")
    store = SQLiteStore(tmp / "x.db")
    runtime = Runtime(store, settings)
    try:
        app = create_app(settings, store, runtime, token="t" * 32)
        found: list[tuple[str, str, bool]] = []
        stack: list[tuple[str, Any]] = [("", r) for r in app.routes]
        while stack:
            prefix, route = stack.pop()
            if isinstance(route, Mount):
                inner = route.routes
                if inner:
                    stack += [(prefix + route.path, r) for r in inner]
                else:
                    found.append(("files", prefix + route.path + "/{path}", True))
            elif isinstance(route, WebSocketRoute):
                found.append(("ws", prefix + route.path, False))
            elif isinstance(route, Route):
                for method in sorted(route.methods or ()):
                    if method != "HEAD":
                        found.append((method, prefix + route.path, False))
            else:
                raise AssertionError(f"a route of an unknown kind: {route!r}")
        return found
    finally:
        runtime._threads.shutdown(wait=True)
        store.close()


async def test_every_http_route_refuses_another_users_session(
    server: Server, tokens: dict[str, str], victim: Victim, tmp_path: Path
) -> None:
    routes = _app_routes(tmp_path)
    api = [(m, p) for m, p, files in routes if p.startswith("/api/")]
    assert ("GET", "/api/sessions/{sid}/export") in api and len(api) >= 12
    before = victim.record()
    body = {"stepId": "s0001", "title": "pwned", "approve": True}
    headers = {"Authorization": f"Bearer {tokens['mallory']}"}
    tried = 0
    made: list[str] = []
    async with httpx.AsyncClient(base_url=server.http, timeout=15) as http:
        for method, path in api:
            for sid in (victim.done, victim.waiting, victim.done[:5]):
                # A budget's target may be her session (docs/budgets.md).
                url = path.replace("{sid}", sid).replace("{target}", sid)
                url = re.sub(r"\{[^}]+\}", "x", url.replace("{step}", victim.step))
                r = await http.request(method, url, headers=headers, json=body)
                tried += 1
                if "{sid}" in path or ("{target}" in path and method == "GET"):
                    assert r.status_code == 404, (method, url, r.text)
                    assert r.json()["code"] == "unknown_session", (method, url, r.text)
                elif "{target}" in path:  # caps and grants: an admin's, refused as such
                    assert r.status_code == 403, (method, url, r.text)
                    assert r.json()["code"] == "forbidden", (method, url, r.text)
                else:
                    # His own doing (a list, the health, a session he creates: his own; a
                    # schedule or hook `x` he does not have is not found).
                    mine = (200, 201, 400, 405) + ((404,) if "{" in path else ())
                    assert r.status_code in mine, (method, url, r.text)
                    if r.status_code == 201:
                        made.append(r.json()["sessionId"])
                ours = "{sid}" in path or "{target}" in path
                assert not leaks(r.text.replace(sid, "") if ours else r.text, victim), (
                    method,
                    url,
                    r.text,
                )
        # The list and its search (words, prefixes, states) show none of hers.
        for params in (
            {},
            {"q": SECRET_TITLE},
            {"q": "alice"},
            {"prefix": victim.done[:3]},
            {"state": "paused"},
            {"limit": "10000"},
        ):
            r = await http.get("/api/sessions", params=params, headers=headers)
            assert not leaks(r.text, victim), (params, r.text)
        # Branch comparison reads both sides' steps: hers is refused like any other read.
        r = await http.get(f"/api/sessions/{victim.done}/steps", params={"n": 0}, headers=headers)
        assert r.status_code == 404
        # The token in the query string, as the page's socket sends it: the same answers.
        r = await http.get(
            f"/api/sessions/{victim.done}/export", params={"token": tokens["mallory"]}
        )
        assert r.status_code == 404
    assert tried >= 36
    # What his token created is his, and hers never sees it.
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    async with httpx.AsyncClient(base_url=f"{server.http}/api", timeout=15) as http:
        for sid in made:
            assert (await http.get(f"/sessions/{sid}", headers=headers)).status_code == 200
            assert (await http.get(f"/sessions/{sid}", headers=alice)).status_code == 404
    assert victim.record() == before  # nothing renamed, rolled back, forked, answered, deleted


def test_tokens_are_compared_in_constant_time(tmp_path: Path, monkeypatch: Any) -> None:
    """Both the server's token and a user's pass through hmac.compare_digest."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    store = SQLiteStore(tmp_path / "x.db")
    try:
        token = new_token()
        store.teams.add_user("alice", UserRole.MEMBER, token_hash(token))
        auth = Authenticator("server-token-" + "s" * 20, store.teams, TeamSettings())

        async def sign_in(given: str) -> Any:
            return await auth.identify(given, "127.0.0.1", {})

        assert asyncio.run(sign_in("server-token-" + "s" * 20)) is not None
        assert any(a == b"server-token-" + b"s" * 20 for a, _ in calls)
        calls.clear()
        signed = asyncio.run(sign_in(token))
        assert signed is not None and signed.identity.user == "alice"
        # Against the users' by its hash (the token itself only against the server's).
        assert (token_hash(token).encode(), token_hash(token).encode()) in calls
        assert all(b == b"server-token-" + b"s" * 20 for a, b in calls if a == token.encode())
    finally:
        store.close()


async def test_no_token_reaches_the_logs(
    server: Server, tokens: dict[str, str], victim: Victim
) -> None:
    """After good and bad tokens in headers, query strings and first frames, the server's
    log holds none of them (its own token is only in the banner it prints)."""
    bad = new_token()
    async with httpx.AsyncClient(base_url=f"{server.http}/api", timeout=15) as http:
        await http.get("/health", params={"token": tokens["mallory"]})
        await http.get("/health", params={"token": bad})
        await http.get("/sessions", headers={"Authorization": f"Bearer {bad}"})
    for url in (f"{server.ws_url}?token={bad}", server.ws_url):
        async with connect(url) as ws:
            if "token=" not in url:
                await ws.send(json.dumps({"type": "reconnect", "token": bad}))
            await ws.recv()
    logs = server.logs()
    assert "event=refused reason=token" in logs  # the refusals were logged...
    for secret in (*tokens.values(), bad, server.token):
        assert secret not in logs  # ...without any token
    banner = "".join(p.read_text() for p in sorted(server.root.glob("stdout-*.txt")))
    for secret in (*tokens.values(), bad):
        assert secret not in banner


async def test_two_people_on_one_new_id_the_second_sees_nothing_of_the_first(
    server: Server, tokens: dict[str, str]
) -> None:
    """Both attach to an id nobody has written (the tutorial's clients choose ids): the first
    to send makes it theirs; the other socket is shown none of its frames and is detached,
    told as for an unknown id."""
    sid = "web-shared-name-1"
    a = await Client.open(server, token=tokens["alice"])
    m = await Client.open(server, token=tokens["mallory"])
    await m.attach(sid)
    await a.attach(sid)
    await a.send({"type": "message", "sessionId": sid, "content": "hello, mine"})
    assert (await a.until_type("reply", timeout=30))["content"] == "hi there"
    lost = await m.until(lambda f: f.get("type") == "error", timeout=5)
    assert lost["code"] == "unknown_session"
    shown = [f for f in m.seen if f.get("type") not in ("session", "history", "status", "error")]
    assert shown == [], shown
    assert not any("hi there" in json.dumps(f) or "hello, mine" in json.dumps(f) for f in m.seen)
    await m.send({"type": "message", "sessionId": sid, "content": "hello"})
    assert (await m.until_type("error"))["code"] == "unknown_session"
    await a.close()
    await m.close()
