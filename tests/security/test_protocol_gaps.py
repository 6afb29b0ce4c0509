"""Protocol gaps found from outside: deep JSON, lone surrogates, non-ASCII digits, a slow
reader. Each gets a documented error, loses nothing, and leaves store and client agreeing."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.gateway.harness import Client, Server
from tests.waiting import until

pytestmark = pytest.mark.slow

SCRIPT = [{"text": "Echo: got it \ud800 back"}, {"text": "second"}, {"text": "third"}]


@pytest.fixture(scope="module")
def server(module_server_factory) -> Server:
    return module_server_factory(SCRIPT, approval="ask", name="gaps")


async def test_deeply_nested_json_is_a_bad_frame(server: Server) -> None:
    c = await Client.open(server)
    for raw in (
        "[" * 100_000 + "]" * 100_000,
        '{"type":"message","content":' + "[" * 50_000 + "]" * 50_000 + "}",
    ):
        await c.send(raw)
        err = await c.until_type("error")
        assert err["code"] == "bad_frame", err
        assert "Traceback" not in err["content"]
    await c.send({"type": "ping"})
    await c.until_type("pong")
    assert "Traceback" not in server.logs()


async def test_lone_surrogate_in_message_and_reply_keeps_store_and_client_agreeing(
    server: Server,
) -> None:
    c = await Client.open(server)
    await c.attach()
    # json.dumps escapes it as \ud800: a lone surrogate on the wire, valid JSON.
    reply = await c.turn("hello \ud800 there")
    assert reply["type"] == "reply", reply
    assert "\ufffd" in reply["content"]
    status = [f for f in c.of_type("status")][-1]
    sid = c.session_id
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as h:
        s = (await h.get(f"{server.http}/api/sessions/{sid}")).json()
        assert s["status"] == status["status"] == "Success"
        steps = (await h.get(f"{server.http}/api/sessions/{sid}/steps")).json()["steps"]
        assert all(st["status"] == "completed" for st in steps), [
            (st["type"], st["status"]) for st in steps
        ]
        assert any("\ufffd" in str(st["output"]) for st in steps)
    # the same socket still works, and a second turn runs
    second = await c.turn("again")
    assert second["type"] == "reply" and second["content"] == "second"


async def test_patch_title_with_lone_surrogate_is_a_json_error(server: Server) -> None:
    c = await Client.open(server)
    await c.attach()
    await c.turn("make the session exist")
    sid = c.session_id
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as h:
        r = await h.patch(
            f"{server.http}/api/sessions/{sid}",
            content=b'{"title": "bad \\ud800 title"}',
            headers={"Content-Type": "application/json"},
        )
        assert r.headers["content-type"].startswith("application/json"), r.text
        assert r.status_code in (200, 400), r.text
        deep = await h.patch(
            f"{server.http}/api/sessions/{sid}",
            content=b"[" * 100_000 + b"]" * 100_000,
        )
        assert deep.status_code == 400 and deep.json()["code"] == "bad_request"
        s = (await h.get(f"{server.http}/api/sessions/{sid}")).json()
        assert "\ud800" not in s["title"]


async def test_rollback_with_non_ascii_digits_is_refused(server: Server) -> None:
    c = await Client.open(server)
    await c.attach()
    await c.turn("one")
    for ref in (
        "\u0661",
        "s\u0661",
        "\uff11",
        "\u00b9",
    ):  # Arabic-Indic 1, fullwidth 1, superscript 1
        await c.send({"type": "message", "sessionId": c.session_id, "content": f"/rollback {ref}"})
        err = await c.until_type("error")
        assert err["code"] in ("bad_step", "bad_command", "step_not_found"), err
    await c.send({"type": "message", "sessionId": c.session_id, "content": "/steps \u0663"})
    err = await c.until_type("error")
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as h:
        steps = (await h.get(f"{server.http}/api/sessions/{c.session_id}/steps")).json()["steps"]
    assert len(steps) >= 2  # nothing was rolled back


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def test_a_reader_that_stops_is_cut_off_by_bytes_not_frames(module_server_factory) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    big = module_server_factory([{"text": "x" * 400_000}], approval="ask", name="slow")
    c = await Client.open(big)
    await c.attach()
    assert (await c.turn("make it big", timeout=30))["type"] == "reply"
    sid = c.session_id
    assert big.proc is not None
    before = _rss_mb(big.proc.pid)
    # max_queue=1: this client stops reading the socket once one frame waits, like a stuck UI.
    conn = await connect(
        big.ws_url,
        additional_headers={"Authorization": f"Bearer {big.token}"},
        max_size=None,
        max_queue=1,
    )
    conn.transport.pause_reading()  # a stuck UI: nothing more is read from the socket
    try:
        # ~1 MB of history per attach: 120 attaches would be 120 MB queued, 4 frames each.
        for _ in range(120):
            await conn.send(json.dumps({"type": "reconnect", "sessionId": sid}))
        await asyncio.sleep(0)
        # wait until the server has given up on us (its log says so), then drain
        await until(lambda: "event=slow_client" in big.logs(), "cut off", 60, 0.1)
        conn.transport.resume_reading()
        # now drain: the socket must end with 1013 "client too slow", well before 120 MB.
        deadline = asyncio.get_running_loop().time() + 60
        code, got = None, []
        while asyncio.get_running_loop().time() < deadline:
            try:
                got.append(json.loads(await asyncio.wait_for(conn.recv(), 5)).get("type"))
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd else None
                break
            except TimeoutError:
                break
        assert code == 1013, (code, len(got), got[-5:], big.logs()[-2000:])
    finally:
        await conn.close()
    grown = _rss_mb(big.proc.pid) - before
    assert grown < 60, f"server grew by {grown:.0f} MB"
    assert "event=slow_client" in big.logs()
