"""The workspace follows the session (docs/workspace.md): two "workers" — each its own
store connection and its own workspace root — on one PostgreSQL and one real S3-compatible
store (SeaweedFS). What one writes, the other finds; rollback and fork work from either;
uploads are incremental; the database holds no file contents."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.seaweed import Seaweed, aws_env, running_seaweed
from tests.store.builders import tool
from tests.store.conftest import PostgresBackend, postgres_url
from tests.writes import finish
from xclaw.ops import fsck
from xclaw.store.base import Store
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path_factory.mktemp("s3")) as w, aws_env(w):
        yield w


@pytest.fixture
def pg() -> Iterator[PostgresBackend]:
    b = PostgresBackend(postgres_url())
    yield b
    b.drop()


class Worker:
    def __init__(self, pg: PostgresBackend, url: str, root: Path) -> None:
        self.store: Store = pg.open()
        self.store.snapshots.use_blob_store(url)
        self.ws = Workspaces(self.store, root, SnapshotConfig(ignore=("cache/",)))  # type: ignore[arg-type]

    def run_tool(self, sid: str, change: dict[str, bytes | None]) -> int:
        """One side-effecting step as the runtime makes it: its row, the snapshot before,
        the change, the snapshot after. Returns the step's seq."""
        self.ws.recover(sid)
        step = self.store.record.write(BeginStep(session_id=sid, step=tool()))
        self.ws.snapshot(sid, step)
        d = self.ws.path(sid)
        d.mkdir(parents=True, exist_ok=True)
        for name, data in change.items():
            if data is None:
                (d / name).unlink()
            else:
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_bytes(data)
        self.store.record.write(finish(sid, step.seq, output_data="ok"))
        self.ws.snapshot_after(sid, step)
        return step.seq

    def files(self, sid: str) -> dict[str, bytes]:
        d = self.ws.path(sid)
        return {
            str(p.relative_to(d)): p.read_bytes()
            for p in sorted(d.rglob("*"))
            if p.is_file() and not p.is_relative_to(d / "cache")
        }


@pytest.fixture
def two(pg: PostgresBackend, weed: Seaweed, tmp_path: Path) -> Iterator[tuple[Worker, Worker]]:
    url = weed.url()
    a, b = Worker(pg, url, tmp_path / "a"), Worker(pg, url, tmp_path / "b")
    yield a, b
    a.store.close()
    b.store.close()


def test_the_files_one_worker_wrote_are_there_on_the_other(
    two: tuple[Worker, Worker], pg: PostgresBackend
) -> None:
    a, b = two
    sid = a.store.record.create_session().session_id
    a.run_tool(sid, {"notes.txt": b"written on a", "src/main.py": b"print(1)\n"})
    a.run_tool(sid, {"notes.txt": b"written on a, twice"})
    assert not b.ws.path(sid).exists()
    b.ws.recover(sid)  # what a run's start does on the worker taking the session over
    assert b.files(sid) == {"notes.txt": b"written on a, twice", "src/main.py": b"print(1)\n"}
    # B's first snapshot after the takeover reads nothing it materialised (stat cache primed).
    b.run_tool(sid, {"b.txt": b"b" * 1000})
    assert b.ws.snapshotter.last.files_read == 1
    assert b.ws.snapshotter.last.new_bytes == 1000
    assert pg.query("SELECT count(*) FROM blobs") == [(0,)]
    # fsck counts what the object store holds as stored (object_blobs says where).
    assert [f.code for f in fsck.check(b.store).findings] == []


def test_rollback_and_fork_work_from_either_worker(two: tuple[Worker, Worker]) -> None:
    a, b = two
    sid = a.store.record.create_session().session_id
    a.run_tool(sid, {"v.txt": b"one"})
    second = a.run_tool(sid, {"v.txt": b"two", "extra.txt": b"extra"})
    a.run_tool(sid, {"v.txt": b"three"})
    # Fork through B (which never had the files) at `second`: the state just after it.
    fork = b.ws.fork(sid, second)
    assert b.files(fork.session_id) == {"v.txt": b"two", "extra.txt": b"extra"}
    a.ws.recover(fork.session_id)
    assert a.files(fork.session_id) == {"v.txt": b"two", "extra.txt": b"extra"}
    # Rolled back through B: B gets the state before `second`.
    b.ws.rollback(sid, second)
    assert b.files(sid) == {"v.txt": b"one"}
    # A's cache is stale now (it holds "three"): its next use syncs it to the rollback.
    a.ws.recover(sid)
    assert a.files(sid) == {"v.txt": b"one"}
    # The next step after the rollback starts from there, on either worker.
    a.run_tool(sid, {"w.txt": b"after rollback"})
    b.ws.recover(sid)
    assert b.files(sid) == {"v.txt": b"one", "w.txt": b"after rollback"}
    assert [f.code for f in fsck.check(b.store).findings] == []


def test_unversioned_paths_stay_where_they_are_and_local_writes_are_not_thrown_away(
    two: tuple[Worker, Worker],
) -> None:
    a, _ = two
    sid = a.store.record.create_session().session_id
    a.run_tool(sid, {"x.txt": b"x", "cache/big.bin": b"c" * 100})
    # The worker that last synced the directory keeps it as it is (its own writes count).
    (a.ws.path(sid) / "local.txt").write_bytes(b"not uploaded yet")
    a.ws.recover(sid)
    assert (a.ws.path(sid) / "local.txt").exists()
    assert (a.ws.path(sid) / "cache" / "big.bin").exists()


def test_a_fresh_worker_replaces_a_stale_directory_but_keeps_ignored_paths(
    two: tuple[Worker, Worker],
) -> None:
    a, b = two
    sid = a.store.record.create_session().session_id
    a.run_tool(sid, {"x.txt": b"new"})
    stale = b.ws.path(sid)
    (stale / "cache").mkdir(parents=True)
    (stale / "x.txt").write_bytes(b"old")
    (stale / "gone.txt").write_bytes(b"from long ago")
    (stale / "cache" / "keep.bin").write_bytes(b"k")
    started = time.perf_counter()
    b.ws.recover(sid)
    assert time.perf_counter() - started < 10
    assert b.files(sid) == {"x.txt": b"new"}
    assert (stale / "cache" / "keep.bin").read_bytes() == b"k"


def test_a_worker_coming_back_fetches_only_what_changed(
    two: tuple[Worker, Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    sid = a.store.record.create_session().session_id
    a.run_tool(sid, {f"f{i}.txt": f"file {i}".encode() * 100 for i in range(20)})
    b.ws.recover(sid)  # B serves it once: its cache holds every file
    a.run_tool(sid, {"f3.txt": b"changed on a", "new.txt": b"new on a"})
    asked: list[str] = []
    real = b.store.snapshots.get_blobs

    def spy(hashes: Any) -> dict[str, bytes]:
        asked.extend(hashes)
        return real(hashes)

    monkeypatch.setattr(b.store.snapshots, "get_blobs", spy)
    b.ws.recover(sid)  # B's cache is stale: rebuilt, from its own files where they are right
    assert sorted(asked) == sorted(
        hashlib.sha256(x).hexdigest() for x in (b"changed on a", b"new on a")
    )
    expected = {f"f{i}.txt": f"file {i}".encode() * 100 for i in range(20)}
    expected.update({"f3.txt": b"changed on a", "new.txt": b"new on a"})
    assert b.files(sid) == expected
