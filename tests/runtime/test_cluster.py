"""The cluster side of a worker (xclaw/runtime/cluster.py), on both backends: the sweep that
resumes what a dead worker left Running, and (PostgreSQL) approvals answered on another
worker than the one that asked."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import BACKEND_PARAMS, BACKENDS, Backend, PostgresBackend, postgres_url
from xclaw.config.settings import Settings
from xclaw.llm import registry
from xclaw.llm.scripted import ScriptedModel
from xclaw.people.answered_by import AnsweredBy
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import Status

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    b = BACKENDS[request.param](tmp_path)
    yield b
    b.drop()


class Node:
    """A runtime with its cluster, as `xclaw serve` wires them."""

    def __init__(
        self,
        backend: Backend,
        tmp: Path,
        script: Path,
        approval: str = "yolo",
        *,
        models: tuple[str, ...] = (),
    ) -> None:
        """`models`: the provider chain this worker says it runs (its settings' providers)
        besides the script it answers with."""
        settings = Settings(
            home=tmp,
            database=backend.url,
            workspace_root=tmp / "ws",
            approval={"mode": approval},
            providers=tuple(registry.entry(m) for m in models),
        )
        self.store = open_store(backend.url)
        self.runtime = Runtime(
            self.store,
            settings,
            model=ScriptedModel(script),
            model_specs=models or None,
        )
        self.cluster = self.runtime.new_cluster()
        self.frames: list[dict[str, Any]] = []

    async def close(self) -> None:
        await self.runtime.shutdown()
        self.store.close()


async def _nodes(backend: Backend, tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Node] = []

    async def make(
        turns: list[dict[str, Any]], approval: str = "yolo", script: str = "script.json"
    ) -> Node:
        """`script`: the file of its scripted model, whose path is the model's name (a
        session is driven only with the model it runs with: xclaw/runtime/agreement.py)."""
        path = tmp_path / script
        path.write_text(json.dumps({"turns": turns}))
        script_path = path
        node = Node(backend, tmp_path, script_path, approval)
        await node.cluster.start()
        made.append(node)
        return node

    yield make
    for n in made:
        await n.close()


@pytest.fixture
async def nodes(backend: Backend, tmp_path: Path) -> AsyncIterator[Any]:
    """Runtimes with their clusters on one database of each backend."""
    async for make in _nodes(backend, tmp_path):
        yield make


@pytest.fixture
async def pg_nodes(tmp_path: Path) -> AsyncIterator[Any]:
    """The same on PostgreSQL only: frames and answers cross workers over LISTEN/NOTIFY."""
    backend = PostgresBackend(postgres_url())
    async for make in _nodes(backend, tmp_path):
        yield make
    backend.drop()


def run_and_kill(backend: Backend, tmp: Path, turns: list[dict[str, Any]]) -> str:
    """`xclaw run` in a process of its own, SIGKILLed while its shell call sleeps."""
    script = tmp / "dead-script.json"
    script.write_text(json.dumps({"turns": turns}))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XCLAW_", "ANTHROPIC_", "OPENAI_"))
    }
    env.update(
        XCLAW_HOME=str(tmp / "dead"),
        XCLAW_MODEL=f"script:{script}",
        XCLAW_DB=backend.url,
        XCLAW_LEASE_TTL_S="1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", "go"],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                rows = backend.query(
                    "SELECT session_id FROM traces WHERE step_type='tool_call' AND status='running'"
                )
            except Exception:  # noqa: BLE001 - its tables are not created yet
                rows = []
            if rows:
                return str(rows[0][0])
            time.sleep(0.05)
        raise AssertionError("the run never reached its tool call")
    finally:
        proc.kill()
        proc.wait(10)


TURNS = [{"text": "", "tool_calls": [sh("sleep 30")]}, {"text": "picked up and finished"}]


async def lease_expired(store: Any, sid: str, timeout: float = 30) -> None:
    """Until the session's lease has expired by the store's own lease clock (the database
    server's with PostgreSQL): a deadline, not a guess of how long that takes."""
    deadline = time.monotonic() + timeout
    while True:
        info = await asyncio.to_thread(store.leases.lease_info, sid)
        if info.expires_at is not None and info.expires_at <= info.now:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the lease of {sid} did not expire within {timeout} s: {info}")
        await asyncio.sleep(0.02)


async def test_the_sweep_resumes_what_a_dead_worker_left_running(
    nodes, backend: Backend, tmp_path: Path
) -> None:
    sid = await asyncio.to_thread(run_and_kill, backend, tmp_path, TURNS)
    node = await nodes(TURNS, script="dead-script.json")  # the same model as the dead run
    await lease_expired(node.store, sid)  # its last lease (1 s) expired: the run is orphaned
    node.cluster.grace_s = 30.0
    assert await node.cluster.sweep() == []  # within the grace period a client may come back
    assert node.store.record.get_session(sid).status is Status.RUNNING
    node.cluster.grace_s = 0.0
    assert await node.cluster.sweep() == [sid]
    await node.runtime.wait_idle(sid)
    assert node.store.record.get_session(sid).status is Status.SUCCESS
    who = [
        r[0]
        for r in backend.query("SELECT worker FROM traces WHERE session_id=? ORDER BY seq", (sid,))
    ]
    dead = who[0]
    assert dead != node.runtime.worker_id and who[-1] == node.runtime.worker_id
    assert who.index(node.runtime.worker_id) == len([w for w in who if w == dead])
    # The dead worker's row is forgotten once none of its leases can be taken early.
    await node.cluster.sweep()
    assert dead not in {w.worker_id for w in node.store.leases.workers()}


def adopted(node: Node, sid: str) -> bool:
    return any(
        s.name == "session_config" and s.input_data["decision"] == "adopted"
        for s in node.store.record.steps(sid)
    )


async def test_the_sweep_of_a_worker_with_another_model_leaves_the_session_waiting(
    nodes, backend: Backend, tmp_path: Path
) -> None:
    """A takeover must not change a session's model: a worker without it declines, once, in
    the record; a worker that has it among its chain drives it with it."""
    sid = await asyncio.to_thread(run_and_kill, backend, tmp_path, TURNS)
    other = await nodes([{"text": "the other model's answer"}], script="other.json")
    await lease_expired(other.store, sid)
    other.cluster.grace_s = 0.0
    assert await other.cluster.sweep() == []
    assert await other.cluster.sweep() == []  # asked every round: said once
    alerts = [s for s in other.store.record.steps(sid) if s.name == "session_config"]
    assert [a.input_data["decision"] for a in alerts] == ["refused"]
    assert alerts[0].input_data["session"]["models"] == [f"script:{tmp_path / 'dead-script.json'}"]
    assert other.store.record.get_session(sid).status is Status.RUNNING  # waiting, not driven
    assert not other.store.leases.lease_info(sid).live  # let go: another worker may take it

    # A worker whose chain holds the session's model too drives it with that model.
    dead_model = f"script:{tmp_path / 'dead-script.json'}"
    both = Node(
        backend,
        tmp_path,
        tmp_path / "other.json",
        models=(f"script:{tmp_path / 'other.json'}", dead_model),
    )
    both.cluster.grace_s = 0.0
    await both.cluster.start()
    try:
        # The sweep that start() runs at once may be the one that takes it over.
        assert await both.cluster.sweep() in ([sid], [])
        # Taken over once its run says so in the record (busy alone may be a claim that is
        # still deciding); the alert is written inside that run, so waiting for it to end
        # below waits for the whole takeover.
        deadline = time.monotonic() + 60
        while not adopted(both, sid):
            assert time.monotonic() < deadline, "no worker took the session over"
            await asyncio.sleep(0.02)
        await both.runtime.wait_idle(sid)
        steps = both.store.record.steps(sid)
        decisions = [s.input_data["decision"] for s in steps if s.name == "session_config"]
        assert decisions == ["refused", "adopted"]
        answer = [s for s in steps if s.step_type.value == "llm_call"][-1].output_data
        assert answer["text"] == "picked up and finished"  # the dead run's script answered
        assert answer["model"] == "script:dead-script.json"  # built from its provider entry
    finally:
        await both.close()


async def test_sessions_nobody_drove_are_left_for_a_reconnect(nodes) -> None:
    node = await nodes(TURNS)
    sid = node.store.record.create_session().session_id
    node.store.record.transition(sid, Status.RUNNING)  # e.g. written by an xclaw before leases
    node.cluster.grace_s = 0.0
    assert await node.cluster.sweep() == []
    assert node.store.record.get_session(sid).status is Status.RUNNING


@pytest.mark.postgres
async def test_an_approval_is_answered_on_another_worker(pg_nodes) -> None:
    turns = [{"text": "", "tool_calls": [sh("echo hi > out.txt")]}, {"text": "wrote it"}]
    a = await pg_nodes(turns, approval="ask")
    b = await pg_nodes(turns, approval="ask")
    deadline = time.monotonic() + 30  # b's hello reached a: a publishes its frames
    while not (a.cluster.others and b.cluster.others):
        assert time.monotonic() < deadline, "the workers never heard of each other"
        await asyncio.sleep(0.02)
    sid = (await a.runtime.open(None))[0].session_id
    b.runtime.subscribe(sid, b.frames.append)
    await a.runtime.send(sid, "write")
    for _ in range(200):
        if any(f["type"] == "approval_request" for f in b.frames):
            break
        await asyncio.sleep(0.05)
    ask = next(f for f in b.frames if f["type"] == "approval_request")
    assert b.runtime.is_busy(sid) and b.runtime.pending_approval_frames(sid)
    # Forwarded to the driver, a, with who answered where.
    b.runtime.answer_approval(sid, ask["stepId"], True, AnsweredBy.person("web", "websocket"))
    await asyncio.wait_for(a.runtime.wait_idle(sid), 20)
    assert a.store.record.get_session(sid).status is Status.SUCCESS
    answered = a.store.record.get_step(sid, ask["stepId"]).output_data
    assert answered["by"] == {"kind": "person", "client": "web", "via": "websocket"}
    for _ in range(100):
        if any(f["type"] == "reply" for f in b.frames):
            break
        await asyncio.sleep(0.05)
    assert [f["content"] for f in b.frames if f["type"] == "reply"] == ["wrote it"]
    assert not b.runtime.is_busy(sid)
