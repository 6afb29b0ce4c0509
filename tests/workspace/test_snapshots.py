"""Capturing workspaces: real files, real SQLite. What is captured, what is skipped and why,
and that unchanged files are recognised without being read."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.store.builders import tool
from xclaw.config.settings import load_settings
from xclaw.errors import ConfigError
from xclaw.store.snapshots.model import content_hash
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace import snapshots as snapmod
from xclaw.workspace.snapshots import MB, SnapshotConfig, Snapshotter
from xclaw.workspace.walk import IgnoreRules


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "x.db")
    yield s
    s.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


def old(path: Path) -> None:
    """Stamp a file well before now (as files normally are)."""
    t = time.time() - 10
    os.utime(path, (t, t), follow_symlinks=False)


def settle() -> None:
    """Let the racy window pass: utime itself sets the ctime to now."""
    time.sleep(snapmod._RACY_NS / 1e9 + 0.01)


def snap(s: Snapshotter, store: SQLiteStore, sid: str, ws: Path):
    seq = store.record.write(BeginStep(session_id=sid, step=tool())).seq
    info = s.snapshot(store.snapshots, sid, seq, ws)
    return info, store.snapshots.get_snapshot(sid, seq)


def test_files_dirs_links_and_modes_are_captured(store, ws: Path) -> None:
    sid = store.record.create_session().session_id
    (ws / "src").mkdir(mode=0o750)
    (ws / "src" / "main.py").write_text("print('hi')\n")
    (ws / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(ws / "run.sh", 0o755)
    os.chmod(ws / "src", 0o750)
    (ws / "empty").mkdir()
    os.symlink("src/main.py", ws / "link")
    os.symlink("/etc/passwd", ws / "outside")  # recorded as a link, never followed
    info, manifest = snap(Snapshotter(), store, sid, ws)
    h = content_hash(b"print('hi')\n")
    assert manifest == {
        "empty": {"dir": True, "mode": 0o755 & ~_umask()},
        "link": {"link": "src/main.py"},
        "outside": {"link": "/etc/passwd"},
        "run.sh": {"hash": content_hash(b"#!/bin/sh\n"), "size": 10, "mode": 0o755},
        "src": {"dir": True, "mode": 0o750},
        "src/main.py": {"hash": h, "size": 12, "mode": 0o644 & ~_umask()},
    }
    assert (info.files, info.bytes, info.skipped) == (4, 22, 0)
    assert store.snapshots.get_blobs([h]) == {h: b"print('hi')\n"}
    # nothing outside was read: /etc/passwd's content is not in the store
    assert store.snapshots.missing_blobs([content_hash(Path("/etc/passwd").read_bytes())])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_ignore_patterns(store, ws: Path) -> None:
    sid = store.record.create_session().session_id
    for rel in (
        ".git/HEAD",
        "node_modules/x/index.js",
        "app/node_modules/y.js",
        "a.pyc",
        "build/out/bin",
        "keep/build/out/bin",
        "build.txt",
        "main.py",
    ):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(rel)
    cfg = SnapshotConfig(ignore=(".git/", "node_modules/", "*.pyc", "/build/out"))
    _, manifest = snap(Snapshotter(cfg), store, sid, ws)
    files = sorted(p for p, e in manifest.items() if "hash" in e)
    assert files == ["build.txt", "keep/build/out/bin", "main.py"]
    assert ".git" not in manifest and "app" in manifest and "build" in manifest


def test_ignore_rules_match_like_gitignore() -> None:
    rules = IgnoreRules(["node_modules/", "*.log", "/dist/", "docs/*.tmp"])
    assert rules.ignored("a/node_modules", "node_modules", is_dir=True)
    assert not rules.ignored("node_modules", "node_modules", is_dir=False)  # a file
    assert rules.ignored("x/y.log", "y.log", is_dir=False)
    assert rules.ignored("dist", "dist", is_dir=True)
    assert not rules.ignored("a/dist", "dist", is_dir=True)  # anchored at the root
    assert rules.ignored("docs/a.tmp", "a.tmp", is_dir=False)
    assert not rules.ignored("a.tmp", "a.tmp", is_dir=False)
    assert rules.ignored("bad\udcff", "bad\udcff", is_dir=False)  # not UTF-8: not versioned


def test_limits_skip_files_with_a_reason_and_never_fail(store, ws: Path) -> None:
    sid = store.record.create_session().session_id
    (ws / "big.bin").write_bytes(b"x" * (2 * MB))
    for i in range(5):
        (ws / f"f{i}.txt").write_bytes(bytes([65 + i]) * 300_000)
    os.mkfifo(ws / "pipe")
    cfg = SnapshotConfig(max_file_bytes=1 * MB, max_total_bytes=1 * MB)
    info, manifest = snap(Snapshotter(cfg), store, sid, ws)
    assert manifest["big.bin"] == {
        "skipped": "larger than the 1 MB per-file limit (sandbox.max_file_mb)",
        "size": 2 * MB,
    }
    captured = [p for p in sorted(manifest) if "hash" in manifest[p]]
    assert captured == ["f0.txt", "f1.txt", "f2.txt"]  # 900 KB of 1 MB
    assert manifest["f3.txt"]["skipped"] == (
        "the snapshot reached its 1 MB total limit (sandbox.max_snapshot_mb)"
    )
    assert manifest["pipe"]["skipped"].startswith("not a regular file")
    assert info.skipped == 4 and info.bytes == 900_000


def test_unchanged_files_are_not_read_again(store, ws: Path) -> None:
    sid = store.record.create_session().session_id
    for i in range(50):
        (ws / f"f{i:02d}.txt").write_text(f"content {i}\n" * 100)
        old(ws / f"f{i:02d}.txt")
    settle()
    s = Snapshotter()
    snap(s, store, sid, ws)
    assert (s.last.files_read, s.last.files) == (50, 50)
    snap(s, store, sid, ws)
    assert s.last.files_read == 0 and s.last.new_bytes == 0
    (ws / "f07.txt").write_text("changed\n")
    old(ws / "f07.txt")
    settle()
    info, manifest = snap(s, store, sid, ws)
    assert s.last.files_read == 1 and s.last.bytes_read == 8
    assert manifest["f07.txt"]["hash"] == content_hash(b"changed\n")
    assert info.full is False and info.new_bytes == 8


def test_a_rewrite_keeping_size_and_mtime_is_still_seen(store, ws: Path) -> None:
    """The ctime is in the key: restoring the mtime (touch -r, rsync -t) does not hide it."""
    sid = store.record.create_session().session_id
    f = ws / "f.txt"
    f.write_text("aaaa")
    old(f)
    settle()
    s = Snapshotter()
    snap(s, store, sid, ws)
    snap(s, store, sid, ws)
    assert s.last.files_read == 0  # cached
    st = f.stat()
    f.write_text("bbbb")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert f.stat().st_ino == st.st_ino
    _, manifest = snap(s, store, sid, ws)
    assert s.last.files_read == 1
    assert manifest["f.txt"]["hash"] == content_hash(b"bbbb")


def test_files_written_just_now_are_read_again_next_time(store, ws: Path, monkeypatch) -> None:
    """Racy files: written within the clock granularity of the walk, they are not cached.
    The window is widened while the file is fresh and narrowed once it is not, so a loaded
    machine's delays cannot move the file out of (or into) it."""
    sid = store.record.create_session().session_id
    (ws / "fresh.txt").write_text("x")
    s = Snapshotter()
    monkeypatch.setattr(snapmod, "_RACY_NS", 60_000_000_000)
    snap(s, store, sid, ws)
    snap(s, store, sid, ws)
    assert s.last.files_read == 1
    monkeypatch.setattr(snapmod, "_RACY_NS", 0)
    time.sleep(0.001)
    snap(s, store, sid, ws)
    snap(s, store, sid, ws)
    assert s.last.files_read == 0


def test_contents_are_deduplicated_across_steps_and_sessions(store, ws: Path) -> None:
    a, b = store.record.create_session().session_id, store.record.create_session().session_id
    (ws / "same.txt").write_bytes(os.urandom(100_000))
    (ws / "copy.txt").write_bytes((ws / "same.txt").read_bytes())
    info, _ = snap(Snapshotter(), store, a, ws)
    assert 100_000 <= info.new_bytes < 101_000  # two files, one blob
    info, _ = snap(Snapshotter(), store, b, ws)  # a fresh cache reads, but stores nothing
    assert info.new_bytes == 0


def test_a_blob_swept_meanwhile_is_stored_again(store, ws: Path, monkeypatch) -> None:
    """A sweep between storing contents and saving the snapshot (MissingBlobs) is retried."""
    sid = store.record.create_session().session_id
    (ws / "a.txt").write_text("A")
    s = Snapshotter()
    real_save = store.snapshots.save_snapshot
    calls = []

    def save_after_a_sweep(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            assert store.snapshots.gc_blobs() == 1  # the content just stored is not referenced yet
        return real_save(*args, **kwargs)

    monkeypatch.setattr(store.snapshots, "save_snapshot", save_after_a_sweep)
    _, manifest = snap(s, store, sid, ws)
    assert len(calls) == 2
    h = manifest["a.txt"]["hash"]
    assert store.snapshots.get_blobs([h]) == {h: b"A"}


def test_the_walk_does_not_follow_a_directory_swapped_for_a_symlink(store, ws, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "d").mkdir()
    (ws / "d" / "x.txt").write_text("x")
    from xclaw.workspace import walk as walkmod

    real_list = walkmod._list
    swapped = []

    def list_then_swap(fd, prefix, rules):
        out = real_list(fd, prefix, rules)
        if not swapped and any(name == "d" for name, _, _ in out):
            swapped.append(1)  # between listing the root and descending into d
            os.rename(ws / "d", tmp_path / "d.moved")
            os.symlink(outside, ws / "d")
        return out

    walkmod._list = list_then_swap
    try:
        found = [f.rel for f in walkmod.walk(ws, IgnoreRules(()))]
    finally:
        walkmod._list = real_list
    assert found == ["d"]  # listed, but not descended into: it is not the directory listed


def test_settings_configure_snapshots(tmp_path: Path) -> None:
    def settings(sandbox: str) -> SnapshotConfig:
        (tmp_path / "xclaw.yaml").write_text(f"sandbox: {sandbox}\n")
        return SnapshotConfig.from_settings(load_settings(cwd=tmp_path).sandbox)

    cfg = settings("{ignore: [dist/], max_file_mb: 2, max_snapshot_mb: 0.5, snapshots: false}")
    assert cfg == SnapshotConfig(False, ("dist/",), 2 * MB, MB // 2)
    assert settings("{}") == SnapshotConfig()
    # Bad values are refused when xclaw.yaml is read, naming the key and the value.
    with pytest.raises(
        ConfigError, match=r"sandbox\.ignore must be a list of strings, got '\.git/'"
    ):
        settings("{ignore: .git/}")
    with pytest.raises(ConfigError, match=r"sandbox\.max_file_mb must be a number > 0, got 0"):
        settings("{max_file_mb: 0}")


def test_capture_cost_is_small_when_nothing_changed(store, ws: Path) -> None:
    sid = store.record.create_session().session_id
    for i in range(300):
        (ws / f"d{i % 10}").mkdir(exist_ok=True)
        (ws / f"d{i % 10}" / f"f{i}.txt").write_bytes(os.urandom(2000))
    settle()
    s = Snapshotter()
    snap(s, store, sid, ws)
    snap(s, store, sid, ws)
    assert s.last.files_read == 0
    assert s.last.seconds < 3  # generous: the benchmark measures the real figure
    assert snapmod._RACY_NS > 0
