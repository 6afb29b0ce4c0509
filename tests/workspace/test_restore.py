"""Rollback and fork rewind the files with the record (files follow memory), through the one shared
place (Workspaces), on real files and a real SQLite database."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.store.builders import llm
from tests.workspace.helpers import Driver, remove, settle, tree, write
from xclaw.errors import WorkspaceError
from xclaw.store.snapshots.model import WorkspaceRestore, content_hash
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace.restore import materialise
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "x.db")
    yield s
    s.close()


@pytest.fixture
def workspaces(store, tmp_path: Path) -> Workspaces:
    return Workspaces(store, tmp_path / "workspaces")


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith((".restore", ".old")))


def test_rollback_restores_the_files_before_the_target_step(store, workspaces) -> None:
    d = Driver(store, workspaces)
    d.step(write("a.txt", "A"))
    d.think()
    s_b = d.step(write("sub/b.txt", "B", 0o600))
    d.step(lambda ws: (ws / "empty").mkdir())
    d.step(lambda ws: os.symlink("a.txt", ws / "link"))
    d.step(write("a.txt", "A2"))
    d.step(remove("sub/b.txt"))
    before_b = {"a.txt": "A"}
    assert tree(d.ws) == {"a.txt": "A2", "sub": "dir", "empty": "dir", "link": "-> a.txt"}

    result = workspaces.rollback(d.sid, s_b + 2)  # before the symlink
    assert result.restore is not None and result.deleted == 3
    assert tree(d.ws) == {"a.txt": "A", "sub": "dir", "sub/b.txt": ("B", "0o600"), "empty": "dir"}
    assert oct(os.stat(d.ws).st_mode & 0o777) == "0o700"
    assert store.snapshots.pending_restores() == [] and leftovers(workspaces.root) == []

    workspaces.rollback(d.sid, s_b)  # before b
    assert tree(d.ws) == before_b


def test_rollback_after_the_last_side_effect_leaves_the_files(store, workspaces) -> None:
    d = Driver(store, workspaces)
    d.step(write("a.txt", "A"))
    late = d.think()
    (d.ws / "untracked.txt").write_text("made by hand")
    result = workspaces.rollback(d.sid, late)
    assert result.restore is None
    assert tree(d.ws) == {"a.txt": "A", "untracked.txt": "made by hand"}


def test_fork_gets_the_files_just_after_the_fork_point(store, workspaces) -> None:
    d = Driver(store, workspaces)
    s_a = d.step(write("a.txt", "A"))
    d.think()
    d.step(write("b.txt", "B"))
    d.think()
    fork = workspaces.fork(d.sid, s_a, "branch")
    assert tree(workspaces.path(fork.session_id)) == {"a.txt": "A"}
    assert tree(d.ws) == {"a.txt": "A", "b.txt": "B"}  # the original keeps both
    # after the last side effect: a copy of the source's files as they are
    last = workspaces.fork(d.sid, d.think())
    assert tree(workspaces.path(last.session_id)) == {"a.txt": "A", "b.txt": "B"}
    # the fork's own history continues with the copied snapshots
    f = Driver(store, workspaces, fork.session_id)
    s_c = f.step(write("c.txt", "C"))
    assert s_c == s_a + 1  # the fork's steps continue after the fork point
    assert [s.seq for s in store.snapshots.list_snapshots(fork.session_id)] == [s_a, s_c]
    assert tree(f.ws) == {"a.txt": "A", "c.txt": "C"}
    workspaces.rollback(fork.session_id, s_c)
    assert tree(f.ws) == {"a.txt": "A"}


def test_a_fork_of_a_session_without_files_creates_nothing(store, workspaces) -> None:
    sid = store.record.create_session().session_id
    step = store.record.write(BeginStep(session_id=sid, step=llm()))
    fork = workspaces.fork(sid, step.seq)
    assert not workspaces.root.exists() or not workspaces.path(fork.session_id).exists()
    assert store.snapshots.pending_restores() == []


def test_unversioned_paths_stay_on_rollback_and_are_copied_on_fork(store, tmp_path) -> None:
    cfg = SnapshotConfig(ignore=(".git/", "node_modules/"), max_file_bytes=1000)
    workspaces = Workspaces(store, tmp_path / "workspaces", cfg)
    d = Driver(store, workspaces)
    s1 = d.step(write(".git/HEAD", "ref: main"))
    d.step(write("big.bin", "x" * 2000))  # over the per-file limit: skipped, not versioned
    d.step(write("app/node_modules/lib.js", "v1"))
    d.step(write("app/main.js", "main"))
    d.step(write(".git/HEAD", "ref: other"))
    d.step(write("big.bin", "y" * 2000))
    settle()
    workspaces.rollback(d.sid, s1 + 1)  # before big.bin, app/ and the second HEAD
    assert tree(d.ws) == {
        ".git": "dir",
        ".git/HEAD": "ref: other",  # unversioned: as it was, not rewound
        "app": "dir",  # recreated to hold what is kept
        "app/node_modules": "dir",
        "app/node_modules/lib.js": "v1",
    }
    # big.bin did not exist before s1+1: the snapshot says so, so it is gone
    fork = workspaces.fork(d.sid, s1)
    assert tree(workspaces.path(fork.session_id)) == tree(d.ws)  # the same, copied
    assert tree(d.ws)[".git/HEAD"] == "ref: other"


def test_a_skipped_file_is_kept_as_it_is(store, tmp_path) -> None:
    workspaces = Workspaces(store, tmp_path / "w", SnapshotConfig(max_file_bytes=1000))
    d = Driver(store, workspaces)
    d.step(write("big.bin", "x" * 2000))
    s = d.step(write("small.txt", "s"))
    d.step(write("big.bin", "y" * 2000))
    d.step(write("small.txt", "t"))
    workspaces.rollback(d.sid, s + 1)
    assert tree(d.ws) == {"big.bin": "y" * 2000, "small.txt": "s"}


def test_read_only_directories_and_modes_are_restored(store, workspaces) -> None:
    d = Driver(store, workspaces)
    d.step(write("ro/inner.txt", "i"))
    d.step(lambda ws: os.chmod(ws / "ro", 0o555))
    target = d.step(write("x.sh", "#!", 0o700))
    d.step(lambda ws: os.chmod(ws / "ro", 0o755))
    d.step(remove("x.sh"))
    workspaces.rollback(d.sid, target + 1)
    assert oct(os.stat(d.ws / "ro").st_mode & 0o777) == "0o555"
    assert tree(d.ws)["x.sh"] == ("#!", "0o700")
    workspaces.rollback(d.sid, target - 1)  # the old workspace held a read-only dir: removed
    assert tree(d.ws) == {"ro": "dir", "ro/inner.txt": "i"} and leftovers(workspaces.root) == []


def test_a_pending_restore_is_completed_by_recover(store, workspaces) -> None:
    d = Driver(store, workspaces)
    s = d.step(write("a.txt", "A"))
    d.step(write("b.txt", "B"))
    store.record.rollback(d.sid, s + 1, workspace=WorkspaceRestore())  # journaled, files not yet
    assert tree(d.ws) == {"a.txt": "A", "b.txt": "B"}
    assert len(store.snapshots.pending_restores(d.sid)) == 1
    (report,) = workspaces.recover()
    assert report.files == 1 and tree(d.ws) == {"a.txt": "A"}
    assert workspaces.recover() == [] and store.snapshots.pending_restores() == []


def test_snapshots_off_means_memory_only_time_travel(store, tmp_path) -> None:
    workspaces = Workspaces(store, tmp_path / "w", SnapshotConfig(enabled=False))
    d = Driver(store, workspaces)
    s = d.step(write("a.txt", "A"))
    assert store.snapshots.list_snapshots(d.sid) == []
    assert workspaces.rollback(d.sid, s).restore is None
    assert tree(d.ws) == {"a.txt": "A"}


def test_restore_never_writes_through_a_symlink(store, tmp_path: Path) -> None:
    """A manifest naming a link and a file under it (no real walk yields that, but the
    journal is data): the file is created in a real directory or refused, never outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    h = content_hash(b"evil")
    store.snapshots.put_blobs({h: b"evil"})
    target = tmp_path / "target"
    target.mkdir()
    manifest = {"d": {"link": str(outside)}, "d/evil.txt": {"hash": h, "size": 4, "mode": 0o644}}
    with pytest.raises(FileExistsError):
        materialise(
            store.snapshots, target, manifest
        )  # the file went into a real d/; the link clashes
    assert list(outside.iterdir()) == []
    assert (target / "d").is_dir() and not (target / "d").is_symlink()
    # a link planted where a directory is expected is refused
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(outside, other / "d")
    with pytest.raises(WorkspaceError, match="never written through"):
        materialise(store.snapshots, other, {"d/evil.txt": manifest["d/evil.txt"]})
    assert list(outside.iterdir()) == []
    with pytest.raises(ValueError, match="bad path"):
        materialise(store.snapshots, other, {"../escape.txt": manifest["d/evil.txt"]})
    assert not (tmp_path / "escape.txt").exists()


def test_carry_over_never_moves_files_from_outside(store, tmp_path: Path) -> None:
    """A skipped path under a symlinked directory names a file outside the workspace: it is
    not moved in (the walk does not go through links)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_text("outside data")
    workspaces = Workspaces(store, tmp_path / "w", SnapshotConfig(max_file_bytes=5))
    d = Driver(store, workspaces)
    d.step(write("d/big.bin", "too big for the limit"))
    s = d.step(write("a.txt", "A"))
    d.step(lambda ws: (os.rename(ws / "d", ws / "d.real"), os.symlink(outside, ws / "d")))
    d.step(write("a.txt", "B"))
    workspaces.rollback(d.sid, s + 1)
    assert (outside / "big.bin").read_text() == "outside data"


def test_a_restore_that_cannot_complete_says_why_and_stays_journaled(store, workspaces) -> None:
    d = Driver(store, workspaces)
    s = d.step(write("a.txt", "A"))
    d.step(write("b.txt", "B"))
    store.record.rollback(d.sid, s + 1, workspace=WorkspaceRestore())
    damage = sqlite3.connect(store.path)  # another program deletes the stored contents
    with damage:
        damage.execute("DELETE FROM blobs")
    damage.close()
    with pytest.raises(WorkspaceError, match="lacks 1 file content") as e:
        workspaces.recover(d.sid)
    assert "retried before the session runs again" in e.value.message
    assert tree(d.ws) == {"a.txt": "A", "b.txt": "B"}  # untouched: the old state
    assert len(store.snapshots.pending_restores(d.sid)) == 1


def test_the_new_files_reach_the_disk_before_the_journal_row_goes(
    store, workspaces, monkeypatch
) -> None:
    """Power loss after a rollback must not leave a half-written workspace with no restore
    pending: the file system is flushed (syncfs) before finish_restore commits."""
    from xclaw.workspace import restore

    d = Driver(store, workspaces)
    s_a = d.step(write("a.txt", "A"))
    d.step(write("a.txt", "A2"))
    order: list[str] = []
    real_flush, real_finish = restore.flush_to_disk, store.snapshots.finish_restore

    def flush(path: Path) -> None:
        order.append(f"flush {Path(path).name}")
        real_flush(path)

    def finish(sid: str, rid: str) -> bool:
        order.append("finish_restore")
        return real_finish(sid, rid)

    monkeypatch.setattr(restore, "flush_to_disk", flush)
    monkeypatch.setattr(store.snapshots, "finish_restore", finish)
    workspaces.rollback(d.sid, s_a + 1)
    assert tree(d.ws) == {"a.txt": "A"}
    assert order == [f"flush {workspaces.root.name}", "finish_restore"]


def test_flush_to_disk_syncs_a_real_directory(tmp_path: Path) -> None:
    from xclaw.workspace.restore import flush_to_disk

    (tmp_path / "f").write_text("x")
    flush_to_disk(tmp_path)  # no error on a real file system
    with pytest.raises(NotADirectoryError):
        flush_to_disk(tmp_path / "f")
