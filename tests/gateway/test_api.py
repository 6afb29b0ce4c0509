"""The HTTP JSON API under /api/ against a real server."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.gateway.harness import Client, Server, xclaw_cmd

pytestmark = pytest.mark.slow

SCRIPT = [
    {"text": "Looking.", "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}]},
    {"text": "Found hi."},
    {"text": "Second answer."},
]


@pytest.fixture(scope="module")
def server(module_server_factory) -> Server:
    return module_server_factory(SCRIPT, approval="yolo", name="api")


@pytest.fixture
def api(server: Server) -> httpx.Client:
    with httpx.Client(
        base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
    ) as c:
        yield c


@pytest.fixture
async def aapi(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """The API from async tests, which must not block the event loop their client uses."""
    async with httpx.AsyncClient(
        base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
    ) as c:
        yield c


async def conversation(server: Server) -> str:
    c = await Client.open(server)
    await c.attach(None)
    assert (await c.turn("find hi"))["content"] == "Found hi."
    assert (await c.turn("and again"))["content"] == "Second answer."
    await c.close()
    return c.session_id  # type: ignore[return-value]


def test_every_api_request_needs_the_token(server: Server) -> None:
    base = f"{server.http}/api"
    for path in ("/health", "/sessions", "/openapi.json", "/sessions/x/steps"):
        r = httpx.get(base + path)
        assert r.status_code == 401, path
        assert r.json()["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(base + "/health", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(base + "/health", params={"token": server.token}).status_code == 200
    r = httpx.post(
        base + "/sessions/x/rollback",
        json={"stepId": "s0001"},
        headers={"Authorization": f"Bearer {server.token}", "Origin": "http://evil.example"},
    )
    assert r.status_code == 403 and r.json()["code"] == "forbidden_origin"


def test_health_and_openapi(api: httpx.Client) -> None:
    health = api.get("/health").json()
    assert health["status"] == "ok" and health["model"].startswith("script:")
    assert health["database"].endswith("xclaw.db")
    assert isinstance(health["commits"], int) and health["commits"] > 0  # at least its worker row
    assert isinstance(health["writerBusyMs"], int) and health["writerBusyMs"] >= 0  # SQLite
    spec = api.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    assert set(spec["paths"]) == {
        "/health",
        "/openapi.json",
        "/agents",
        "/tools",
        "/sessions",
        "/sessions/{sid}",
        "/sessions/{sid}/steps",
        "/sessions/{sid}/tree",
        "/sessions/{sid}/history",
        "/sessions/{sid}/rollback",
        "/sessions/{sid}/rollback/{step}",
        "/sessions/{sid}/rollback/abandon",
        "/sessions/{sid}/fork",
        "/sessions/{sid}/processes",
        "/sessions/{sid}/approvals/{step}",
        "/sessions/{sid}/export",
        "/schedules",
        "/schedules/{schedule}",
        "/schedules/{schedule}/pause",
        "/schedules/{schedule}/resume",
        "/schedules/{schedule}/fires",
        "/hooks",
        "/hooks/{name}",
        "/hooks/{name}/fires",
        "/budgets/{target}",
        "/budgets/{target}/grant",
        "/sessions/{sid}/queue",
        "/sessions/{sid}/queue/{mid}",
    }
    assert set(spec["paths"]["/sessions/{sid}"]) == {"parameters", "get", "patch", "delete"}
    # every $ref resolves
    refs = {v for v in _walk(spec) if isinstance(v, str) and v.startswith("#/components/schemas/")}
    assert refs and all(r.rsplit("/", 1)[1] in spec["components"]["schemas"] for r in refs)


def _walk(node):  # type: ignore[no-untyped-def]
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)
    else:
        yield node


async def test_sessions_steps_tree_history_export(server: Server, aapi: httpx.AsyncClient) -> None:
    sid = await conversation(server)
    listed = (await aapi.get("/sessions")).json()["sessions"]
    assert (
        listed[0]["sessionId"] == sid
        and listed[0]["status"] == "Success"
        and listed[0]["busy"] is False
    )
    assert (await aapi.get("/sessions", params={"limit": "x"})).status_code == 400

    one = (await aapi.get(f"/sessions/{sid}")).json()
    assert one["sessionId"] == sid and one["isForked"] is False
    renamed = (await aapi.patch(f"/sessions/{sid}", json={"title": "hello"})).json()
    assert renamed["title"] == "hello"
    assert (await aapi.patch(f"/sessions/{sid}", json={"title": 5})).status_code == 400
    assert (await aapi.patch(f"/sessions/{sid}", content=b"{oops")).status_code == 400

    latest = (await aapi.get(f"/sessions/{sid}/steps")).json()["steps"]
    every = (await aapi.get(f"/sessions/{sid}/steps", params={"n": 0})).json()["steps"]
    assert [s["id"] for s in every] == ["s0001", "s0002", "s0003", "s0004", "s0005", "s0006"]
    assert latest == every  # fewer than 10
    assert [
        s["id"] for s in (await aapi.get(f"/sessions/{sid}/steps", params={"n": 2})).json()["steps"]
    ] == ["s0005", "s0006"]
    assert (await aapi.get(f"/sessions/{sid}/steps", params={"n": "-1"})).status_code == 400
    tool = every[2]
    assert (tool["type"], tool["name"], tool["input"], tool["parent"]) == (
        "tool_call",
        "shell",
        {"command": "echo hi"},
        "s0002",
    )

    tree = (await aapi.get(f"/sessions/{sid}/tree")).json()["tree"]
    roots = [n["id"] for n in tree]
    assert roots == ["s0001", "s0005"]  # one root per user input
    llm = tree[0]["children"][0]
    assert llm["type"] == "llm_call" and llm["children"][0]["id"] == "s0003"

    history = (await aapi.get(f"/sessions/{sid}/history")).json()
    assert json.loads(history["content"])[0] == {"role": "user", "content": "find hi"}

    r = await aapi.get(f"/sessions/{sid}/export")
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert lines[0]["kind"] == "session" and lines[0]["sessionId"] == sid
    # The session's token totals ride on its line, as in `xclaw export` (script: no price).
    assert lines[0]["llmCalls"] >= 1 and lines[0]["usage"]["input"] > 0 and lines[0]["cost"] is None
    assert {line["kind"] for line in lines[1:]} == {"step"}
    assert [x["id"] for x in lines[1:]] == [s["id"] for s in every]
    # The same lines `xclaw export` writes from the database (callId included: what a
    # resume pairs results by), so the download imports back elsewhere.
    offline = await asyncio.to_thread(
        subprocess.run,
        [*xclaw_cmd(), "export", sid],
        env=server.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert lines == [json.loads(line) for line in offline.stdout.splitlines()]
    assert any(x.get("callId") for x in lines[1:])


async def test_fork_rollback_delete(server: Server, aapi: httpx.AsyncClient) -> None:
    sid = await conversation(server)
    watcher = await Client.open(server)
    await watcher.attach(sid)

    r = await aapi.post(f"/sessions/{sid}/fork", json={"stepId": "s0004", "title": "branch"})
    assert r.status_code == 201
    fork = r.json()["session"]
    assert fork["isForked"] and fork["parentSessionId"] == sid and fork["title"] == "branch"
    assert (fork["forkedFromSeq"], fork["forkedFrom"]) == (4, "s0004")
    assert (
        len(
            (await aapi.get(f"/sessions/{fork['sessionId']}/steps", params={"n": 0})).json()[
                "steps"
            ]
        )
        == 4
    )

    assert (await aapi.post(f"/sessions/{sid}/rollback", json={"stepId": "s0099"})).json()[
        "code"
    ] == "bad_step"
    assert (await aapi.post(f"/sessions/{sid}/rollback", json={})).status_code == 400
    r = await aapi.post(f"/sessions/{sid}/rollback", json={"stepId": "s0005"})
    assert r.status_code == 200
    body = r.json()
    assert (
        body["stepId"] == "s0005"
        and body["deleted"] == 2
        and body["session"]["awaitingInput"] is True
    )
    # attached clients hear of a rollback made through the API too
    notice = await watcher.until_type("notice")
    assert (
        notice["content"]
        == "[rollback] session reset to before step s0005 — send your new instruction"
    )
    assert len((await aapi.get(f"/sessions/{sid}/steps", params={"n": 0})).json()["steps"]) == 4

    assert server.workspace(fork["sessionId"]).is_dir()  # the fork got its own files
    assert (await aapi.delete(f"/sessions/{fork['sessionId']}")).status_code == 204
    assert not server.workspace(fork["sessionId"]).exists()  # and they went with it
    r = await aapi.get(f"/sessions/{fork['sessionId']}")
    assert r.status_code == 404 and r.json()["code"] == "unknown_session"
    assert (await aapi.delete("/sessions/no-such")).status_code == 404
    assert (await aapi.post("/sessions/no-such/fork", json={"stepId": "s0001"})).status_code == 404


def test_index_page_without_token(server: Server) -> None:
    r = httpx.get(server.http + "/")
    assert r.status_code == 200 and "xclaw" in r.text
