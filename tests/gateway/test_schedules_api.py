"""Schedules and webhooks over the HTTP API (/api/schedules, /api/hooks) against a real
server with users: the signed-in person is the creator, their rights on the session are
checked, a member sees and changes only their own, a schedule made over HTTP fires on the
server (an `at` moment already past: at once) and a webhook made over HTTP takes a signed
request."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.gateway.harness import Server
from tests.gateway.teams_harness import add_user, share, team_server
from tests.waiting import wait_until
from xclaw.schedules.signing import sign

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(module_server_factory) -> Server:
    return team_server(module_server_factory, name="schedules")


_OPEN: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def close_http() -> object:
    yield
    while _OPEN:
        _OPEN.pop().close()


def client(server: Server, token: str) -> httpx.Client:
    c = httpx.Client(
        base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    _OPEN.append(c)
    return c


def test_schedules_over_http_with_the_owners_rights(server: Server) -> None:
    alice = client(server, add_user(server, "alice"))
    bob = client(server, add_user(server, "bob"))
    admin = client(server, server.token)
    sid = alice.post("/sessions", json={"title": "mine"}).json()["sessionId"]
    made = alice.post(
        "/schedules", json={"every": "1h", "sessionId": sid, "message": "check", "catchUp": "once"}
    )
    assert made.status_code == 201, made.text
    sch = made.json()
    assert (sch["createdBy"], sch["catchUp"], sch["kind"]) == ("alice", "once", "every")
    # bob has no part in alice's session: as for an id nobody has.
    refused = bob.post("/schedules", json={"every": "1h", "sessionId": sid, "message": "x"})
    assert refused.status_code == 404 and refused.json()["code"] == "unknown_session"
    share(server, sid, "bob", "viewer")
    viewer = bob.post("/schedules", json={"every": "1h", "sessionId": sid, "message": "x"})
    assert viewer.status_code == 403 and viewer.json()["code"] == "forbidden"
    # A viewer may read the session: forking it as a template would be theirs to do, were
    # there a step to fork from.
    no_step = bob.post("/schedules", json={"every": "1h", "forkOf": sid, "message": "x"})
    assert no_step.status_code == 400 and "no step" in no_step.json()["error"]
    # Each member sees their own; the admin every one.
    assert [s["id"] for s in alice.get("/schedules").json()["schedules"]] == [sch["id"]]
    assert bob.get("/schedules").json()["schedules"] == []
    assert sch["id"] in [s["id"] for s in admin.get("/schedules").json()["schedules"]]
    assert bob.post(f"/schedules/{sch['id']}/pause").status_code == 404
    paused = alice.post(f"/schedules/{sch['id']}/pause")
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert alice.post(f"/schedules/{sch['id']}/resume").json()["paused"] is False
    assert alice.get(f"/schedules/{sch['id']}/fires").json() == {"fires": []}
    for body, says in [
        ({"sessionId": sid, "message": "x"}, "one of cron"),
        ({"cron": "* *", "sessionId": sid, "message": "x"}, "five fields"),
        ({"every": "1h", "message": "x"}, "one of sessionId"),
        ({"every": "1h", "sessionId": sid}, "message"),
        ({"every": "1h", "sessionId": sid, "message": "x", "catchUp": "twice"}, "catchUp"),
    ]:
        r = alice.post("/schedules", json=body)
        assert r.status_code == 400 and says in r.json()["error"], (body, r.text)
    assert alice.delete(f"/schedules/{sch['id']}").status_code == 204
    assert alice.get(f"/schedules/{sch['id']}").json()["code"] == "unknown_schedule"


def test_a_schedule_made_over_http_fires_on_the_server(server: Server) -> None:
    api = client(server, server.token)
    sid = api.post("/sessions", json={"title": "t"}).json()["sessionId"]
    past = "2020-01-01T00:00:00Z"  # a moment already past: fires at once, then never again
    sch = api.post("/schedules", json={"at": past, "sessionId": sid, "message": "hello"}).json()

    def fired() -> list[dict]:  # type: ignore[type-arg]
        return [f for f in api.get(f"/schedules/{sch['id']}/fires").json()["fires"] if f["step"]]

    wait_until(lambda: len(fired()) == 1, "the schedule fires once", every=0.1)
    [f] = fired()
    assert f["state"] == "delivered" and f["id"] == f"schedule.{sch['id']}.{sch['nextFire']}"
    steps = api.get(f"/sessions/{sid}/steps").json()["steps"]
    assert [s["id"] for s in steps if s["type"] == "user_input"] == [f["step"]]
    assert api.get(f"/schedules/{sch['id']}").json()["nextFire"] is None


def test_a_webhook_made_over_http(server: Server) -> None:
    alice_token = add_user(server, "carol")
    carol = client(server, alice_token)
    sid = carol.post("/sessions", json={"title": "hooked"}).json()["sessionId"]
    made = carol.post(
        "/hooks", json={"name": "deploy", "sessionId": sid, "template": "hello {who}"}
    )
    assert made.status_code == 201, made.text
    secret = made.json()["secret"]
    assert [h["name"] for h in carol.get("/hooks").json()["hooks"]] == ["deploy"]
    assert "secret" not in carol.get("/hooks").json()["hooks"][0]
    body = json.dumps({"who": "carol"}).encode()
    ts = str(int(time.time()))
    headers = {
        "X-Xclaw-Timestamp": ts,
        "X-Xclaw-Delivery": "deploy-1",
        "X-Xclaw-Signature": sign(secret, ts, body),
    }
    r = httpx.post(f"{server.http}/hooks/deploy", content=body, headers=headers, timeout=30)
    assert r.status_code == 202 and r.json()["fire"]["state"] == "delivered", r.text
    steps = carol.get(f"/sessions/{sid}/steps").json()["steps"]
    assert [s["id"] for s in steps if s["type"] == "user_input"] == [r.json()["fire"]["step"]]
    assert carol.delete("/hooks/deploy").status_code == 204
    gone = httpx.post(f"{server.http}/hooks/deploy", content=body, headers=headers, timeout=30)
    assert gone.status_code == 401
