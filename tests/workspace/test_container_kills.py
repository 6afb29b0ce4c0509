"""The kill matrix of session containers (docs/containers.md): a worker SIGKILLed while it
makes a container, while a command runs in one, while it captures one's layer and while it
takes one over. After each, another worker (a new epoch) goes on: exactly one container of
the session, its layer what the record says, no process of the dead worker's epoch left in
it, no half-made container left behind, and the record whole.

Real child processes (the killed worker: Workspaces and the shell tool in a plain Python
process, as in tests/workspace/test_crash.py), real podman with runc, the test image."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers import remove_containers, test_image
from tests.writes import finish
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy
from xclaw.sandbox.isolation import Isolation
from xclaw.store.leases import Lease
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepStatus, StepType
from xclaw.store.steps.writes import BeginStep
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool
from xclaw.workspace.crash_points import CONTAINER_POINTS
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

# The killed worker: one operation through the shared code, holding at a crash point (or,
# for a command, running it) until the test's SIGKILL.
CHILD = """
import asyncio, sys, threading
from pathlib import Path
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy
from xclaw.sandbox.isolation import Isolation
from xclaw.store import open_store
from xclaw.store.leases import Lease
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import BeginStep
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import ShellTool
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

db, root, image, op, sid, epoch, pause, marker = sys.argv[1:9]

def hold(point):
    if point == pause:
        Path(marker).write_text(point)
        threading.Event().wait()

store = open_store(db)
policy = SandboxPolicy("container", image, 256, 1.0, 64, False)
containers = Containers(find_podman(), policy, Path(root))
ws = Workspaces(store, Path(root), SnapshotConfig(crash_point=hold), containers=containers)
lease = Lease(sid, f"worker-{epoch}", int(epoch), 0)
containers.note_epoch(sid, int(epoch), lease.owner)
if op == "start":
    containers.ready(sid, Path(root) / sid)
elif op == "command":
    shell = ShellTool(isolation=Isolation("container", "test", container=containers))
    command = "sleep 300 & echo started > started.txt; sleep 301"
    asyncio.run(shell.run({"command": command}, ToolContext(Path(root) / sid, sid)))
elif op == "capture":
    ws.recover(sid)
    containers.ready(sid, Path(root) / sid)
    step = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "x"})))
    ws.snapshot(sid, step)
elif op == "takeover":
    ws.recover(sid, lease)
print("finished", flush=True)
"""


class World:
    """A session recorded with a layer (`/usr/local/bin/tool` v1, `/bin/yes` deleted), and
    the objects of the worker that goes on after the kill."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = tmp / "x.db"
        self.root = (tmp / "workspaces").resolve()
        self.image = test_image()
        self.store = SQLiteStore(self.db)
        self.policy = SandboxPolicy("container", self.image, 256, 1.0, 64, False)
        self.containers = Containers(find_podman(), self.policy, self.root)
        self.workspaces = Workspaces(
            self.store, self.root, SnapshotConfig(), containers=self.containers
        )
        self.shell = ShellTool(isolation=Isolation("container", "t", container=self.containers))
        self.sid = self.store.record.create_session(title="kills").session_id
        (self.root / self.sid).mkdir(parents=True, mode=0o700)

    def lease(self, epoch: int) -> Lease:
        return Lease(self.sid, f"worker-{epoch}", epoch, 0)

    async def step(self, command: str, epoch: int = 1) -> int:
        """A shell step as the recorder takes it: snapshot before, run, completed, after."""
        self.containers.note_epoch(self.sid, epoch, f"worker-{epoch}")
        step = self.store.record.write(
            BeginStep(
                session_id=self.sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": command})
            )
        )
        await asyncio.to_thread(self.workspaces.snapshot, self.sid, step, None)
        ctx = ToolContext(self.root / self.sid, self.sid)
        result = await self.shell.run({"command": command}, ctx)
        assert not result.is_error, result.content
        self.store.record.write(finish(self.sid, step.seq, output_data=result.content))
        await asyncio.to_thread(self.workspaces.snapshot_after, self.sid, step, None)
        return step.seq

    def run(self, op: str, epoch: int, pause: str = "") -> subprocess.Popen[bytes]:
        script = self.tmp / "child.py"
        script.write_text(CHILD)
        marker = self.tmp / "paused"
        args = [str(self.db), str(self.root), self.image, op, self.sid, str(epoch)]
        with open(self.tmp / "child.err", "wb") as err:
            return subprocess.Popen(
                [sys.executable, str(script), *args, pause, str(marker)],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def kill_when(self, proc: subprocess.Popen[bytes], ready: Any, what: str) -> None:
        deadline = time.monotonic() + 90
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"child ended before {what}: {self.err()}")
            assert time.monotonic() < deadline, f"child never reached {what}: {self.err()}"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def kill_at(self, proc: subprocess.Popen[bytes], point: str) -> None:
        marker = self.tmp / "paused"
        self.kill_when(proc, lambda: marker.exists() and marker.read_text() == point, point)
        marker.unlink()

    def err(self) -> str:
        return (self.tmp / "child.err").read_text()

    def sh(self, command: str) -> str:
        done = subprocess.run(
            ["podman", "exec", self.containers.name(self.sid), "sh", "-c", command],
            capture_output=True,
            text=True,
            check=False,
        )
        return (done.stdout + done.stderr).strip()

    def go_on(self, epoch: int) -> None:
        """The worker that takes over (a process of its own: it knows nothing of the session's
        container yet): recover under its epoch, then a command's container."""
        self.containers = Containers(find_podman(), self.policy, self.root)
        self.workspaces = Workspaces(
            self.store, self.root, SnapshotConfig(), containers=self.containers
        )
        self.shell = ShellTool(isolation=Isolation("container", "t", container=self.containers))
        self.workspaces.recover(self.sid, self.lease(epoch))
        self.containers.ready(self.sid, self.root / self.sid)

    def check_one_container_as_recorded(self, epoch: int) -> None:
        reaped = self.workspaces.reap_containers()
        assert all(r.why == "a creation a crash cut short" for r in reaped), reaped
        mine = [c for c in self.containers.listed() if c[0] == self.sid]
        assert mine == [(self.sid, "running", self.containers.name(self.sid))], mine
        assert self.sh("cat /usr/local/bin/tool") == "v1"
        assert self.sh("test -e /bin/yes || echo gone") == "gone"
        stale = [
            p
            for p in self.containers.processes(self.sid)
            if p.epoch is not None and p.epoch < epoch and p.owner != f"worker-{epoch}"
        ]
        assert stale == [], stale


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    asyncio.run(w.step("echo v1 > /usr/local/bin/tool && rm /bin/yes"))
    yield w
    w.store.close()
    remove_containers(w.root)


def fresh(world: World) -> None:
    """The session's container gone (a fork, another host): the next one is made from the
    record's layer."""
    world.containers.remove(world.sid)


MAKING = ["container.created", "container.layer-written"]
STARTING = "container.started"
REWINDING = ["env.stopped", "env.half-written"]


@pytest.mark.parametrize("point", MAKING)
def test_killed_while_making_the_container(world: World, point: str) -> None:
    fresh(world)
    world.kill_at(world.run("start", 2, point), point)
    world.go_on(3)
    world.check_one_container_as_recorded(3)


def test_killed_while_starting_a_stopped_container(world: World) -> None:
    world.containers.stop(world.sid)
    world.kill_at(world.run("start", 2, STARTING), STARTING)
    world.go_on(3)
    world.check_one_container_as_recorded(3)


def test_killed_during_a_command(world: World) -> None:
    started = world.root / world.sid / "started.txt"
    world.kill_when(world.run("command", 2), started.exists, "the command's start")
    world.go_on(3)  # its background process (epoch 2) fenced out, the lifeline took the rest
    world.check_one_container_as_recorded(3)
    running = world.sh("ps -o args")
    assert "sleep 300" not in running and "sleep 301" not in running, running


def test_killed_while_capturing_the_layer(world: World) -> None:
    world.sh("echo v2 > /usr/local/bin/tool")  # what the step before the capture changed
    before = world.store.snapshots.list_snapshots(world.sid)
    world.kill_at(world.run("capture", 2, "snapshot.stored"), "snapshot.stored")
    assert world.store.snapshots.list_snapshots(world.sid) == before  # nothing half-saved
    [*_, cut] = world.store.record.steps(world.sid)
    assert cut.status is StepStatus.RUNNING  # the step is there, to be marked interrupted
    world.go_on(3)
    # The layer the record holds won: the container's unrecorded change was rewound.
    world.check_one_container_as_recorded(3)
    asyncio.run(world.step("echo after > /opt/after", epoch=3))
    assert world.sh("cat /opt/after") == "after"


@pytest.mark.parametrize("point", REWINDING)
def test_killed_while_taking_over(world: World, point: str) -> None:
    world.sh("echo v2 > /usr/local/bin/tool && touch /bin/yes")  # unrecorded drift
    world.kill_at(world.run("takeover", 2, point), point)
    world.go_on(3)
    world.check_one_container_as_recorded(3)


def test_every_container_crash_point_is_exercised() -> None:
    assert list(CONTAINER_POINTS) == [*MAKING, STARTING, *REWINDING]
