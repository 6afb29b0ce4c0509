"""A message queued through a worker that does not drive the session (docs/protocol.md, "Input
while a run is busy"): two real `xclaw serve` workers on one PostgreSQL database, the sweep
set to ten minutes so that nothing but the bus can start the message. Worker A drives the
run; the message reaches worker B, which keeps it and tells A; A's run ends and starts it at
once — also when the run ends just as the message is kept (tried at many offsets)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.harness import Client
from tests.gateway.test_workers import PgServer, sh
from tests.store.conftest import PostgresBackend, postgres_url

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

# Nothing is left to the sweep: a message that waits for it fails the test.
NO_SWEEP = {"XCLAW_SWEEP_EVERY_S": "600"}


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    backend.url = backend.url.replace("pool_max=4", "pool_max=8")
    yield backend
    backend.drop()


class QuietServer(PgServer):
    def env(self) -> dict[str, str]:
        return {**super().env(), **NO_SWEEP}


async def _start_two(tmp_path: Any, pg: Any, turns: list[dict[str, Any]]) -> list[PgServer]:
    from tests.gateway.harness import write_script

    script = write_script(tmp_path / "queue-script.json", turns)
    out = []
    for i in range(2):
        root = tmp_path / f"qworker{i}"
        root.mkdir()
        s = QuietServer(
            root=root,
            script=script,
            approval="yolo",
            db=pg.url,
            shared_workspace=tmp_path / "workspaces",
        )
        await asyncio.to_thread(s.start)
        out.append(s)
    return out


def _reply(text: str) -> Any:
    return lambda f: f.get("type") == "reply" and f.get("content") == text


async def test_a_message_queued_on_the_other_worker_starts_when_the_run_ends(
    tmp_path: Any, pg: Any
) -> None:
    a, b = await _start_two(
        tmp_path,
        pg,
        [{"text": "", "tool_calls": [sh("sleep 2")]}, {"text": "done"}, {"text": "next"}],
    )
    try:
        ca = await Client.open(a)
        await ca.attach()
        sid = ca.session_id
        await ca.send({"type": "message", "sessionId": sid, "content": "first"})
        await ca.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        cb = await Client.open(b)
        await cb.attach(sid)
        await cb.send(
            {
                "type": "message",
                "sessionId": sid,
                "content": "second",
                "messageId": "m-2",
                "busy": "queue",
            }
        )
        kept = await cb.until(lambda f: f.get("messageId") == "m-2")
        assert kept["type"] == "queued", kept
        await ca.until(_reply("done"), timeout=60)
        ended = time.monotonic()
        await ca.until(_reply("next"), timeout=30)
        waited = time.monotonic() - ended
        assert waited < 5.0, f"the queued message started {waited:.1f}s after the run ended"
        rows = pg.query(
            "SELECT worker FROM traces WHERE session_id=? AND step_type='user_input' ORDER BY seq",
            (sid,),
        )
        assert len(rows) == 2  # each message recorded once
    finally:
        a.kill()
        b.kill()


async def test_a_run_ending_just_as_a_message_is_kept_elsewhere_never_leaves_it_waiting(
    tmp_path: Any, pg: Any
) -> None:
    a, b = await _start_two(tmp_path, pg, [{"text": "one"}, {"text": "two"}])
    try:
        ca, cb = await Client.open(a), await Client.open(b)
        for i in range(12):
            delay = i * 0.02  # around the end of a run that makes one model call
            await ca.send({"type": "reconnect", "sessionId": None})
            sid = (await ca.until_type("session"))["sessionId"]
            await ca.until(lambda f: f.get("type") == "status" and "busy" in f)
            await cb.attach(sid)
            first = f"f-{i}"
            await ca.send(
                {"type": "message", "sessionId": sid, "content": "first", "messageId": first}
            )
            await ca.until(lambda f, first=first: f.get("messageId") == first)  # its run began
            await asyncio.sleep(delay)
            mid = f"m-{i}"
            await cb.send(
                {
                    "type": "message",
                    "sessionId": sid,
                    "content": "second",
                    "messageId": mid,
                    "busy": "queue",
                }
            )
            answer = await cb.until(lambda f, mid=mid: f.get("messageId") == mid)
            assert answer["type"] in ("ack", "queued"), answer
            # Both replies within seconds, whoever ends up running the second message.
            await cb.until(
                lambda f, sid=sid: (
                    f.get("type") == "reply"
                    and f.get("sessionId") == sid
                    and f.get("content") == "two"
                ),
                timeout=10,
            )
            inputs = pg.query(
                "SELECT COUNT(*) FROM traces WHERE session_id=? AND step_type='user_input'",
                (sid,),
            )
            assert inputs[0][0] == 2, (i, inputs)
            left = pg.query("SELECT COUNT(*) FROM queued_inputs WHERE session_id=?", (sid,))
            assert left[0][0] == 0
    finally:
        a.kill()
        b.kill()
