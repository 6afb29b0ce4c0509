"""`xclaw.connect` against a hostile or wrong server (tests/api/hostile.py, a real server on
loopback): whatever it says — garbage, deep JSON, an answer not as declared, a refusal without
xclaw's body, another session's frames, a 200 MB answer or frame, or nothing at all — the
program meets a typed error (GatewayUnavailable for the transport, the error a status names),
within the timeout it gave, and never takes the 200 MB into memory."""

from __future__ import annotations

import asyncio
import json
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import xclaw
from tests.api.hostile import (
    HUGE,
    Hostile,
    Request,
    Silence,
    Socket,
    Stream,
    gateway_http,
    response,
    session_json,
)
from tests.ports import free_port
from xclaw.wire.frames import ReplyFrame

# Every wait on the server is bounded by this (connect(timeout=...)); each case must end
# well within ten times it on a loaded machine.
TIMEOUT = 2.0
BOUND_S = 30.0
LIMIT = 8 * 1024 * 1024  # connect(max_size=...): what a 200 MB answer or frame runs into

HostileFactory = Callable[..., Hostile]


@pytest.fixture
def hostile() -> Iterator[HostileFactory]:
    started: list[Hostile] = []

    def start(**kw: Any) -> Hostile:
        server = Hostile(**kw).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _connect(server: Hostile | str) -> Any:
    url = server if isinstance(server, str) else server.url
    return xclaw.connect(url, token="t", timeout=TIMEOUT, max_size=LIMIT)


async def _raises(kind: type[BaseException], work: Any) -> BaseException:
    began = time.monotonic()
    with pytest.raises(kind) as raised:
        await work
    assert time.monotonic() - began < BOUND_S
    return raised.value


def _health(answer: Any) -> Callable[[Request], Any]:
    def http(request: Request) -> Any:
        return answer if request.path.startswith("/api/health") else gateway_http(request)

    return http


CONNECTING = {
    "not JSON": (response(200, "<html>hello</html>", "text/html"), xclaw.GatewayUnavailable),
    "JSON nested too deeply": (
        response(200, "[" * 100_000 + "]" * 100_000),
        xclaw.GatewayUnavailable,
    ),
    "JSON not the gateway's": (response(200, '{"status": "fine"}'), xclaw.GatewayUnavailable),
    "401 without xclaw's body": (
        response(401, "<h1>Unauthorized</h1>", "text/html"),
        xclaw.Unauthorized,
    ),
    "429 without xclaw's body": (response(429, "slow down", "text/plain"), xclaw.TooManyAttempts),
    "a proxy's 502": (response(502, "<h1>Bad Gateway</h1>", "text/html"), xclaw.GatewayUnavailable),
    "a redirect": (
        b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\n\r\n",
        xclaw.GatewayUnavailable,
    ),
    "not HTTP": (b"\x00\xffgarbage\r\n\r\n", xclaw.GatewayUnavailable),
    "closed at once": (b"", xclaw.GatewayUnavailable),
    "silence": (Silence(), xclaw.GatewayUnavailable),
}


@pytest.mark.parametrize("case", sorted(CONNECTING))
async def test_connecting_to_a_wrong_server_is_a_typed_error(
    hostile: HostileFactory, case: str
) -> None:
    answer, kind = CONNECTING[case]
    server = hostile(http=_health(answer))
    error = await _raises(kind, _connect(server))
    assert isinstance(error, xclaw.XclawError) and error.message


async def test_nothing_listening_is_gateway_unavailable() -> None:
    await _raises(xclaw.GatewayUnavailable, _connect(f"http://127.0.0.1:{free_port()}"))


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "chunked"])
async def test_an_answer_of_200_mb_is_refused_unread(
    hostile: HostileFactory, declared: bool
) -> None:
    server = hostile(http=_health(Stream(declared=declared)))
    error = await _raises(xclaw.GatewayUnavailable, _connect(server))
    assert "limit" in str(error)
    assert server.sent < 4 * LIMIT < HUGE  # it hung up, not read on


async def test_answers_not_as_declared_are_gateway_unavailable(hostile: HostileFactory) -> None:
    def http(request: Request) -> Any:
        if request.path.startswith("/api/sessions/S/steps"):
            return response(200, "[" * 100_000 + "]" * 100_000)
        if request.path.startswith("/api/sessions/S/tree"):
            return response(200, '{"sessionId": "S", "tree": [{"id": 5}]}')
        if request.path.startswith("/api/sessions/S"):
            return response(200, '{"sessionId": "S", "title": 7}')
        return gateway_http(request)

    server = hostile(http=http)
    async with _connect(server) as agent:
        session = await agent.new_session(title="t")
        for call in (session.info(), session.steps(), session.trace()):
            error = await _raises(xclaw.GatewayUnavailable, call)
            assert "not" in str(error)


# --- the WebSocket ------------------------------------------------------------------------


async def _send(server: Hostile) -> Any:
    async with _connect(server) as agent:
        session = await agent.new_session(title="t")
        return await session.send("hello")


async def silent(ws: Socket) -> None:
    ws.answer_pings = False
    await ws.until_closed()


async def garbage(ws: Socket) -> None:
    await ws.attach()
    await ws.recv()  # the message
    for junk in ("{not json", "[" * 5000 + "]" * 5000, '{"type": "reply"}', '"a string"'):
        await ws.send(junk)
    await ws.send(b"\x00\x01\x02", opcode=0x2)
    await ws.until_closed()  # and never an answer for the message


async def never_answers(ws: Socket) -> None:
    await ws.attach()
    await ws.until_closed()


async def huge_frame(ws: Socket) -> None:
    await ws.attach()
    await ws.recv()
    await ws.send_header(HUGE)
    chunk = b"x" * 65536
    for _ in range(HUGE // len(chunk)):
        await ws.write(chunk)


async def closes_4401(ws: Socket) -> None:
    await ws.send(struct.pack("!H", 4401) + b"unauthorized", opcode=0x8)


SENDING: dict[str, tuple[dict[str, Any], type[BaseException]]] = {
    "the WebSocket refused with 404": (
        {"handshake": b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"},
        xclaw.GatewayUnavailable,
    ),
    "the WebSocket refused with 401": (
        {"handshake": b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"},
        xclaw.Unauthorized,
    ),
    "not a WebSocket answer": ({"handshake": b"garbage\r\n\r\n"}, xclaw.GatewayUnavailable),
    "a silent WebSocket": ({"ws": silent}, xclaw.GatewayUnavailable),
    "garbage frames": ({"ws": garbage}, xclaw.GatewayUnavailable),
    "a message never answered": ({"ws": never_answers}, xclaw.GatewayUnavailable),
    "closed with 4401": ({"ws": closes_4401}, xclaw.Unauthorized),
}


@pytest.mark.parametrize("case", sorted(SENDING))
async def test_a_run_against_a_wrong_websocket_is_a_typed_error(
    hostile: HostileFactory, case: str
) -> None:
    kw, kind = SENDING[case]
    await _raises(kind, _send(hostile(**kw)))


async def test_a_frame_of_200_mb_is_refused_unread(hostile: HostileFactory) -> None:
    """The frame's header says 200 MB: the client refuses it from the header (and drops
    what follows as it closes), holding nothing of it."""
    server = hostile(ws=huge_frame)
    tracemalloc.start()
    try:
        await _raises(xclaw.GatewayUnavailable, _send(server))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert server.sent > HUGE // 2  # it was sent (and thrown away as it came)
    assert peak < 4 * LIMIT < HUGE


async def test_another_session_s_frames_are_not_this_run_s(hostile: HostileFactory) -> None:
    async def other_replies(ws: Socket) -> None:
        sid = await ws.attach()
        message = await ws.recv()
        assert message is not None
        await ws.send({"type": "reply", "sessionId": "other", "content": "not yours"})
        await ws.send(
            {
                "type": "ack",
                "sessionId": sid,
                "messageId": message["messageId"],
                "stepId": "s0001",
                "duplicate": False,
            }
        )
        await ws.send({"type": "reply", "sessionId": "other", "content": "not yours either"})
        await ws.send({"type": "error", "sessionId": "other", "code": "llm_error", "content": "x"})
        await ws.send({"type": "reply", "sessionId": sid, "content": "mine"})
        await ws.until_closed()

    result = await _send(hostile(ws=other_replies))
    assert result.reply == "mine" and result.error is None
    assert [e.content for e in result.events if isinstance(e, ReplyFrame)] == ["mine"]
    assert all(e.session_id == "S" for e in result.events)


async def test_a_gateway_gone_silent_mid_run_ends_the_stream(hostile: HostileFactory) -> None:
    """Acknowledged, then nothing — not even an answer to the WebSocket's pings — and on
    every reconnect no attach: the stream ends with GatewayUnavailable, in bounded time."""
    connections = 0

    async def goes_silent(ws: Socket) -> None:
        nonlocal connections
        connections += 1
        if connections > 1:
            ws.answer_pings = False
            await ws.until_closed()
            return
        sid = await ws.attach()
        message = await ws.recv()
        assert message is not None
        await ws.send(
            {
                "type": "ack",
                "sessionId": sid,
                "messageId": message["messageId"],
                "stepId": "s0001",
                "duplicate": False,
            }
        )
        ws.answer_pings = False
        await ws.until_closed()

    def busy(request: Request) -> Any:
        if request.path.startswith("/api/sessions/S") and "steps" not in request.path:
            return response(200, json.dumps(session_json("S", busy=True)))
        return gateway_http(request)

    server = hostile(ws=goes_silent, http=busy)
    async with _connect(server) as agent:
        session = await agent.new_session(title="t")
        events = session.send("hello")
        await _raises(xclaw.GatewayUnavailable, events.result())
        assert connections >= 2
        await _raises(xclaw.Timeout, session.wait(timeout=0.5))


def test_the_synchronous_facade_is_bounded_too(hostile: HostileFactory) -> None:
    server = hostile(http=_health(Silence()))
    began = time.monotonic()
    with pytest.raises(xclaw.GatewayUnavailable):
        xclaw.connect_sync(server.url, token="t", timeout=TIMEOUT)
    assert time.monotonic() - began < BOUND_S


async def test_an_agent_closed_is_said_so(hostile: HostileFactory) -> None:
    server = hostile()
    agent = await _connect(server)
    session = await agent.new_session(title="t")
    await agent.close()
    for call in (session.info(), agent.sessions(), session.send("x").result()):
        await _raises(xclaw.AgentClosed, call)
    await asyncio.sleep(0)
