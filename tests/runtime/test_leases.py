"""One driver per session across workers (one driver), in-process: two runtimes (two workers)
on one database, SQLite file or PostgreSQL schema. A second worker is told who drives; a
worker that lost its lease stops without writing; the record shows who wrote each step."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import BACKEND_PARAMS, BACKENDS, Backend
from tests.waiting import until
from xclaw.config.settings import Settings
from xclaw.errors import SessionBusy
from xclaw.llm.scripted import ScriptedModel
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import INTERRUPTED, Status, StepStatus, StepType


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


class Worker:
    """One runtime with its own store connection(s): what one `xclaw serve` process has."""

    def __init__(self, backend: Backend, tmp: Path, script: Path) -> None:
        settings = Settings(
            home=tmp, database=backend.url, workspace_root=tmp / "ws", approval={"mode": "yolo"}
        )
        self.backend = backend
        self.store = open_store(backend.url)
        self.runtime = Runtime(self.store, settings, model=ScriptedModel(script))
        self.frames: list[dict[str, Any]] = []

    @property
    def id(self) -> str:
        return self.runtime.worker_id

    async def close(self) -> None:
        await self.runtime.shutdown()
        self.store.close()


@pytest.fixture(params=BACKEND_PARAMS)
async def workers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[list[dict[str, Any]]], tuple[Worker, Worker]]]:
    backend = BACKENDS[request.param](tmp_path)
    made: list[Worker] = []

    def make(turns: list[dict[str, Any]]) -> tuple[Worker, Worker]:
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"turns": turns}))
        pair = Worker(backend, tmp_path, script), Worker(backend, tmp_path, script)
        made.extend(pair)
        return pair

    yield make
    for w in made:
        await w.close()
    backend.drop()


def writers(w: Worker, sid: str) -> list[str | None]:
    """traces.worker of each step, in order: who wrote it under its lease."""
    rows = w.backend.query("SELECT worker FROM traces WHERE session_id=? ORDER BY seq", (sid,))
    return [r[0] for r in rows]


async def test_a_second_worker_is_told_who_drives(workers) -> None:
    a, b = workers([{"text": "", "tool_calls": [sh("sleep 0.5")]}, {"text": "slept"}])
    sid = (await a.runtime.open(None))[0].session_id
    await a.runtime.send(sid, "sleep")
    await until(
        lambda: b.store.leases.lease_info(sid).live, "A's run holds the lease", in_thread=True
    )
    with pytest.raises(SessionBusy) as e:
        await b.runtime.send(sid, "me too")
    assert a.id in e.value.message and e.value.code == "busy"
    assert await b.runtime.resume_if_needed(sid) is False  # a refresh there just observes
    with pytest.raises(SessionBusy):
        await b.runtime.rollback(sid, "s0001")
    await a.runtime.wait_idle(sid)
    assert b.store.record.get_session(sid).status is Status.SUCCESS
    # The lease was released with the reply: the other worker may drive it at once.
    await b.runtime.send(sid, "again")
    await b.runtime.wait_idle(sid)
    who = writers(b, sid)
    assert who[:4] == [a.id] * 4 and set(who[4:]) == {b.id}
    assert not b.store.leases.lease_info(sid).live


async def test_a_run_that_lost_its_lease_stops_without_writing(workers, caplog) -> None:
    """The in-process zombie: A cannot renew (paused), its lease lapses, B takes over and
    finishes; A's tool then completes and every write it tries is refused and logged."""
    a, b = workers(
        [
            {"text": "", "tool_calls": [sh("sleep 1.2; echo done >> effects.txt")]},
            {"text": "finished by whoever drives"},
        ]
    )
    a.runtime.leases.ttl_s = 0.4
    a.runtime.leases.keep_alive = lambda *args: asyncio.create_task(asyncio.sleep(3600))  # type: ignore[method-assign]
    sid = (await a.runtime.open(None))[0].session_id
    a.runtime.subscribe(sid, a.frames.append)
    caplog.set_level(logging.WARNING, logger="xclaw.runtime")
    await a.runtime.send(sid, "work")
    # A's tool runs (its write-ahead row is there), then its lease lapses by the lease clock.
    await until(
        lambda: any(s.step_type is StepType.TOOL_CALL for s in b.store.record.steps(sid)),
        "a tool call is recorded",
        in_thread=True,
    )
    await until(lambda: not b.store.leases.lease_info(sid).live, "the lease lapses", in_thread=True)
    assert await b.runtime.resume_if_needed(sid) is True
    await b.runtime.wait_idle(sid)
    assert b.store.record.get_session(sid).status is Status.SUCCESS
    before = b.store.record.steps(sid)
    await asyncio.wait_for(a.runtime.wait_idle(sid), 10)  # A's tool finished; A stopped
    after = b.store.record.steps(sid)
    assert after == before  # not one row written by A after the takeover
    tool = next(s for s in after if s.step_type is StepType.TOOL_CALL)
    assert tool.status is StepStatus.FAILED and tool.error_message == INTERRUPTED
    assert any("event=lease_lost" in r.getMessage() for r in caplog.records)
    assert any("[lease] another worker took over" in f.get("content", "") for f in a.frames)
    who = writers(b, sid)
    first_b = who.index(b.id)
    assert set(who[:first_b]) == {a.id} and set(who[first_b:]) == {b.id}  # no interleaving
    assert a.runtime.driven_sessions() == [] and not a.runtime.is_busy(sid)
