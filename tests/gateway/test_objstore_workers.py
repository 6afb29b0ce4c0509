"""The outside check of docs/deploy.md: a session moves between machines with its files.

Real components: two `xclaw serve` workers, each with its own workspace root (nothing
shared on disk), one PostgreSQL (a schema of its own), one S3-compatible server (SeaweedFS,
tests/seaweed.py) and nginx in front as the load balancer, configured by
examples/deploy/nginx.conf and examples/deploy/xclaw.yaml (ports and paths replaced). The
client only ever talks to nginx.

The driving worker is SIGKILLed in the middle of a run; the client reconnects through nginx,
lands on the other worker, which takes the session over and finishes it with the files the
first one wrote; a rollback through the second worker restores them; the database holds no
file contents.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, clean_env, write_script
from tests.gateway.teams_harness import LoadBalancer
from tests.seaweed import Seaweed, held, running_seaweed
from tests.store.conftest import PostgresBackend, postgres_url
from tests.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"
TOKEN = "objstore-test-" + secrets.token_hex(8)


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@dataclass
class Worker(Server):
    """An `xclaw serve` configured from examples/deploy/xclaw.yaml: its own workspace root,
    the test's PostgreSQL and object store."""

    db: str = ""
    blob_store: str = ""
    s3_env: dict[str, str] = field(default_factory=dict)
    lease_ttl_s: float = 10.0

    @property
    def workspace_root(self) -> Path:
        return self.root / "workspaces"

    def workspace(self, session_id: str) -> Path:
        return self.workspace_root / session_id

    def env(self) -> dict[str, str]:
        text = (EXAMPLES / "xclaw.yaml").read_text()
        text = re.sub(r"(?m)^database: .*$", f"database: {self.db}", text)
        text = re.sub(r"(?m)^blob_store: .*$", f"blob_store: {self.blob_store}", text)
        text = re.sub(r"(?m)^workspace_root: .*$", f"workspace_root: {self.workspace_root}", text)
        text = text.replace("mode: ask", f"mode: {self.approval}")
        config = self.root / "xclaw.yaml"
        config.write_text(text + "llm_retry_base_delay: 0.01\n")
        assert self.script is not None
        return clean_env(
            XCLAW_HOME=str(self.home),
            XCLAW_CONFIG=str(config),
            NO_COLOR="1",
            XCLAW_MODEL=f"script:{self.script}",
            XCLAW_TOKEN=TOKEN,
            XCLAW_LEASE_TTL_S=str(self.lease_ttl_s),
            XCLAW_SWEEP_GRACE_S="30",
            **self.s3_env,
        )


@pytest.fixture
def weed(tmp_path: Path) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path) as w:
        yield w


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    backend.url = backend.url.replace("pool_max=4", "pool_max=8")
    yield backend
    backend.drop()


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/api/health", params={"token": TOKEN}, timeout=10).json()


DATA_CMD = (
    "mkdir -p src data && printf 'written on the first worker\\n' > src/notes.txt && "
    "head -c 300000 /dev/urandom > data/blob.bin && sha256sum data/blob.bin > data/sum.txt"
)
SCRIPT = [
    {"text": "", "tool_calls": [sh(DATA_CMD)]},
    {"text": "", "tool_calls": [sh("sleep 4")]},  # the driving worker is killed here
    {
        "text": "",
        "tool_calls": [
            sh("sha256sum -c data/sum.txt > check.txt && cat src/notes.txt >> check.txt")
        ],
    },
    {"text": "done"},
]


async def test_a_session_moves_between_workers_with_its_files(
    tmp_path: Path, pg: PostgresBackend, weed: Seaweed
) -> None:
    # The variables of examples/deploy/worker.env, pointed at the test's SeaweedFS.
    names = [
        line.split("=", 1)[0]
        for line in (EXAMPLES / "worker.env").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert sorted(names) == sorted(weed.env)
    url = weed.url()
    script = write_script(tmp_path / "script.json", SCRIPT)
    workers = [
        Worker(
            root=tmp_path / f"worker{i}",
            script=script,
            approval="yolo",
            db=pg.url,
            blob_store=url,
            s3_env=weed.env,
        )
        for i in range(2)
    ]
    lb: LoadBalancer | None = None
    try:
        for w in workers:
            w.start()
        lb = LoadBalancer(tmp_path / "nginx", [w.port for w in workers])
        c = await Client.open(workers[0], token=TOKEN, url=lb.ws_url)
        await c.attach(None)
        sid = c.session_id
        assert sid is not None
        await c.send({"type": "message", "sessionId": sid, "content": "go"})
        await c.until(lambda f: f.get("type") == "tool" and "sleep 4" in json.dumps(f))
        driver = next(w for w in workers if sid in health(w.http)["sessionsDriven"])
        other = next(w for w in workers if w is not driver)
        first_files = driver.workspace(sid)
        blob = (first_files / "data" / "blob.bin").read_bytes()
        assert not other.workspace(sid).exists()  # nothing shared on disk
        driver.kill(signal.SIGKILL)  # mid-run: inside `sleep 4`

        # The client reconnects through nginx; only the other worker is alive.
        c2 = await Client.open(other, token=TOKEN, url=lb.ws_url)
        status = await c2.attach(sid)
        assert status["busy"] is True  # taken over at once: the dead worker's lock is gone
        reply = await c2.until_type("reply", timeout=90)
        assert reply["content"] == "done"
        files = other.workspace(sid)
        assert (files / "data" / "blob.bin").read_bytes() == blob
        assert (files / "check.txt").read_text() == (
            "data/blob.bin: OK\nwritten on the first worker\n"
        )
        writers = [
            r[0]
            for r in pg.query("SELECT DISTINCT worker FROM traces WHERE session_id=?", (sid,))
            if r[0]
        ]
        assert len(writers) == 2  # driven by both, one after the other

        # Rollback through the load balancer (the second worker) to the check's step.
        steps = pg.query(
            "SELECT seq FROM traces WHERE session_id=? AND step_type='tool_call' "
            "AND input_data->>'command' LIKE 'sha256sum -c%%' ORDER BY seq",
            (sid,),
        )
        check_seq = steps[-1][0]
        async with httpx.AsyncClient(timeout=60) as http:
            answer = await http.post(
                f"{lb.http}/api/sessions/{sid}/rollback",
                json={"stepId": f"s{check_seq:04d}"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert answer.status_code == 200, answer.text
        assert not (files / "check.txt").exists()
        assert (files / "data" / "blob.bin").read_bytes() == blob
        assert (files / "src" / "notes.txt").read_text() == "written on the first worker\n"

        # The database holds manifests and marks, no file contents; the bucket the bytes.
        assert pg.query("SELECT count(*) FROM blobs") == [(0,)]
        rows = pg.query("SELECT hash, pack FROM object_blobs")
        assert hashlib.sha256(blob).hexdigest() in held(weed, url, rows)
        await c.close()
        await c2.close()
    finally:
        if lb is not None:
            lb.stop()
        for w in workers:
            w.kill()


async def test_an_object_store_that_is_down_makes_the_session_wait_not_fail(
    tmp_path: Path, pg: PostgresBackend, weed: Seaweed
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [{"text": "", "tool_calls": [sh("echo hi > a.txt")]}, {"text": "done"}],
    )
    w = Worker(
        root=tmp_path / "worker",
        script=script,
        approval="yolo",
        db=pg.url,
        blob_store=weed.url(),
        s3_env=weed.env,
    )
    try:
        w.start()
        c = await Client.open(w, token=TOKEN)
        await c.attach(None)
        sid = c.session_id
        weed.stop()  # the store is down before the step's snapshot
        await c.send({"type": "message", "sessionId": sid, "content": "go"})
        error = await c.until_type("error", timeout=90)
        assert error["code"] == "blob_store_unavailable"
        assert "could not store" in error["content"] and "s3://" in error["content"]
        await c.until(lambda f: f.get("type") == "notice" and "[store]" in f.get("content", ""))
        assert pg.query("SELECT current_status FROM sessions WHERE session_id=?", (sid,)) == [
            ("Running",)
        ]
        # The store was down after the tool ran (its empty workspace's snapshot needed no
        # upload): its file is on this worker's disk, not yet in the store.
        a_txt = hashlib.sha256(b"hi\n").hexdigest()
        weed.start()  # back: a reconnect resumes the session where it stopped
        c2 = await Client.open(w, token=TOKEN)
        await c2.attach(sid)
        reply = await c2.until_type("reply", timeout=90)
        assert reply["content"] == "done"
        assert (w.workspace(sid) / "a.txt").read_text() == "hi\n"
        # ... and recorded once the store was back (the resume's catch-up snapshot).
        rows = pg.query("SELECT hash, pack FROM object_blobs")
        assert a_txt in held(weed, w.blob_store, rows)
        assert pg.query("SELECT current_status FROM sessions WHERE session_id=?", (sid,)) == [
            ("Success",)
        ]
        assert pg.query("SELECT count(*) FROM blobs") == [(0,)]
        await c.close()
        await c2.close()
    finally:
        w.kill()


async def test_a_zombie_worker_uploads_nothing_anyone_uses(
    tmp_path: Path, pg: PostgresBackend, weed: Seaweed
) -> None:
    """The driver is paused (SIGSTOP) mid-tool past its lease; the other worker takes the
    session over and finishes it; the zombie wakes, its tool writes a file: its writes are
    refused (fencing) and no snapshot of the session ever names what it wrote."""
    url = weed.url()
    script = write_script(
        tmp_path / "script.json",
        [
            {"text": "", "tool_calls": [sh("echo before > b.txt; sleep 4; echo zombie > z.txt")]},
            {"text": "finished after the takeover"},
        ],
    )
    workers = [
        Worker(
            root=tmp_path / f"worker{i}",
            script=script,
            approval="yolo",
            db=pg.url,
            blob_store=url,
            s3_env=weed.env,
            lease_ttl_s=2.0,
        )
        for i in range(2)
    ]
    a, b = workers
    try:
        for w in workers:
            w.start()
        c = await Client.open(a, token=TOKEN)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "go"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        # The command itself has started (its snapshot before is committed): A is between
        # transactions. (Paused inside one, it would hold its row locks until its connection
        # died: docs/deploy.md, "When a part fails".)
        deadline = time.monotonic() + 30
        while not (a.workspace(sid) / "b.txt").exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert a.proc is not None
        os.kill(a.proc.pid, signal.SIGSTOP)  # alive, connected, silent
        try:
            c2 = await Client.open(b, token=TOKEN)
            await c2.attach(sid)
            reply = await c2.until_type("reply", timeout=60)
            assert reply["content"] == "finished after the takeover"
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        # It learns it lost the session at its first write (its tool is then stopped, or it
        # finishes and its completion is refused): nothing after is written by it.
        log = lambda: a.logs()[-3000:]  # noqa: E731
        await until(lambda: "event=lease_lost" in a.logs(), log, every=0.2, in_thread=True)
        await until(lambda: not health(a.http)["sessionsDriven"], log, every=0.1, in_thread=True)
        zombie = hashlib.sha256(b"zombie\n").hexdigest()
        manifests = pg.query("SELECT manifest::text FROM snapshots WHERE session_id=?", (sid,))
        assert manifests and not any(zombie in m for (m,) in manifests)
        rows = pg.query("SELECT hash, pack FROM object_blobs")
        assert zombie not in held(weed, url, rows)
        assert pg.query("SELECT current_status FROM sessions WHERE session_id=?", (sid,)) == [
            ("Success",)
        ]
        await c.close()
        await c2.close()
    finally:
        for w in workers:
            if w.proc is not None and w.proc.poll() is None:
                os.kill(w.proc.pid, signal.SIGCONT)
            w.kill()
