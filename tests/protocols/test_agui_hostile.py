"""`POST /agui` given what an attacker or a broken client sends: every bad body is a protocol
error with a sentence (an HTTP error carrying `{"code","error"}`), never a traceback, and
another person's thread answers exactly as a thread nobody has."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Server
from tests.gateway.teams_harness import add_user

pytestmark = pytest.mark.slow

SCRIPT = [
    {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo x > f"}}]},
    {"text": "done"},
]


@pytest.fixture(scope="module")
def server(module_server_factory: Any) -> Server:
    s: Server = module_server_factory(SCRIPT, approval="ask", name="hostile")
    return s


def post(server: Server, body: Any, *, token: str | None = None, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = {} if token == "" else {"Authorization": f"Bearer {token or server.token}"}
    return httpx.post(
        f"{server.http}/agui",
        content=content,
        headers={"Content-Type": "application/json", **auth, **headers},
        timeout=60,
    )


def run_input(thread: str, **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": "r1", "messages": [], **extra}


def user(text: Any, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        (b"{not json", "bad_request", "not valid JSON"),
        (b"[1, 2]", "bad_request", "must be a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "bad_request", "nested too deeply"),
        ({"threadId": "t"}, "bad_request", "not a RunAgentInput: runId"),
        ({"threadId": "t", "runId": "r"}, "bad_request", "messages"),
        (run_input("a/b", messages=[user("hi")]), "bad_request", "threadId"),
        (run_input("../../etc", messages=[user("hi")]), "bad_request", "threadId"),
        (run_input("t-empty", messages=[user("   ")]), "bad_request", "empty"),
        (
            run_input(
                "t-image",
                messages=[
                    user([{"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}])
                ],
            ),
            "bad_request",
            "only text",
        ),
        (
            run_input(
                "t-shell", messages=[user("hi")], tools=[{"name": "shell", "description": ""}]
            ),
            "bad_request",
            "tool of the server",
        ),
        (
            run_input("t-name", messages=[user("hi")], tools=[{"name": "a b", "description": ""}]),
            "bad_request",
            "tool name",
        ),
        (
            run_input(
                "t-resume",
                resume=[{"interruptId": "s0001", "status": "resolved", "payload": {"ok": 1}}],
            ),
            "bad_request",
            '{"approved": true|false}',
        ),
        (run_input("nobody-has-this"), "unknown_session", "no session"),
    ],
)
def test_a_bad_body_is_a_protocol_error(server: Server, body: Any, code: str, words: str) -> None:
    r = post(server, body)
    assert r.status_code in (400, 404), r.text
    assert r.json()["code"] == code
    assert words in r.json()["error"]
    assert "Traceback" not in server.logs()


def test_a_huge_body_is_refused_without_reading_it_whole(server: Server) -> None:
    huge = json.dumps(run_input("t-huge", messages=[user("x" * (9 * 1024 * 1024))])).encode()
    r = post(server, huge)
    assert r.status_code == 400 and "too large" in r.json()["error"]
    # Chunked, with no length declared: counted as it comes.
    r = httpx.post(
        f"{server.http}/agui",
        content=iter([huge[i : i + 65536] for i in range(0, len(huge), 65536)]),
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=60,
    )
    assert r.status_code == 400 and "too large" in r.json()["error"]


def test_no_token_no_run(server: Server) -> None:
    r = post(server, run_input("t-anon", messages=[user("hi")]), token="")
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    r = post(server, run_input("t-anon", messages=[user("hi")]), token="wrong")
    assert r.status_code == 401
    r = post(server, run_input("t-anon", messages=[user("hi")]), Origin="https://evil.example")
    assert r.status_code == 403 and r.json()["code"] == "forbidden_origin"
    assert post(server, run_input("t-anon")).json()["code"] == "unknown_session"  # not made


def test_an_answer_to_no_approval_and_a_second_message_mid_run(server: Server) -> None:
    r = post(server, run_input("t-busy", messages=[user("go")]))
    assert r.status_code == 200 and "RUN_FINISHED" in r.text  # ends asking an approval
    # A new message while the run waits for that approval: one driver.
    r = post(server, run_input("t-busy", messages=[user("go"), user("again", "u2")]))
    assert r.status_code == 409 and r.json()["code"] == "busy"
    # An answer naming a step that is no approval, or no step at all.
    resume = [{"interruptId": "s0001", "status": "resolved", "payload": {"approved": True}}]
    r = post(server, run_input("t-busy", resume=resume))
    assert r.status_code == 400 and "not an approval" in r.json()["error"]
    resume[0]["interruptId"] = "s9999"
    r = post(server, run_input("t-busy", resume=resume))
    assert r.status_code == 400 and r.json()["code"] == "bad_step"
    assert "Traceback" not in server.logs()


def test_another_persons_thread_looks_like_no_thread(server: Server) -> None:
    token = add_user(server, "mallory")
    r = post(server, run_input("t-admins", messages=[user("mine")]))
    assert r.status_code == 200
    for i, body in enumerate(
        (
            run_input("t-admins"),
            run_input("t-admins", messages=[user("let me in", "m1")]),
            run_input(
                "t-admins",
                resume=[
                    {"interruptId": "s0003", "status": "resolved", "payload": {"approved": True}}
                ],
            ),
        )
    ):
        nobodys = f"t-nobodys{i}"
        theirs = post(server, body, token=token)
        nobody = post(server, {**body, "threadId": nobodys}, token=token)
        assert theirs.status_code == 404 and theirs.json()["code"] == "unknown_session"
        if body.get("messages"):
            continue  # a thread nobody has is made for a new message: theirs is not
        assert nobody.status_code == 404
        assert theirs.json()["error"].replace("t-admins", "X") == nobody.json()["error"].replace(
            nobodys, "X"
        )
    # Her own new thread is hers: she sees it, and it runs.
    r = post(server, run_input("t-mallory", messages=[user("hello")]), token=token)
    assert r.status_code == 200 and "RUN_STARTED" in r.text
    mine = httpx.get(
        f"{server.http}/api/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).json()["sessions"]
    assert sorted(s["sessionId"] for s in mine) == ["t-mallory", "t-nobodys1"]
