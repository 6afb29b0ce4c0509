"""fsck never answers `ok` for what SQLite silently leaves out: a WAL file it cannot read (not
a WAL, another database's, damaged before later commits) or a page its integrity check
rejects. Real files as a crash leaves them: a database and its WAL copied while a writer
still had them open, then spoilt the way a disk or a stray copy would."""

from __future__ import annotations

import random
import shutil
import sqlite3
import struct
from pathlib import Path

import pytest

from tests.store.builders import user
from xclaw.errors import DatabaseRefused
from xclaw.ops import fsck
from xclaw.store import Access, open_store
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.sqlite.wal import FRAME_HEADER, HEADER
from xclaw.store.steps.writes import AddStep

INSERT = (
    "INSERT INTO sessions (session_id, title, current_status, created_at, updated_at) "
    "VALUES (?, 't', 'Init', 1, 1)"
)


def crashed_copy(tmp: Path, names: list[str], *, page_size: int | None = None) -> Path:
    """A database whose WAL holds one committed transaction per name (after session
    'base'), copied as a crash would leave it: database file and WAL, nothing checkpointed."""
    src = tmp / "live" / "x.db"
    src.parent.mkdir()
    with SQLiteStore(src) as store:
        store.record.create_session(session_id="base")
    conn = sqlite3.connect(src, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    for name in names:
        conn.execute("BEGIN")
        conn.execute(INSERT, (name,))
        conn.execute("COMMIT")
    dst = tmp / "crashed" / "x.db"
    dst.parent.mkdir()
    shutil.copy(src, dst)
    shutil.copy(f"{src}-wal", f"{dst}-wal")
    conn.close()
    return dst


def _frames(wal: bytes) -> tuple[int, list[tuple[int, int]]]:
    """(frame size, [(offset, commit field)]) of a WAL's frames."""
    page = struct.unpack(">I", wal[8:12])[0]
    size = FRAME_HEADER + page
    out = []
    for at in range(HEADER, len(wal) - size + 1, size):
        out.append((at, struct.unpack(">I", wal[at + 4 : at + 8])[0]))
    return size, out


def _codes(path: Path) -> list[str]:
    store = open_store(path, access=Access.READ)
    try:
        return [f.code for f in fsck.check(store).errors]
    finally:
        store.close()


def _sessions(path: Path) -> list[str]:
    store = open_store(path, access=Access.READ)
    try:
        return sorted(s.session_id for s in store.record.list_sessions())
    finally:
        store.close()


def test_a_wal_a_crash_left_whole_is_read_and_passes(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, ["one", "two"])
    assert _codes(db) == []
    assert _sessions(db) == ["base", "one", "two"]


def test_a_damaged_frame_before_later_commits_is_reported(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, ["one", "two", "three"])
    wal = bytearray(Path(f"{db}-wal").read_bytes())
    _size, frames = _frames(bytes(wal))
    commits = [i for i, (_, commit) in enumerate(frames) if commit]
    assert len(commits) == 3
    hit = frames[commits[0] + 1][0] + FRAME_HEADER + 200  # the page of the second transaction
    wal[hit] ^= 0xFF
    Path(f"{db}-wal").write_bytes(bytes(wal))
    assert _codes(db) == ["wal_torn"]
    # What the finding says is so: SQLite stopped at the damage, two commits are missing.
    assert _sessions(db) == ["base", "one"]
    store = open_store(db, access=Access.READ)
    try:
        (f,) = fsck.check(store).errors
        assert "2 committed transaction(s) follow it" in f.message and f.session_id is None
    finally:
        store.close()


def test_a_transaction_cut_short_at_the_end_is_not_damage(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, ["one", "two"])
    wal = Path(f"{db}-wal").read_bytes()
    Path(f"{db}-wal").write_bytes(wal[:-100])  # the last frame half written
    assert _codes(db) == []
    assert _sessions(db) == ["base", "one"]


# Random bytes drawn at collection would name the cases differently in every pytest-xdist
# worker (which refuses to run then): the same garbage everywhere, from a fixed seed.
_NOISE = random.Random(7)


@pytest.mark.parametrize(
    "garbage",
    [_NOISE.randbytes(5000), b"\x37\x7f", b"\x00" * 32 + _NOISE.randbytes(4096)],
    ids=["random-5000", "two-bytes", "zeros-then-random"],
)
def test_a_wal_sqlite_cannot_read_is_reported(tmp_path: Path, garbage: bytes) -> None:
    db = crashed_copy(tmp_path, ["one"])
    Path(f"{db}-wal").write_bytes(garbage)
    assert _codes(db) == ["wal_unreadable"]


def test_another_databases_wal_is_reported(tmp_path: Path) -> None:
    db = crashed_copy(tmp_path, ["one"])
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other, isolation_level=None)
    conn.execute("PRAGMA page_size=8192")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x)")
    shutil.copy(f"{other}-wal", f"{db}-wal")
    conn.close()
    # SQLite reads it as the database's own: what it shows is another program's tables.
    with pytest.raises(DatabaseRefused, match=r"holds tables \(t\).*x\.db-wal holds 8192-byte"):
        open_store(db, access=Access.READ)


def test_a_corrupt_index_page_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    with SQLiteStore(db) as store:
        for i in range(50):
            sid = store.record.create_session(session_id=f"s{i}").session_id
            store.record.write(AddStep(session_id=sid, step=user()))
    conn = sqlite3.connect(db)
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name='idx_traces_session_time'"
    ).fetchone()
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * page
    data[start + page - 40 : start + page - 8] = b"\x01" * 32  # cell contents of the index
    db.write_bytes(bytes(data))
    assert "sqlite_integrity" in _codes(db)
