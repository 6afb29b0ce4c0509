"""[store/sqlite] What `xclaw fsck` can tell of a SQLite database's WAL file (`FILE-wal`) that
SQLite itself keeps quiet about: SQLite reads a WAL up to its first frame that fails its checksum
and silently ignores a WAL whose header is not valid, so commits in such a file are missing from the
database without any error. Read from the file, never written.

The format (sqlite.org/fileformat2.html#walformat): a 32-byte header (magic, version, page
size, checkpoint sequence, two salts, a checksum of the first 24 bytes), then frames of a
24-byte header (page number, database size after a commit frame or 0, the two salts, a
checksum running over every frame since the header) and one page each.
"""

from __future__ import annotations

import struct
from pathlib import Path

HEADER = 32
FRAME_HEADER = 24
VERSION = 3007000
# The magic's last bit says in which byte order the checksums read the data.
MAGIC_BIG_ENDIAN = {0x377F0682: False, 0x377F0683: True}

Problem = tuple[str, str]  # (finding code, what it means)


def wal_problem(db_path: Path) -> Problem | None:
    """A WAL beside the database that SQLite cannot (wholly) read, or None. Read twice when
    something is found: a server writing meanwhile (a WAL restarted under the reader) must
    not look like damage, so only a problem seen both times is reported."""
    first = _problem(db_path)
    if first is None:
        return None
    return first if _problem(db_path) == first else None


def _problem(db_path: Path) -> Problem | None:
    wal = Path(f"{db_path}-wal")
    try:
        data = wal.read_bytes()
        with open(db_path, "rb") as f:
            db_header = f.read(100)
    except FileNotFoundError:
        return None
    if not data:
        return None
    name = wal.name
    if len(data) < HEADER:
        return _unreadable(name, f"it is {len(data)} bytes, shorter than a WAL header")
    magic, version, page_size, _ckpt, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:HEADER])
    if magic not in MAGIC_BIG_ENDIAN:
        return _unreadable(name, "it does not start as a SQLite WAL does")
    big = MAGIC_BIG_ENDIAN[magic]
    if version != VERSION or _checksum(data[:24], big) != (c1, c2):
        return _unreadable(name, "its header fails its own checksum")
    db_page = _db_page_size(db_header)
    if db_page is not None and page_size != db_page:
        return (
            "wal_foreign",
            f"{name} holds {page_size}-byte pages and the database {db_page}-byte ones: it "
            "is another database's WAL, which SQLite would read as this one's",
        )
    frame = FRAME_HEADER + page_size
    count = (len(data) - HEADER) // frame
    sums = (c1, c2)
    valid = 0
    for i in range(count):
        at = HEADER + i * frame
        head = data[at : at + FRAME_HEADER]
        _pgno, _commit, s1, s2, f1, f2 = struct.unpack(">6I", head)
        if (s1, s2) != (salt1, salt2):
            break
        sums = _checksum(head[:8] + data[at + FRAME_HEADER : at + frame], big, *sums)
        if sums != (f1, f2):
            break
        valid = i + 1
    # Frames of this WAL generation (its salts) after the first one SQLite cannot read, and
    # a commit among them: a transaction was committed there and is not in the database.
    # (Uncommitted frames after a damaged one are a transaction cut short: nothing lost.)
    lost = 0
    for i in range(valid + 1, count):
        at = HEADER + i * frame
        _pgno, commit, s1, s2, _f1, _f2 = struct.unpack(">6I", data[at : at + FRAME_HEADER])
        if (s1, s2) == (salt1, salt2) and commit:
            lost += 1
    if lost:
        return (
            "wal_torn",
            f"frame {valid + 1} of {name} is damaged and {lost} committed transaction(s) "
            "follow it: SQLite reads the WAL only up to the damage, so they are not in the "
            "database",
        )
    return None


def _unreadable(name: str, why: str) -> Problem:
    return (
        "wal_unreadable",
        f"{name} is not a WAL SQLite can read ({why}): SQLite ignores it, so any commit in "
        "it is not in the database",
    )


def _db_page_size(header: bytes) -> int | None:
    if len(header) < 18 or not header.startswith(b"SQLite format 3\x00"):
        return None
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def _checksum(data: bytes, big: bool, s0: int = 0, s1: int = 0) -> tuple[int, int]:
    """SQLite's WAL checksum: 32-bit words in pairs, each sum feeding the other."""
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1
