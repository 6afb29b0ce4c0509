"""Teams (docs/teams.md) through a real server, real sockets and the real CLI: each person sees
their own sessions; sharing lets a viewer read and not act, an approver answer approvals, a
collaborator act; the record names who sent, approved, cancelled, rolled back and forked;
removing a user or replacing their token ends their access on the spot."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.gateway.harness import Client, Server
from tests.gateway.teams_harness import add_user, share, team_server, xclaw
from xclaw.wire.http_bodies import Health

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def team(module_server_factory: Any) -> Server:
    return team_server(module_server_factory)


@pytest.fixture(scope="module")
def tokens(team: Server) -> dict[str, str]:
    return {name: add_user(team, name) for name in ("alice", "bob", "carol", "dave")}


async def own_session(server: Server, token: str, text: str = "hello") -> tuple[Client, str]:
    """A session the token's user starts with a message answered at once."""
    c = await Client.open(server, token=token)
    await c.attach(None)
    await c.send({"type": "message", "sessionId": c.session_id, "content": text})
    await c.until_type("reply", timeout=30)
    assert c.session_id is not None
    return c, c.session_id


async def error_of(c: Client, frame: dict[str, Any]) -> dict[str, Any]:
    await c.send(frame)
    return await c.until_type("error")


def api(server: Server, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {token}"}, timeout=15
    )


async def test_each_user_sees_only_their_own_sessions(team: Server, tokens: dict[str, str]) -> None:
    a, mine = await own_session(team, tokens["alice"])
    b, theirs = await own_session(team, tokens["bob"])
    async with api(team, tokens["alice"]) as alice, api(team, tokens["bob"]) as bob:
        listed = [s["sessionId"] for s in (await alice.get("/sessions")).json()["sessions"]]
        assert mine in listed and theirs not in listed
        assert (await bob.get(f"/sessions/{mine}")).status_code == 404
        assert (await bob.get(f"/sessions/{mine}")).json()["code"] == "unknown_session"
        health = (await bob.get("/health")).json()
        assert health["user"] == "bob" and health["role"] == "member"
    # The admin (the server's token) sees both.
    async with api(team, team.token) as admin:
        everything = {s["sessionId"] for s in (await admin.get("/sessions")).json()["sessions"]}
        assert {mine, theirs} <= everything
        assert (await admin.get("/health")).json()["user"] is None
    # On the socket: /sessions lists Bob's only; attaching to Alice's is an unknown id.
    await b.send({"type": "message", "sessionId": theirs, "content": "/sessions"})
    listing = await b.until(lambda f: f.get("type") == "notice" and "this session" in f["content"])
    assert theirs in listing["content"] and mine not in listing["content"]
    await b.send({"type": "reconnect", "sessionId": mine})
    err = await b.until_type("error")
    assert err["code"] == "unknown_session"
    await a.close()
    await b.close()


async def test_a_members_new_session_tells_them_everything_its_first_message_does(
    team: Server, tokens: dict[str, str]
) -> None:
    """Frames of a session nobody has written are held back from a member's socket until it
    is written as theirs; then every one goes out, the title it got from the first message
    included (none kept back: docs/teams.md, how a new id is decided)."""
    c = await Client.open(team, token=tokens["carol"])
    await c.attach("carol-chose-this-id")
    await c.send({"type": "message", "sessionId": c.session_id, "content": "hello there"})
    await c.until_type("reply", timeout=30)
    if not c.of_type("renamed"):  # it comes before the reply; waited for, to say so if not
        await c.until_type("renamed", timeout=5)
    assert [f["title"] for f in c.of_type("renamed")] == ["hello there"]
    steps = [f["step"]["type"] for f in c.of_type("step")]
    assert steps[0] == "user_input", steps
    await c.close()


# What /api/health says of the deployment — where its database is, which worker answered (its
# host), how many sockets and commits — is for whoever runs it, not for a member.
DEPLOYMENT = ("database", "worker", "sockets", "backend", "commits", "writerBusyMs")


async def test_health_shows_a_member_their_own_part_and_nothing_of_the_deployment(
    team: Server, tokens: dict[str, str]
) -> None:
    erin = add_user(team, "erin", role="admin")
    async with api(team, tokens["carol"]) as carol, api(team, erin) as admin_user:
        member = (await carol.get("/health")).json()
        Health.model_validate(member)  # the same document, as its declaration says
        assert {k: member[k] for k in DEPLOYMENT} == dict.fromkeys(DEPLOYMENT)
        assert member["status"] == "ok" and member["version"]
        assert member["user"] == "carol" and member["role"] == "member"
        assert member["sessionsDriven"] == []
        for everything in ((await admin_user.get("/health")).json(), await _admin_health(team)):
            assert everything["database"] and everything["worker"]
            assert everything["backend"] == "sqlite" and isinstance(everything["sockets"], int)
            assert isinstance(everything["commits"], int)


async def _admin_health(server: Server) -> dict[str, Any]:
    async with api(server, server.token) as admin:
        answer: dict[str, Any] = (await admin.get("/health")).json()
        return answer


async def test_a_viewer_reads_and_follows_but_cannot_act(
    team: Server, tokens: dict[str, str]
) -> None:
    a, sid = await own_session(team, tokens["alice"])
    share(team, sid, "carol", "viewer")
    c = await Client.open(team, token=tokens["carol"])
    await c.attach(sid)
    history = next(f for f in c.seen if f.get("type") == "history")
    assert "hi there" in history["content"]
    for frame in (
        {"type": "message", "sessionId": sid, "content": "hello again"},
        {"type": "message", "sessionId": sid, "content": "/rollback s0001"},
        {"type": "message", "sessionId": sid, "content": "/fork s0001"},
        {"type": "message", "sessionId": sid, "content": "/title mine now"},
        {"type": "message", "sessionId": sid, "content": "/compact"},
        {"type": "cancel", "sessionId": sid},
        {"type": "approval", "sessionId": sid, "stepId": "s0002", "approve": True},
    ):
        err = await error_of(c, frame)
        assert err["code"] == "forbidden", (frame, err)
    await c.send({"type": "message", "sessionId": sid, "content": "/steps"})
    assert (await c.until_type("steps"))["steps"]
    async with api(team, tokens["carol"]) as carol:
        assert (await carol.get(f"/sessions/{sid}/steps")).status_code == 200
        assert (await carol.get(f"/sessions/{sid}/export")).status_code == 200
        r = await carol.post(f"/sessions/{sid}/rollback", json={"stepId": "s0001"})
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert (await carol.delete(f"/sessions/{sid}")).status_code == 403
        assert (await carol.patch(f"/sessions/{sid}", json={"title": "x"})).status_code == 403
    # Following live: Alice's next turn reaches Carol's socket.
    await a.send({"type": "message", "sessionId": sid, "content": "hello once more"})
    assert (await c.until_type("reply", timeout=30))["content"] == "hi there"
    await a.close()
    await c.close()


async def test_a_token_quoted_in_a_shared_session_reaches_no_one(
    team: Server, tokens: dict[str, str]
) -> None:
    """Alice pastes her own token (and the admin's) into a session she shares: whoever the
    session is shared with, by any route, and the record itself, see it masked — else a
    viewer could sign in as her."""
    quoted = (tokens["alice"], team.token)
    text = f"hello, my token is {quoted[0]} and the admin's {quoted[1]}"
    a, sid = await own_session(team, tokens["alice"], text)
    share(team, sid, "dave", "viewer")
    d = await Client.open(team, token=tokens["dave"])
    await d.attach(sid)
    await d.send({"type": "message", "sessionId": sid, "content": "/steps"})
    await d.until_type("steps")
    seen = {"dave's frames": "\n".join(json.dumps(f) for f in d.seen)}
    async with api(team, tokens["dave"]) as dave:
        for route in ("", "/steps", "/history", "/export", "/tree"):
            r = await dave.get(f"/sessions/{sid}{route}")
            assert r.status_code == 200, (route, r.text)
            seen[f"GET /api/sessions/ID{route}"] = r.text
    seen["xclaw steps"] = xclaw(team, "steps", sid, "--json").stdout
    seen["xclaw export"] = xclaw(team, "export", sid).stdout
    db = team.home / "xclaw.db"
    seen["the database"] = "".join(
        p.read_bytes().decode("latin-1") for p in (db, Path(f"{db}-wal")) if p.exists()
    )
    assert "[REDACTED]" in seen["dave's frames"] and "[REDACTED]" in seen["xclaw export"]
    leaks = [where for where, what in seen.items() if any(t in what for t in quoted)]
    assert not leaks
    await a.close()
    await d.close()


async def test_an_approver_answers_and_the_record_names_them(
    team: Server, tokens: dict[str, str]
) -> None:
    a = await Client.open(team, token=tokens["alice"])
    await a.attach(None)
    await a.send({"type": "message", "sessionId": a.session_id, "content": "write f"})
    ask = await a.until_type("approval_request", timeout=30)
    sid = a.session_id
    assert sid is not None
    share(team, sid, "dave", "approver")
    d = await Client.open(team, token=tokens["dave"])
    await d.attach(sid)
    err = await error_of(d, {"type": "message", "sessionId": sid, "content": "hello"})
    assert err["code"] == "forbidden"  # an approver sends no messages
    edited = {
        "type": "approval",
        "sessionId": sid,
        "stepId": ask["stepId"],
        "approve": True,
        "input": {"command": "echo mine > f"},
    }
    err = await error_of(d, edited)
    assert err["code"] == "forbidden"  # an edited call is the editor's act: a collaborator's
    await d.send(
        {
            "type": "approval",
            "sessionId": sid,
            "stepId": ask["stepId"],
            "approve": True,
            "client": "chat",
        }
    )
    assert (await a.until_type("reply", timeout=30))["content"] == "done"
    step = next(
        f["step"]
        for f in a.seen
        if f.get("type") == "step"
        and f["step"]["id"] == ask["stepId"]
        and f["step"]["status"] != "running"
    )
    assert step["output"] == {
        "approved": True,
        "why": "approved by dave (xclaw chat)",
        "by": {"kind": "person", "client": "chat", "via": "websocket", "user": "dave"},
    }
    # Who sent the message is recorded with it; the CLI and the export say both.
    steps = json.loads(xclaw(team, "steps", sid, "--json").stdout)
    first = steps[0]
    assert first["type"] == "user_input"
    assert first["output"]["by"] == {"kind": "person", "via": "websocket", "user": "alice"}
    listing = xclaw(team, "steps", sid).stdout
    assert "user_input    alice" in listing
    assert "approved by dave (xclaw chat)" in listing
    async with api(team, tokens["alice"]) as alice:
        lines = [
            json.loads(x) for x in (await alice.get(f"/sessions/{sid}/export")).text.splitlines()
        ]
    assert lines[0]["owner"] == "alice"
    assert any(
        x.get("output", {}) and x["output"].get("by", {}).get("user") == "dave" for x in lines
    )
    await a.close()
    await d.close()


async def test_a_collaborator_acts_and_forks_are_the_makers(
    team: Server, tokens: dict[str, str]
) -> None:
    a, sid = await own_session(team, tokens["alice"])
    share(team, sid, "bob", "collaborator")
    b = await Client.open(team, token=tokens["bob"])
    await b.attach(sid)
    await b.send({"type": "message", "sessionId": sid, "content": "hello from bob"})
    assert (await b.until_type("reply", timeout=30))["content"] == "hi there"
    await b.send({"type": "message", "sessionId": sid, "content": "/fork s0002 bob's branch"})
    forked = await b.until_type("forked")
    fork_id = forked["sessionId"]
    await b.send({"type": "message", "sessionId": sid, "content": "/rollback s0003"})
    await b.until_type("rolledback")
    async with api(team, tokens["alice"]) as alice, api(team, tokens["bob"]) as bob:
        assert (await alice.get(f"/sessions/{fork_id}")).status_code == 404  # Bob's, not Alice's
        assert (await bob.get(f"/sessions/{fork_id}")).status_code == 200
        export = [
            json.loads(x) for x in (await bob.get(f"/sessions/{fork_id}/export")).text.splitlines()
        ]
        assert export[0]["owner"] == "bob"
        assert export[0]["actions"][0]["kind"] == "fork"
        assert export[0]["actions"][0]["user"] == "bob"
        own = [
            json.loads(x) for x in (await alice.get(f"/sessions/{sid}/export")).text.splitlines()
        ]
        assert [(x["kind"], x["user"]) for x in own[0]["actions"]] == [
            ("share", None),  # the admin shared it, with `xclaw share`
            ("rollback", "bob"),
        ]
    # `xclaw steps` tells who did what the steps do not show.
    listing = xclaw(team, "steps", sid).stdout
    assert "bob rolled back to before s0003" in listing
    await a.close()
    await b.close()


async def test_cancel_is_recorded_with_who_cancelled(team: Server, tokens: dict[str, str]) -> None:
    a = await Client.open(team, token=tokens["alice"])
    await a.attach(None)
    await a.send({"type": "message", "sessionId": a.session_id, "content": "slow please"})
    await a.until(lambda f: f.get("type") == "status" and f.get("status") == "Running")
    await a.send({"type": "cancel", "sessionId": a.session_id})
    await a.until(lambda f: f.get("type") == "notice" and "[cancel]" in f["content"])
    assert a.session_id is not None
    assert "alice cancelled the run" in xclaw(team, "steps", a.session_id).stdout
    await a.close()


async def test_share_from_the_socket_and_its_refusals(team: Server, tokens: dict[str, str]) -> None:
    a, sid = await own_session(team, tokens["alice"])
    await a.send({"type": "message", "sessionId": sid, "content": "/share dave viewer"})
    said = await a.until(lambda f: f.get("type") == "notice" and "[share]" in f["content"])
    assert "shared with dave as viewer" in said["content"]
    await a.send({"type": "message", "sessionId": sid, "content": "/share"})
    listed = await a.until(
        lambda f: f.get("type") == "notice" and "[share] session" in f["content"]
    )
    assert "alice" in listed["content"] and "dave" in listed["content"]
    assert (await error_of(a, {"type": "message", "content": "/share nobody viewer"}))[
        "code"
    ] == "bad_command"
    # A viewer may not share on.
    d = await Client.open(team, token=tokens["dave"])
    await d.attach(sid)
    err = await error_of(d, {"type": "message", "sessionId": sid, "content": "/share bob viewer"})
    assert err["code"] == "forbidden"
    await a.send({"type": "message", "sessionId": sid, "content": "/share dave remove"})
    await a.until(lambda f: f.get("type") == "notice" and "no longer has" in f["content"])
    # Dave's socket loses the session within the watch's second.
    lost = await d.until(lambda f: f.get("type") == "error", timeout=5)
    assert lost["code"] == "unknown_session"
    await a.close()
    await d.close()


async def test_removing_a_user_or_replacing_a_token_ends_access_at_once(
    server_factory: Any,
) -> None:
    server = team_server(server_factory, name="revoke")
    erin = add_user(server, "erin")
    c, sid = await own_session(server, erin)
    xclaw(server, "users", "remove", "erin")
    # The open socket is closed with 4401, within about a second.
    with pytest.raises(ConnectionClosed) as closed:
        await c.until(lambda f: False, timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    assert any(f.get("code") == "unauthorized" for f in c.seen)
    async with api(server, erin) as gone:
        assert (await gone.get("/sessions")).status_code == 401
    # The session stays, the admin's.
    async with api(server, server.token) as admin:
        assert (await admin.get(f"/sessions/{sid}")).status_code == 200
    # A new token: the old one stops, the new one works.
    frank = add_user(server, "frank")
    fresh = xclaw(server, "users", "token", "frank").stdout.strip()
    await asyncio.sleep(1.2)  # past the one-second cache
    async with api(server, frank) as old, api(server, fresh) as new:
        assert (await old.get("/sessions")).status_code == 401
        assert (await new.get("/sessions")).status_code == 200
    listing = xclaw(server, "users", "list").stdout
    assert "frank" in listing and "erin" not in listing and fresh not in listing


async def test_failed_sign_ins_are_throttled_per_address(server_factory: Any) -> None:
    """Thirty wrong tokens from one address: its further guesses are refused unchecked, over
    HTTP and WebSocket; a token of the form xclaw issues is still checked, so a valid one —
    the server's, a member's — is never locked out by the failures; each refusal is logged
    once, HTTP like WebSocket, and the block in one line."""
    server = team_server(server_factory, name="throttle")
    alice = add_user(server, "alice")
    assert server.token.startswith("xcs_")  # generated: the issued form
    async with httpx.AsyncClient(base_url=f"{server.http}/api", timeout=15) as http:

        async def health(token: str) -> httpx.Response:
            return await http.get("/health", headers={"Authorization": f"Bearer {token}"})

        codes = [(await health(f"xcu_guess{i:040d}")).status_code for i in range(30)]
        assert set(codes) == {401}
        blocked = await health("xcu_guess-31")
        assert blocked.status_code == 429 and blocked.json()["code"] == "too_many_attempts"
        assert (await http.get("/health")).status_code == 429  # no token at all: the same
        assert (await health(server.token)).json()["user"] is None  # the admin, signed in
        assert (await health(alice)).json()["user"] == "alice"
        wrong = "xcu_" + "A" * 43  # the form, checked, wrong: refused as such
        assert (await health(wrong)).status_code == 401
    c = None
    with pytest.raises(Exception):  # noqa: B017 - the socket is refused at once
        c = await Client.open(server, token="not-a-token-of-ours")
        await c.until(lambda f: False, timeout=5)
    assert c is None or any(f.get("code") == "too_many_attempts" for f in c.seen)
    ok = await Client.open(server, token=alice)
    await ok.attach(None)
    assert ok.session_id is not None
    logs = server.logs()
    assert logs.count("event=refused reason=token given=yes client=127.0.0.1 via=http") == 30
    assert logs.count("event=throttled client=127.0.0.1 via=http failures=30") == 1
    assert logs.count("event=refused") == 30  # the refused guesses after it: not one line each
