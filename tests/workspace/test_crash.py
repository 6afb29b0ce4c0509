"""SIGKILL in the middle of a snapshot or a restore: after reopening, the workspace is the old
state or the new one, matching the record, never a mix. Real child processes, real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.workspace.helpers import Driver, tree, write
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.workspace import crash_points
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

REPO = Path(__file__).resolve().parents[2]

# The child: open the store and do one operation through the shared code path.
# With a pause point (argv 6, 7), its crash hook announces that point on a file and holds there
# until the test kills it (xclaw.workspace.crash_points).
CHILD = """
import sys
import threading
from pathlib import Path
from xclaw.store import open_store
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

db, root, op, sid, ref = sys.argv[1:6]
pause, marker = (sys.argv[6:8] + ["", ""])[:2]

def hold(point):
    if point == pause:
        Path(marker).write_text(point)
        threading.Event().wait()  # until the test's SIGKILL

store = open_store(db)
ws = Workspaces(store, Path(root), SnapshotConfig(ignore=(".git/",), crash_point=hold))
if op == "rollback":
    ws.rollback(sid, int(ref))
elif op == "fork":
    print(ws.fork(sid, int(ref)).session_id, flush=True)
elif op == "snapshot":
    step = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "x"})))
    ws.snapshot(sid, step)
store.close()
print("finished", flush=True)
"""


def spawn(tmp: Path, args: list[str], pause: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if pause:
        args = [*args, pause, str(tmp / "paused")]
    script = tmp / "child.py"
    script.write_text(CHILD)
    with open(tmp / "child.err", "wb") as err:
        return subprocess.Popen(
            [sys.executable, str(script), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def kill_when_paused(tmp: Path, proc: subprocess.Popen[bytes], point: str) -> None:
    deadline = time.monotonic() + 60
    marker = tmp / "paused"
    while not (marker.exists() and marker.read_text() == point):
        if proc.poll() is not None:
            err = (tmp / "child.err").read_text()
            raise AssertionError(f"child ended before {point}: {err}")
        assert time.monotonic() < deadline, f"child never reached {point}"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    marker.unlink()


@pytest.fixture
def world(tmp_path: Path):
    """A session with a .git dir (unversioned), 120 files of 8 KB, and later steps that
    change, add and delete files. Returns (db, root, sid, target step, old tree, new tree)."""
    db = tmp_path / "x.db"
    root = tmp_path / "workspaces"
    store = SQLiteStore(db)
    workspaces = Workspaces(store, root, SnapshotConfig(ignore=(".git/",)))
    d = Driver(store, workspaces)
    d.step(write(".git/HEAD", "ref: main"))
    for i in range(120):
        (d.ws / "src" / f"m{i // 40}").mkdir(parents=True, exist_ok=True)
        (d.ws / "src" / f"m{i // 40}" / f"f{i:03d}.txt").write_text(f"{i}\n" * 2000)
    new = tree(d.ws)  # the state just before `target`
    target = d.step(write("a.txt", "A"))
    d.step(write("src/m0/f000.txt", "changed"))
    d.step(lambda ws: os.remove(ws / "src/m1/f050.txt"))
    d.step(write("later/b.txt", "B"))
    d.step(write(".git/HEAD", "ref: other"))
    d.think()
    old = tree(d.ws)
    new[".git/HEAD"] = "ref: other"  # unversioned: kept as it is
    store.close()
    return db, root, d.sid, target, old, new


POINTS = [
    "restore.materialising",
    "restore.materialised",
    "restore.half-swapped",
    "restore.swapped",
    "restore.moving",
    "restore.done",
]


def test_every_crash_point_is_exercised() -> None:
    assert [*POINTS, "snapshot.stored"] == sorted(
        crash_points.POINTS, key=[*POINTS, "snapshot.stored"].index
    )
    assert set(crash_points.POINTS) == {*POINTS, "snapshot.stored"}


@pytest.mark.parametrize("point", POINTS)
def test_killed_mid_restore_is_completed_on_reopen(tmp_path: Path, world, point: str) -> None:
    db, root, sid, target, _old, new = world
    proc = spawn(tmp_path, [str(db), str(root), "rollback", sid, str(target)], pause=point)
    kill_when_paused(tmp_path, proc, point)
    with SQLiteStore(db) as store:
        assert [s.seq for s in store.record.steps(sid)][
            -1
        ] == target - 1  # the record is rolled back
        assert len(store.snapshots.pending_restores(sid)) == 1  # ... and the files are journaled
        workspaces = Workspaces(store, root, SnapshotConfig(ignore=(".git/",)))
        (report,) = workspaces.recover(sid)
        assert report.kind == "rollback"
        assert tree(root / sid) == new
        assert store.snapshots.pending_restores() == []
    assert {p.name for p in root.iterdir()} == {".restore.lock", sid}  # no leftovers


def test_killed_mid_restore_the_next_run_sees_the_new_files(tmp_path: Path, world) -> None:
    """The runtime completes a pending restore before the run touches anything."""
    import asyncio
    import json

    from xclaw.config.settings import Settings
    from xclaw.llm.scripted import ScriptedModel
    from xclaw.runtime.runtime import Runtime

    db, root, sid, target, _old, new = world
    proc = spawn(
        tmp_path, [str(db), str(root), "rollback", sid, str(target)], "restore.half-swapped"
    )
    kill_when_paused(tmp_path, proc, "restore.half-swapped")
    assert not (root / sid).exists()  # mid-swap: the workspace is not there at all
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [
                            {"name": "shell", "input": {"command": "ls -A; cat .git/HEAD"}}
                        ],
                    },
                    {"text": "done"},
                ]
            }
        )
    )

    async def run() -> str:
        settings = Settings(
            home=tmp_path, database=str(db), workspace_root=root, approval={"mode": "yolo"}
        )
        store = SQLiteStore(db)
        rt = Runtime(store, settings, model=ScriptedModel(script))
        try:
            await rt.send(sid, "look")
            await rt.wait_idle(sid)
            return store.record.steps(sid)[-2].output_data
        finally:
            await rt.shutdown()
            store.close()

    output = asyncio.run(run())
    assert output.split() == [".git", "src", "ref:", "other"]  # a.txt came after the target
    assert tree(root / sid) == new


def test_killed_mid_fork_restore(tmp_path: Path, world) -> None:
    db, root, sid, target, old, new = world
    proc = spawn(
        tmp_path, [str(db), str(root), "fork", sid, str(target - 1)], "restore.materialising"
    )
    kill_when_paused(tmp_path, proc, "restore.materialising")
    with SQLiteStore(db) as store:
        (pending,) = store.snapshots.pending_restores()
        fork_id = pending.session_id
        assert fork_id != sid and store.record.get_session(fork_id).parent_session_id == sid
        Workspaces(store, root).recover()
        assert tree(root / fork_id) == new  # just after s(target-1) = just before target
        assert tree(root / sid) == old  # the source untouched


def test_killed_mid_snapshot_leaves_files_and_record_consistent(tmp_path: Path, world) -> None:
    db, root, sid, target, old, new = world
    (root / sid / "fresh.bin").write_bytes(os.urandom(300_000))
    old = tree(root / sid)
    proc = spawn(tmp_path, [str(db), str(root), "snapshot", sid, "0"], "snapshot.stored")
    kill_when_paused(tmp_path, proc, "snapshot.stored")
    with SQLiteStore(db) as store:
        last = store.record.steps(sid)[-1]
        assert (
            store.snapshots.get_snapshot(sid, last.seq) is None
        )  # the contents were stored, not it
        assert store.snapshots.gc_blobs() == 1  # the orphan content is collected
        assert tree(root / sid) == old  # a snapshot never writes the workspace
        workspaces = Workspaces(store, root, SnapshotConfig(ignore=(".git/",)))
        workspaces.rollback(sid, target)  # and time travel still works
        assert tree(root / sid) == new


def test_killed_at_any_moment_old_or_new_never_a_mix(tmp_path: Path) -> None:
    """No pause: a bigger workspace, and a rollback killed later and later until one gets
    through; after every kill the files are exactly what the record says."""
    db, root = tmp_path / "x.db", tmp_path / "workspaces"
    with SQLiteStore(db) as store:
        d = Driver(store, Workspaces(store, root))
        for i in range(1500):
            (d.ws / f"d{i % 30}").mkdir(exist_ok=True)
            (d.ws / f"d{i % 30}" / f"f{i}.txt").write_bytes(os.urandom(4096))
        new = tree(d.ws)
        target = d.step(write("a.txt", "A"))
        d.step(lambda ws: [os.remove(p) for p in sorted((ws / "d1").iterdir())])
        old = tree(d.ws)
        sid = d.sid
    outcomes = []
    delay = 0.0
    while True:
        proc = spawn(tmp_path, [str(db), str(root), "rollback", sid, str(target)])
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with SQLiteStore(db) as store:
            rolled_back = target not in [s.seq for s in store.record.steps(sid)]
            pending = bool(store.snapshots.pending_restores(sid))
            Workspaces(store, root).recover()
            assert tree(root / sid) == (new if rolled_back else old), (delay, pending)
        outcomes.append((rolled_back, pending))
        if rolled_back:
            break
        delay += 0.01
        assert delay < 10, "the rollback never got through"
    assert outcomes[0] == (False, False)  # killed before its transaction: the old state
    # Typically the last kill lands after the commit, mid-restore: (True, True).
    assert outcomes[-1][0] is True
