"""Everything a client can get wrong gets a documented error; the connection (where the
protocol says so) and the server keep serving."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.gateway.harness import Client, Server

pytestmark = pytest.mark.slow

SCRIPT = [
    {
        "text": "Asking first.",
        "tool_calls": [{"name": "shell", "input": {"command": "echo x > f.txt"}}],
    },
    {"text": "Done."},
]


@pytest.fixture(scope="module")
def server(module_server_factory) -> Server:
    return module_server_factory(SCRIPT, approval="ask", name="bad")


async def expect_error(c: Client, frame: dict | str | bytes, code: str) -> dict:
    if isinstance(frame, bytes):
        await c.conn.send(frame)
    else:
        await c.send(frame)
    err = await c.until_type("error")
    assert err["code"] == code, (frame if not isinstance(frame, (str, bytes)) else frame[:80], err)
    assert err["content"]  # a human-readable reason
    # the connection is still usable
    await c.send({"type": "ping"})
    assert (await c.until_type("pong"))["type"] == "pong"
    return err


MALFORMED = [
    "this is not json",
    '{"type": "message", ',
    "[1, 2, 3]",
    "42",
    "null",
    {"no": "type"},
    {"type": "launch_missiles"},
    {"type": 7},
    {"type": "message", "content": 42},
    {"type": "message"},
    {"type": "message", "content": "   "},
    {"type": "message", "sessionId": 12, "content": "hi"},
    {"type": "approval", "stepId": "s0001", "approve": "yes"},
    {"type": "approval", "approve": True},
    {"type": "reconnect", "sessionId": ["a"]},
    {"type": "reconnect", "sessionId": "../../etc/passwd"},
    {"type": "reconnect", "sessionId": "x" * 500},
    {"type": "ping", "v": 2},
]


@pytest.mark.parametrize(
    "frame", MALFORMED, ids=lambda f: (f if isinstance(f, str) else json.dumps(f))[:40]
)
async def test_malformed_frames_get_bad_frame(server: Server, frame: dict | str) -> None:
    c = await Client.open(server)
    await c.attach(None)
    err = await expect_error(c, frame, "bad_frame")
    assert "sessionId" not in err or err["sessionId"] == c.session_id


async def test_binary_frames(server: Server) -> None:
    c = await Client.open(server)
    await expect_error(c, b"\xff\xfe\x00garbage", "bad_frame")
    await c.conn.send(json.dumps({"type": "ping"}).encode())  # JSON in a binary frame is fine
    assert (await c.until_type("pong"))["type"] == "pong"


async def test_oversized_frames(server: Server) -> None:
    c = await Client.open(server)
    await c.attach(None)
    big = json.dumps({"type": "message", "content": "x" * 1_500_000})
    err = await expect_error(c, big, "bad_frame")
    assert "too large" in err["content"]
    # Beyond the socket's own limit the socket is closed (1009); the server carries on.
    with pytest.raises(ConnectionClosed) as info:
        await c.send("y" * (9 * 1024 * 1024))
        await c.recv(timeout=10)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1009
    c2 = await Client.open(server)
    assert (await c2.attach(None))["busy"] is False


async def test_unknown_session_and_not_attached(server: Server) -> None:
    c = await Client.open(server)
    await expect_error(c, {"type": "approval", "stepId": "s0001", "approve": True}, "not_attached")
    await expect_error(c, {"type": "cancel"}, "not_attached")
    await expect_error(
        c, {"type": "message", "sessionId": "nobody-here", "content": "hi"}, "unknown_session"
    )
    await expect_error(
        c,
        {"type": "approval", "sessionId": "nobody-here", "stepId": "s0001", "approve": True},
        "unknown_session",
    )
    await expect_error(c, {"type": "cancel", "sessionId": "nobody-here"}, "unknown_session")


async def test_bad_step_ids(server: Server) -> None:
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    await c.send({"type": "message", "sessionId": sid, "content": "write it"})
    ask = await c.until_type("approval_request")
    for ref in ("s9999", "nonsense", "other-session:s0001", "s0001"):
        await expect_error(
            c, {"type": "approval", "sessionId": sid, "stepId": ref, "approve": True}, "bad_step"
        )
    await c.send({"type": "approval", "sessionId": sid, "stepId": ask["stepId"], "approve": False})
    assert (await c.until_type("reply"))["content"] == "Done."
    for cmd in ("/rollback s9999", "/rollback banana", "/fork s0000", "/fork other:s0001"):
        await expect_error(c, {"type": "message", "sessionId": sid, "content": cmd}, "bad_step")


async def test_rollback_during_a_run_is_busy(server: Server) -> None:
    c = await Client.open(server)
    await c.attach(None)
    await c.send({"type": "message", "content": "write it"})
    ask = await c.until_type("approval_request")
    await expect_error(c, {"type": "message", "content": "/rollback s0001"}, "busy")
    await expect_error(c, {"type": "message", "content": "more"}, "busy")
    # the HTTP API refuses the same way while the run waits for its approval
    auth = {"Authorization": f"Bearer {server.token}"}
    async with httpx.AsyncClient(base_url=f"{server.http}/api", headers=auth) as api:
        r = await api.post(f"/sessions/{c.session_id}/rollback", json={"stepId": "s0001"})
        assert (r.status_code, r.json()["code"]) == (409, "busy")
        r = await api.delete(f"/sessions/{c.session_id}")
        assert (r.status_code, r.json()["code"]) == (409, "busy")
    await c.send({"type": "approval", "stepId": ask["stepId"], "approve": False})
    await c.until_type("reply")


async def refused(
    url: str, headers: dict[str, str] | None = None, first: dict | None = None
) -> tuple[dict, int]:
    async with connect(url, additional_headers=headers or {}) as ws:
        if first is not None:
            await ws.send(json.dumps(first))
        frame = json.loads(await ws.recv())
        with pytest.raises(ConnectionClosed):
            await ws.recv()
        return frame, ws.close_code or 0


async def test_token_is_required(server: Server) -> None:
    url = server.ws_url
    frame, code = await refused(url, first={"type": "reconnect", "sessionId": None})
    assert (frame["type"], frame["code"], code) == ("error", "unauthorized", 4401)
    frame, code = await refused(url, {"Authorization": "Bearer wrong-token-123"})
    assert (frame["code"], code) == ("unauthorized", 4401)
    frame, code = await refused(f"{url}?token=wrong")
    assert (frame["code"], code) == ("unauthorized", 4401)
    frame, code = await refused(url, first={"type": "reconnect", "token": "wrong"})
    assert (frame["code"], code) == ("unauthorized", 4401)
    frame, code = await refused(url, first={"type": "ping"})  # no token at all
    assert (frame["code"], code) == ("unauthorized", 4401)
    # The three accepted ways.
    async with connect(f"{url}?token={server.token}") as ws:
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv()) == {"type": "pong"}
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "reconnect", "sessionId": None, "token": server.token}))
        assert json.loads(await ws.recv())["type"] == "session"
    c = await Client.open(server)
    assert (await c.attach(None))["busy"] is False


async def test_foreign_origin_is_refused(server: Server) -> None:
    headers = {"Authorization": f"Bearer {server.token}", "Origin": "http://evil.example"}
    frame, code = await refused(server.ws_url, headers)
    assert (frame["code"], code) == ("forbidden_origin", 4403)
    own = {"Origin": f"http://127.0.0.1:{server.port}"}
    c = await Client.open(server, headers=own)
    assert (await c.attach(None))["busy"] is False


async def test_after_all_that_the_server_still_serves(server: Server) -> None:
    c = await Client.open(server)
    await c.attach(None)
    assert (await c.turn("write it", approve=True))["content"] == "Done."
