"""The outside check of docs/containers.md: a session's container across turns, workers and a
SIGKILL.

Real components: two `xclaw serve` workers configured with `sandbox.isolation: container`
(podman with runc, the test image of tests/containers.py), one PostgreSQL (a schema of its
own); on "two hosts" each worker has its own workspace root and the files move through an
S3-compatible server (SeaweedFS, tests/seaweed.py), on "one host" they share one root.

A server the agent starts in the background in one turn answers in the next; the driving
worker is SIGKILLed in the middle of a command; the other worker takes the session over and
finishes it with the container's file system as it was (what the first worker installed
outside the workspace is there) and with no process of the dead worker's left running in
it; a rollback through the second worker removes what was installed after the step."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.containers import containers_of, remove_containers, test_image
from tests.gateway.harness import Client, Server, clean_env, write_script
from tests.seaweed import Seaweed, running_seaweed
from tests.store.conftest import PostgresBackend, postgres_url
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy
from xclaw.sandbox.paths import workspace_dir
from xclaw.store import open_store
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TOKEN = "container-test-" + secrets.token_hex(8)


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


@dataclass
class Worker(Server):
    """An `xclaw serve` whose sessions run in containers, on the test's PostgreSQL (and
    object store, when given)."""

    db: str = ""
    ws_root: Path = Path()
    blob_store: str = ""
    s3_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        config = self.root / "xclaw.yaml"
        lines = [
            f"database: {self.db}",
            f"workspace_root: {self.ws_root}",
            "approval:\n  mode: yolo",
            f"sandbox:\n  isolation: container\n  image: {test_image()}",
            "llm_retry_base_delay: 0.01",
        ]
        if self.blob_store:
            lines.append(f"blob_store: {self.blob_store}")
        config.write_text("\n".join(lines) + "\n")
        assert self.script is not None
        return clean_env(
            XCLAW_HOME=str(self.home),
            XCLAW_CONFIG=str(config),
            NO_COLOR="1",
            XCLAW_MODEL=f"script:{self.script}",
            XCLAW_TOKEN=TOKEN,
            XCLAW_LEASE_TTL_S="10",
            XCLAW_SWEEP_GRACE_S="30",
            **self.s3_env,
        )


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    backend = PostgresBackend(postgres_url())
    backend.url = backend.url.replace("pool_max=4", "pool_max=8")
    yield backend
    backend.drop()


@pytest.fixture
def weed(tmp_path: Path) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path) as w:
        yield w


def health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/api/health", params={"token": TOKEN}, timeout=10).json()


INSTALL = (
    "echo installed > /usr/local/bin/tool && echo pong > /opt/ping && "
    "httpd -p 127.0.0.1:8090 -h /opt"
)
FINAL = "cat /usr/local/bin/tool; wget -qO- http://127.0.0.1:8090/ping || echo no-server"
SCRIPT = [
    {"text": "", "tool_calls": [sh(INSTALL)]},
    {"text": "installed"},
    {"text": "", "tool_calls": [sh("wget -qO- http://127.0.0.1:8090/ping")]},
    {"text": "answered"},
    {"text": "", "tool_calls": [sh("sleep 8")]},  # the driving worker is killed here
    {"text": "", "tool_calls": [sh(FINAL)]},
    {"text": "done"},
]


def shell_outputs(pg: PostgresBackend, sid: str) -> dict[str, Any]:
    rows = pg.query(
        "SELECT input_data->>'command', output_data FROM traces WHERE session_id=? "
        "AND step_type='tool_call' ORDER BY seq",
        (sid,),
    )
    return {r[0]: json.loads(r[1]) if isinstance(r[1], str) and r[1] else r[1] for r in rows}


def make_container(pg: PostgresBackend, root: Path, session_id: str) -> str:
    """The session's container made on this host from its recorded layer, as a worker's
    first command for it would; its name."""
    with open_store(pg.url) as store:
        policy = SandboxPolicy("container", test_image(), 2048, 2.0, 512, False)
        containers = Containers(find_podman(), policy, root)
        Workspaces(store, root, SnapshotConfig(), containers=containers)  # sets its layers
        containers.ready(session_id, workspace_dir(root, session_id))
        return containers.name(session_id)


def gc(worker: Worker, root: Path) -> dict[str, Any]:
    """`xclaw gc` on the worker's host, its containers' grace 0."""
    config = worker.root / "gc.yaml"
    config.write_text(
        f"database: {worker.db}\nworkspace_root: {root}\nsandbox:\n  isolation: container\n"
        f"  image: {test_image()}\n  container_grace_s: 0\n"
    )
    env = clean_env(XCLAW_HOME=str(worker.home), XCLAW_CONFIG=str(config), **worker.s3_env)
    if worker.blob_store:
        config.write_text(config.read_text() + f"blob_store: {worker.blob_store}\n")
    done = subprocess.run(
        [sys.executable, "-m", "xclaw", "gc", "--yes", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def ps(container: str) -> str:
    done = subprocess.run(
        ["podman", "exec", container, "ps", "-o", "args"], capture_output=True, text=True
    )
    return done.stdout


def in_container(container: str, command: str) -> str:
    done = subprocess.run(
        ["podman", "exec", container, "sh", "-c", command], capture_output=True, text=True
    )
    return (done.stdout + done.stderr).strip()


async def run_and_take_over(
    workers: list[Worker], pg: PostgresBackend
) -> tuple[str, Worker, Worker, Client]:
    """Two turns on one worker, a third killed mid-command, finished by the other."""
    for w in workers:
        w.start()
    c = await Client.open(workers[0], token=TOKEN)
    await c.attach(None)
    sid = c.session_id
    assert sid is not None
    assert (await c.turn("install it"))["content"] == "installed"
    assert (await c.turn("ask the server"))["content"] == "answered"
    outputs = shell_outputs(pg, sid)
    assert outputs["wget -qO- http://127.0.0.1:8090/ping"] == "pong"
    await c.send({"type": "message", "sessionId": sid, "content": "more"})
    await c.until(lambda f: f.get("type") == "tool" and "sleep 8" in json.dumps(f))
    driver = next(w for w in workers if sid in health(w.http)["sessionsDriven"])
    other = next(w for w in workers if w is not driver)
    driver.kill(signal.SIGKILL)  # mid-command: inside `sleep 8`
    c2 = await Client.open(other, token=TOKEN)
    await c2.attach(sid)
    reply = await c2.until_type("reply", timeout=120)
    assert reply["content"] == "done"
    # No step lost, the interrupted command not repeated blindly: recorded once, interrupted.
    slept = pg.query(
        "SELECT status, error_message FROM traces WHERE session_id=? "
        "AND input_data->>'command' = 'sleep 8'",
        (sid,),
    )
    assert slept == [("failed", "interrupted")], slept
    await c.close()
    return sid, driver, other, c2


async def test_one_host_the_other_worker_adopts_the_container_and_fences_the_dead_one(
    tmp_path: Path, pg: PostgresBackend
) -> None:
    root = (tmp_path / "shared-workspaces").resolve()
    script = write_script(tmp_path / "script.json", SCRIPT)
    workers = [
        Worker(root=tmp_path / f"w{i}", script=script, approval="yolo", db=pg.url, ws_root=root)
        for i in range(2)
    ]
    try:
        sid, _, other, c2 = await run_and_take_over(workers, pg)
        [made] = containers_of(root)  # adopted, not made again
        name = str(made["Names"][0])  # type: ignore[index]
        final = str(shell_outputs(pg, sid)[FINAL])
        assert final.startswith("installed"), final
        assert "no-server" in final, final  # the dead worker's server was fenced out
        running = ps(name)
        assert "httpd" not in running and "sleep 8" not in running, running

        seq = pg.query(
            "SELECT seq FROM traces WHERE session_id=? AND step_type='tool_call' ORDER BY seq",
            (sid,),
        )[0][0]
        # A fork taken just after the install has it: its own container, made (as its first
        # command would make it) from the fork's recorded layer.
        async with httpx.AsyncClient(timeout=60) as http:
            forked = await http.post(
                f"{other.http}/api/sessions/{sid}/fork",
                json={"stepId": f"s{seq:04d}", "title": "after the install"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert forked.status_code == 201, forked.text
        fork_id = forked.json()["session"]["sessionId"]
        fork_name = await asyncio.to_thread(make_container, pg, root, fork_id)
        assert in_container(fork_name, "cat /usr/local/bin/tool") == "installed"
        assert "httpd" not in ps(fork_name)  # no process of the source's

        # Rollback through the second worker to the install: the file is gone.
        async with httpx.AsyncClient(timeout=60) as http:
            answer = await http.post(
                f"{other.http}/api/sessions/{sid}/rollback",
                json={"stepId": f"s{seq:04d}"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        assert answer.status_code == 200, answer.text
        assert in_container(name, "test -e /usr/local/bin/tool || echo gone") == "gone"
        await c2.close()
        async with httpx.AsyncClient(timeout=60) as http:
            for session in (sid, fork_id):
                gone = await http.delete(
                    f"{other.http}/api/sessions/{session}",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
                assert gone.status_code in (200, 204), gone.text
        assert containers_of(root) == []  # no container leaks
    finally:
        for w in workers:
            w.kill()
        remove_containers(root)


async def test_another_host_rebuilds_the_container_from_the_recorded_layers(
    tmp_path: Path, pg: PostgresBackend, weed: Seaweed
) -> None:
    script = write_script(tmp_path / "script.json", SCRIPT)
    url = weed.url()
    roots = [(tmp_path / f"w{i}" / "workspaces").resolve() for i in range(2)]
    workers = [
        Worker(
            root=tmp_path / f"w{i}",
            script=script,
            approval="yolo",
            db=pg.url,
            ws_root=roots[i],
            blob_store=url,
            s3_env=weed.env,
        )
        for i in range(2)
    ]
    try:
        sid, driver, other, c2 = await run_and_take_over(workers, pg)
        final = str(shell_outputs(pg, sid)[FINAL])
        assert final.startswith("installed"), final  # rebuilt from the layers it recorded
        assert "no-server" in final, final  # processes do not move between hosts
        [rebuilt] = containers_of(roots[workers.index(other)])
        assert rebuilt["State"] == "running"
        # The dead worker's host still holds its container, its server running (another
        # host's takeover cannot reach it): that host's gc stops it, the session unrun.
        dead_root = roots[workers.index(driver)]
        [left] = containers_of(dead_root)
        assert "httpd" in ps(str(left["Names"][0]))  # type: ignore[index]
        report = gc(driver, dead_root)
        assert [(r["sessionId"], r["action"]) for r in report["containers"]] == [(sid, "stopped")]
        assert [c["State"] for c in containers_of(dead_root)] == ["exited"]
        # The database holds no content of the layer either: the object store has it.
        assert pg.query("SELECT count(*) FROM blobs") == [(0,)]
        await c2.close()
    finally:
        for w in workers:
            w.kill()
        for root in roots:
            remove_containers(root)
