"""A run whose model server is still starting: the first call waits for it (one notice to
the clients), within `llm_startup_wait_s`, instead of failing the session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.llm.fakes import FakeOpenAIServer, Reply
from tests.ports import free_port
from xclaw.config.settings import Settings
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import Status


async def _run(tmp: Path, port: int, wait_s: float) -> tuple[Runtime, str, list[dict[str, Any]]]:
    settings = Settings(
        home=tmp,
        database=str(tmp / "x.db"),
        workspace_root=tmp / "ws",
        providers=(entry("openai:m", {"base_url": f"http://127.0.0.1:{port}/v1"}),),
        llm_retries=0,
        llm_startup_wait_s=wait_s,
    )
    runtime = Runtime(open_store(settings.database), settings)
    frames: list[dict[str, Any]] = []
    session, _ = await runtime.open(None)
    runtime.subscribe(session.session_id, frames.append)
    await runtime.send(session.session_id, "hello?")
    await runtime.wait_idle(session.session_id)
    return runtime, session.session_id, frames


async def test_the_first_call_waits_for_a_model_server_that_starts_late(tmp_path: Path) -> None:
    port = free_port()
    srv = FakeOpenAIServer(port=port, default=Reply(text="Ready now."))

    async def start_late() -> None:
        await asyncio.sleep(2.0)
        srv.start()

    late = asyncio.create_task(start_late())
    try:
        runtime, sid, frames = await _run(tmp_path, port, wait_s=30)
    finally:
        await late
        srv.stop()
    notices = [f["content"] for f in frames if f["type"] == "notice"]
    assert len(notices) == 1 and f"127.0.0.1:{port}" in notices[0], notices
    assert "waiting up to 30 s" in notices[0]
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["Ready now."]
    assert runtime.store.record.get_session(sid).status is Status.SUCCESS
    await runtime.shutdown()
    runtime.store.close()


async def test_a_model_server_that_never_starts_fails_the_run_in_words(tmp_path: Path) -> None:
    runtime, sid, frames = await _run(tmp_path, free_port(), wait_s=2)
    (error,) = [f for f in frames if f["type"] == "error"]
    assert "did not come up within 2 s" in error["content"]
    assert runtime.store.record.get_session(sid).status is Status.FAILED
    await runtime.shutdown()
    runtime.store.close()
