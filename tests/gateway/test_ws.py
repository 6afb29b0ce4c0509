"""The WebSocket protocol against a real server: the seed's client flow, several sockets per
session, one run at a time, cancel, slash commands for every channel."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.gateway.harness import Client, Server

pytestmark = pytest.mark.slow

# The first message of every session: a slow LLM call (a run stays in flight ~1 s), a shell
# call, an answer. Later messages get the script's "(script finished)".
SCRIPT = [
    {
        "text": "Working on it.",
        "sleep": 1.0,
        "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
    },
    {"text": "Done."},
]


@pytest.fixture(scope="module")
def server(module_server_factory) -> Server:
    return module_server_factory(SCRIPT, approval="yolo", name="ws")


def steps_of(server: Server, sid: str) -> list[dict]:
    r = httpx.get(
        f"{server.http}/api/sessions/{sid}/steps?n=0",
        headers={"Authorization": f"Bearer {server.token}"},
    )
    r.raise_for_status()
    return r.json()["steps"]


async def test_a_client_speaking_only_the_seed_frames_completes_a_conversation(
    server: Server,
) -> None:
    # The seed's client: token on the URL, its own session id, reconnect then message; it
    # reads `history` content as a JSON string and prints deltas until `reply`.
    url = f"{server.ws_url}?token={server.token}"
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "reconnect", "sessionId": "web-abc123"}))
        history = None
        while history is None:
            f = json.loads(await ws.recv())
            if f["type"] == "history":
                history = json.loads(f["content"])
        assert history == []
        await ws.send(
            json.dumps({"type": "message", "sessionId": "web-abc123", "content": "say hi"})
        )
        deltas, reply = [], None
        while reply is None:
            f = json.loads(await ws.recv())
            if f["type"] == "delta":
                deltas.append(f["content"])
            elif f["type"] == "reply":
                reply = f["content"]
            elif f["type"] == "error":
                raise AssertionError(f)
        assert reply == "Done."
        assert "".join(deltas) == "Working on it.Done."
    # A page refresh: the same id brings the conversation back.
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "reconnect", "sessionId": "web-abc123"}))
        while True:
            f = json.loads(await ws.recv())
            if f["type"] == "history":
                break
        assert json.loads(f["content"]) == [
            {"role": "user", "content": "say hi"},
            {"role": "assistant", "content": "Working on it."},
            {"role": "assistant", "content": "Done."},
        ]
        assert f["sessionId"] == "web-abc123"


async def test_two_sockets_on_one_session_both_receive_the_run(server: Server) -> None:
    a = await Client.open(server)
    await a.attach(None)
    b = await Client.open(server)
    await b.attach(a.session_id)
    await a.send({"type": "message", "sessionId": a.session_id, "content": "go"})
    for c in (a, b):
        assert (await c.until_type("reply"))["content"] == "Done."
        tools = [f for f in c.of_type("tool") if f["state"] == "running"]
        assert [t["input"] for t in tools] == [{"command": "echo hi"}]
        assert c.of_type("delta")
        assert all(
            f["sessionId"] == a.session_id
            for f in c.seen
            if f["type"] in ("delta", "tool", "reply", "step")
        )
        # live trace rows: user_input, llm_call, tool_call, llm_call
        ids = {f["step"]["id"] for f in c.of_type("step")}
        assert ids == {"s0001", "s0002", "s0003", "s0004"}


async def test_message_during_a_run_is_busy_and_a_refresh_does_not_start_a_second_run(
    server: Server,
) -> None:
    a = await Client.open(server)
    await a.attach(None)
    sid = a.session_id
    await a.send({"type": "message", "sessionId": sid, "content": "go"})
    await a.until(lambda f: f.get("type") == "status" and f.get("status") == "Running")

    b = await Client.open(server)
    st = await b.attach(sid)
    assert st["busy"] is True and st["status"] == "Running"
    await b.send({"type": "message", "sessionId": sid, "content": "second run?"})
    err = await b.until_type("error")
    assert err["code"] == "busy"

    # The first socket refreshes mid-run: it just attaches again.
    await a.close()
    a2 = await Client.open(server)
    st2 = await a2.attach(sid)
    assert st2["busy"] is True
    assert (await a2.until_type("reply"))["content"] == "Done."
    assert (await b.until_type("reply"))["content"] == "Done."
    kinds = [(s["type"], s["name"]) for s in steps_of(server, sid)]
    assert [k for k, _ in kinds] == ["user_input", "llm_call", "tool_call", "llm_call"]
    assert ("user_input", "user") in kinds and sum(1 for k, _ in kinds if k == "user_input") == 1
    assert len(a2.of_type("reply")) == 1 and len(b.of_type("reply")) == 1


async def test_cancel_stops_the_run_and_the_session_stays_usable(server: Server) -> None:
    c = await Client.open(server)
    await c.attach(None)
    await c.send({"type": "cancel"})
    assert (await c.until_type("notice"))["content"] == "[cancel] nothing is running"
    await c.send({"type": "message", "content": "go"})
    await c.until(lambda f: f.get("type") == "status" and f.get("status") == "Running")
    await c.send({"type": "cancel", "sessionId": c.session_id})
    notice = await c.until_type("notice")
    assert notice["content"].startswith("[cancel]")
    # Issue 14: cancel leaves the session waiting for the next instruction, not Failed.
    assert not any(f.get("status") == "Failed" for f in c.of_type("status"))
    assert any(f.get("state") == "waiting" for f in c.of_type("status"))
    reply = await c.turn("carry on")
    assert reply["type"] == "reply"


async def test_slash_commands(server: Server) -> None:
    a = await Client.open(server)
    await a.attach(None)
    sid = a.session_id
    assert (await a.turn("first task"))["content"] == "Done."
    b = await Client.open(server)
    await b.attach(sid)

    await a.send({"type": "message", "sessionId": sid, "content": "/steps"})
    text = (await a.until_type("notice"))["content"]
    assert text.startswith(f"Steps (session: {sid}):")
    assert '  s0001  user_input    user        "first task"' in text
    assert "/rollback" in text and "/fork" in text
    steps = (await a.until_type("steps"))["steps"]
    assert [s["id"] for s in steps] == ["s0001", "s0002", "s0003", "s0004"]
    await a.send({"type": "message", "content": "/steps 2"})
    await a.until_type("notice")
    assert [s["id"] for s in (await a.until_type("steps"))["steps"]] == ["s0003", "s0004"]

    await a.send({"type": "message", "content": "/fork s0003 plan B"})
    notice = (await a.until_type("notice"))["content"]
    forked = await a.until_type("forked")
    new = forked["sessionId"]
    assert forked["fromSessionId"] == sid and forked["fromStepId"] == "s0003"
    assert notice.startswith(f"[fork] new session created: {new}")
    assert f"original session {sid} is unchanged" in notice
    f = await Client.open(server)
    st = await f.attach(new)
    session = f.of_type("session")[0]
    assert (
        session["isForked"] is True
        and session["parentSessionId"] == sid
        and session["title"] == "plan B"
    )
    assert st["busy"] is False
    assert (
        len(json.loads(f.of_type("history")[0]["content"])) == 2
    )  # user + the first assistant turn

    await a.send({"type": "message", "content": "/rollback s9999"})
    assert (await a.until_type("error"))["code"] == "bad_step"
    await a.send({"type": "message", "content": "/rollback s0001"})
    for c in (a, b):  # every socket of the session hears of it and gets the new history
        n = await c.until(
            lambda f: f.get("type") == "notice" and f["content"].startswith("[rollback]")
        )
        assert (
            n["content"]
            == "[rollback] session reset to before step s0001 — send your new instruction"
        )
        hist = await c.until_type("history")
        assert json.loads(hist["content"]) == []
    assert steps_of(server, sid) == []
    assert (await a.turn("again"))["type"] == "reply"

    await a.send({"type": "message", "content": "/sessions"})
    listing = (await a.until_type("notice"))["content"]
    assert sid in listing and new in listing
    await a.send({"type": "message", "content": "/help"})
    assert "/rollback sNNNN" in (await a.until_type("notice"))["content"]
    # Issue 14: /switch is the gateway's now, and attaches to existing sessions only.
    await a.send({"type": "message", "content": "/switch abc"})
    assert (await a.until_type("error"))["code"] == "unknown_session"
    for bad in ("/nonsense", "/steps many", "/rollback", "/fork", "/switch", "/title"):
        await a.send({"type": "message", "content": bad})
        assert (await a.until_type("error"))["code"] == "bad_command", bad
    # Not a command word: ordinary text for the agent.
    assert (await a.turn("/usr/bin is where ls lives"))["type"] == "reply"


async def test_a_message_for_another_session_attaches_to_it(server: Server) -> None:
    a = await Client.open(server)
    await a.attach(None)
    b = await Client.open(server)
    await b.attach(None)
    # Issue 14: b's session exists from its first message (before it, it is b's alone).
    await a.send({"type": "message", "sessionId": b.session_id, "content": "hello"})
    assert (await a.until_type("error"))["code"] == "unknown_session"
    await b.turn("first")
    await a.send({"type": "message", "sessionId": b.session_id, "content": "hello"})
    session = await a.until_type("session")
    assert session["sessionId"] == b.session_id
    assert (await a.until_type("reply"))["sessionId"] == b.session_id
    await a.send({"type": "message", "sessionId": "no-such-session", "content": "hello"})
    err = await a.until_type("error")
    assert err["code"] == "unknown_session"


async def test_a_first_message_without_reconnect_starts_a_session(server: Server) -> None:
    c = await Client.open(server)
    await c.send({"type": "message", "content": "hi"})
    session = await c.until_type("session")
    assert session["created"] is True
    assert (await c.until_type("reply"))["sessionId"] == session["sessionId"]


def _api_session(server: Server, sid: str) -> httpx.Response:
    return httpx.get(
        f"{server.http}/api/sessions/{sid}", headers={"Authorization": f"Bearer {server.token}"}
    )


async def test_a_session_exists_from_its_first_message_under_the_clients_own_id(
    server: Server,
) -> None:
    # The seed's flow: a client-made id, reconnect, then message. Nothing is written before
    # the message; the session is created at it, under that id, titled after it.
    sid = "cli-first-message-test"
    c = await Client.open(server)
    status = await c.attach(sid)
    assert status["state"] == "new" and c.of_type("session")[-1]["created"] is True
    assert _api_session(server, sid).status_code == 404
    reply = await c.turn("Count   the lines\nof every file please")
    assert reply["type"] == "reply" and reply["sessionId"] == sid
    title = "Count the lines of every file please"
    assert any(f.get("title") == title for f in c.of_type("renamed"))
    r = _api_session(server, sid)
    assert r.status_code == 200 and r.json()["title"] == title
    assert r.json()["state"] == "success"


async def test_switch_takes_unique_prefixes_new_creates_and_title_renames(server: Server) -> None:
    a = await Client.open(server)
    await a.attach("pfx-alpha-1")
    await a.turn("first")
    b = await Client.open(server)
    await b.attach("pfx-alpha-2")
    await b.turn("second")
    await a.send({"type": "message", "content": "/switch pfx-alpha"})
    err = await a.until_type("error")
    assert err["code"] == "ambiguous_session" and "pfx-alpha-1" in err["content"]
    await a.send({"type": "message", "content": "/switch pfx-alpha-2"})
    assert (await a.until_type("session"))["sessionId"] == "pfx-alpha-2"
    await a.send({"type": "message", "content": "/switch pfx-nothing"})
    assert (await a.until_type("error"))["code"] == "unknown_session"
    # a unique prefix is enough
    await a.send({"type": "message", "content": "/switch pfx-alpha-"})
    assert (await a.until_type("error"))["code"] == "ambiguous_session"
    # /title renames; every attached socket hears it
    await a.send({"type": "message", "content": "/title  Second   thoughts "})
    notice = await a.until_type("notice")
    assert notice["content"] == "[title] this session is now “Second thoughts”"
    assert (await b.until_type("renamed"))["title"] == "Second thoughts"
    # /new TITLE attaches a new session written at once with its title (a name given is
    # kept, whatever happens before the first message); the first message keeps it
    await a.send({"type": "message", "content": "/new Fresh start"})
    session = await a.until_type("session")
    assert session["created"] is False and session["title"] == "Fresh start"
    assert session["state"] == "new"
    new = session["sessionId"]
    assert new not in ("pfx-alpha-1", "pfx-alpha-2")
    await a.until(lambda f: f.get("type") == "status" and "busy" in f)
    a.session_id = new
    assert _api_session(server, new).json()["title"] == "Fresh start"
    await a.turn("do something")
    assert _api_session(server, new).json()["title"] == "Fresh start"
    # bare /new: nothing is written until the first message
    await a.send({"type": "message", "content": "/new"})
    session = await a.until_type("session")
    assert session["created"] is True and session["title"] == ""
    await a.until(lambda f: f.get("type") == "status" and "busy" in f)
    assert _api_session(server, session["sessionId"]).status_code == 404
    a.session_id = new


async def test_switch_by_prefix(server: Server) -> None:
    a = await Client.open(server)
    await a.attach("uniqprefix-target-session")
    await a.turn("hello")
    c = await Client.open(server)
    await c.attach(None)
    await c.send({"type": "message", "content": "/switch uniqprefix"})
    assert (await c.until_type("session"))["sessionId"] == "uniqprefix-target-session"


def test_every_frame_encodes_as_utf8_json_whatever_it_holds() -> None:
    """Hostile or odd values a model or tool may put in a frame: a lone surrogate, an integer
    beyond 64 bits, a non-string key, a set, NaN. Each frame is sent (never kills the writer),
    is valid UTF-8, and reads back as JSON."""
    from xclaw.gateway.ws import encode_frame

    frames = [
        {"type": "delta", "content": "a\ud800b"},
        {"type": "tool", "output": 2**70},
        {"type": "tool", "input": {1: "int key"}},
        {"type": "tool", "input": {"s": {1, 2}}},
        {"type": "tool", "output": float("nan")},
        {"type": "delta", "content": "ünïcødé ✓"},
    ]
    for frame in frames:
        text = encode_frame(frame)
        text.encode("utf-8")  # raises if not sendable
        assert json.loads(text)["type"] == frame["type"]
    assert json.loads(encode_frame(frames[0]))["content"] == "a\ud800b"
    assert json.loads(encode_frame(frames[5]))["content"] == "ünïcødé ✓"
