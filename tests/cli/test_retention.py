"""`xclaw export --all`, `xclaw import` (SQLite <-> PostgreSQL, ids kept or remapped) and
`xclaw gc`, through real `xclaw` processes and the real PostgreSQL."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.store.conftest import PostgresBackend
from tests.writes import finish
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, Status, StepType
from xclaw.store.steps.writes import AddStep, BeginStep

STEP_COLUMNS = (
    "step_id, seq, parent_step_id, step_type, name, status, agent, call_id, input_data, "
    "output_data, error_message, start_time, end_time, token_usage_prompt, token_usage_completion"
)


def xclaw(
    *args: str, env: dict[str, str], cwd: Path, ok: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, "-m", "xclaw", *map(str, args)],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    if ok:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A real session: `xclaw run` with a scripted model, two tool calls, and a fork."""
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "writing",
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}}
                        ],
                    },
                    {
                        "text": "",
                        "tool_calls": [{"name": "shell", "input": {"command": "cat a.txt"}}],
                    },
                    {"text": "done: one"},
                ]
            }
        )
    )
    db = tmp_path / "src.db"
    env = {
        **os.environ,
        "XCLAW_HOME": str(tmp_path),
        "XCLAW_MODEL": f"script:{script}",
        "XCLAW_DB": str(db),
    }
    xclaw("run", "--approval", "yolo", "write a file", env=env, cwd=tmp_path)
    conn = sqlite3.connect(db)
    sid = conn.execute("SELECT session_id FROM sessions").fetchone()[0]
    # An llm_call whose server reported no usage: its token columns are NULL (unknown), which
    # every copy must keep as NULL, not turn into a 0.
    with conn:
        conn.execute(
            "UPDATE traces SET token_usage_prompt = NULL, token_usage_completion = NULL "
            "WHERE session_id = ? AND seq = 2",
            (sid,),
        )
    conn.close()
    xclaw("fork", sid, "s0003", "--title", "the fork", env=env, cwd=tmp_path)
    return db, env, sid


def sqlite_rows(db: Path, sid: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            f"SELECT {STEP_COLUMNS} FROM traces WHERE session_id=? ORDER BY seq", (sid,)
        ).fetchall()
    finally:
        conn.close()
    return decoded(rows)


def decoded(rows: list[Any]) -> list[tuple[Any, ...]]:
    """JSON columns compared as values (PostgreSQL's jsonb text differs in spacing)."""
    return [
        (*r[:8], *(json.loads(x) if isinstance(x, str) else x for x in r[8:10]), *r[10:])
        for r in rows
    ]


def test_export_all_and_import_keep_ids_then_remap_on_conflict(recorded, tmp_path: Path) -> None:
    db, env, sid = recorded
    dump = xclaw("export", "--all", env=env, cwd=tmp_path).stdout
    sessions = [json.loads(x) for x in dump.splitlines() if json.loads(x)["kind"] == "session"]
    assert len(sessions) == 2
    target = tmp_path / "target.db"
    (tmp_path / "all.jsonl").write_text(dump)
    first = json.loads(
        xclaw("import", "all.jsonl", "--json", "--db", target, env=env, cwd=tmp_path).stdout
    )
    assert [d["remapped"] for d in first] == [False, False]
    assert sqlite_rows(target, sid) == sqlite_rows(db, sid)  # every column, ids included
    assert sqlite_rows(target, sid)[1][-2:] == (None, None)  # unknown tokens stay unknown
    # Again into the same database: the ids are taken, so both get new ones, and the fork
    # points at the new copy of its parent.
    second = json.loads(
        xclaw("import", "all.jsonl", "--json", "--db", target, env=env, cwd=tmp_path).stdout
    )
    assert all(d["remapped"] for d in second)
    new_parent = next(d["sessionId"] for d in second if d["from"] == sid)
    new_fork = next(d["sessionId"] for d in second if d["from"] != sid)
    with SQLiteStore(target) as store:
        assert store.record.get_session(new_fork).parent_session_id == new_parent
        steps = store.record.steps(new_parent)
        assert all(s.step_id.startswith(new_parent + ":") for s in steps)
        assert all(
            p is None or p.startswith(new_parent + ":") for p in (s.parent_step_id for s in steps)
        )
    assert sqlite3.connect(target).execute("PRAGMA foreign_key_check").fetchall() == []
    # The remapped copy carries on: its history (call ids kept) is rebuilt and it answers.
    env2 = {**env, "XCLAW_DB": str(target)}
    (tmp_path / "script.json").write_text(
        json.dumps({"turns": [{"text": "x"}] * 3 + [{"text": "continued fine"}]})
    )
    out = xclaw(
        "run", "--approval", "yolo", "--session", new_parent, "and now?", env=env2, cwd=tmp_path
    ).stdout
    assert "continued fine" in out


def test_a_session_moves_sqlite_to_postgres_and_back(recorded, tmp_path: Path) -> None:
    base = os.environ.get("XCLAW_TEST_PG_URL")
    if not base:
        pytest.skip("XCLAW_TEST_PG_URL is not set: no PostgreSQL to move the session to")
    db, env, sid = recorded
    pg = PostgresBackend(base)
    pg.query("SELECT 1")  # creates the schema (or skips when the server is unreachable)
    try:
        (tmp_path / "one.jsonl").write_text(xclaw("export", sid, env=env, cwd=tmp_path).stdout)
        xclaw("import", "one.jsonl", "--db", pg.url, env=env, cwd=tmp_path)
        pg_rows = pg.query(
            f"SELECT {STEP_COLUMNS} FROM traces WHERE session_id=? ORDER BY seq", (sid,)
        )
        assert decoded(pg_rows) == sqlite_rows(db, sid)
        back = xclaw("export", sid, "--db", pg.url, env=env, cwd=tmp_path).stdout
        (tmp_path / "back.jsonl").write_text(back)
        home = tmp_path / "other-machine.db"
        xclaw("import", "back.jsonl", "--db", home, env=env, cwd=tmp_path)
        assert sqlite_rows(home, sid) == sqlite_rows(db, sid)
        src = (
            sqlite3.connect(db)
            .execute(
                "SELECT title, current_status, created_at, updated_at, next_seq FROM sessions WHERE session_id=?",
                (sid,),
            )
            .fetchone()
        )
        assert (
            sqlite3.connect(home)
            .execute(
                "SELECT title, current_status, created_at, updated_at, next_seq FROM sessions WHERE session_id=?",
                (sid,),
            )
            .fetchone()
            == src
        )
    finally:
        pg.drop()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "holds no session"),
        ('{"kind": "step", "seq": 1}\n', "line 1: a step line before any session line"),
        ('{"kind": "session", "sessionId": "a:b"}\n', "line 1: invalid session id"),
        ("not json\n", "line 1:"),
        ('{"kind": "session"}\n', "line 1: missing field 'sessionId'"),
        (
            (
                '{"kind": "session", "sessionId": "ok", "status": "Running", "createdAt": 1, "updatedAt": 1}\n'
                '{"kind": "step", "seq": 1, "type": "tool_call", "name": "x", "status": "weird", "startTime": 1}\n'
            ),
            "line 2: status 'weird' is not one of 'running', 'completed', 'failed'",
        ),
    ],
)
def test_a_bad_import_file_is_named_and_writes_nothing(tmp_path: Path, text: str, why: str) -> None:
    env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
    (tmp_path / "bad.jsonl").write_text(text)
    p = xclaw("import", "bad.jsonl", "--db", tmp_path / "t.db", env=env, cwd=tmp_path, ok=False)
    assert p.returncode == 2
    assert why in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "t.db").exists()  # checked before any database is opened


def test_images_a_tool_returned_move_with_the_session(tmp_path: Path) -> None:
    """A step names its images by hash in the blob store: export carries the contents."""
    from xclaw.store.snapshots.model import content_hash

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    h = content_hash(png)
    src = tmp_path / "src.db"
    with SQLiteStore(src) as store:
        store.record.create_session(session_id="pics")
        u = store.record.write(
            AddStep(session_id="pics", step=NewStep(StepType.USER_INPUT, "user", "look"))
        )
        llm = store.record.write(
            BeginStep(session_id="pics", step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        )
        call = {"id": "c1", "name": "view_file", "input": {"path": "a.png"}}
        store.record.write(finish("pics", llm.seq, output_data={"text": "", "tool_calls": [call]}))
        step = store.record.write(
            BeginStep(
                session_id="pics",
                step=NewStep(
                    StepType.TOOL_CALL, "view_file", {"path": "a.png"}, llm.step_id, call_id="c1"
                ),
            )
        )
        store.snapshots.put_blobs({h: png})
        store.record.write(
            finish(
                "pics",
                step.seq,
                output_data={
                    "content": "an image",
                    "images": [{"hash": h, "media_type": "image/png", "size": len(png)}],
                },
            )
        )
    env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
    dump = xclaw("export", "pics", "--db", src, env=env, cwd=tmp_path).stdout
    assert any(json.loads(x)["kind"] == "blob" for x in dump.splitlines())
    xclaw("import", "-", "--db", tmp_path / "dst.db", env=env, cwd=tmp_path, stdin=dump)
    with SQLiteStore(tmp_path / "dst.db") as store:
        assert store.snapshots.get_blobs([h]) == {h: png}
        assert store.record.get_step("pics", 3).call_id == "c1"
    fsck = xclaw("fsck", "--db", tmp_path / "dst.db", env=env, cwd=tmp_path, ok=False)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    tampered = dump.replace('"base64": "', '"base64": "AAAA')
    p = xclaw(
        "import", "-", "--db", tmp_path / "dst2.db", env=env, cwd=tmp_path, stdin=tampered, ok=False
    )
    assert p.returncode == 2 and "does not match its hash" in p.stderr


def test_export_wants_a_session_or_all(tmp_path: Path) -> None:
    env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
    p = xclaw("export", "--db", tmp_path / "t.db", env=env, cwd=tmp_path, ok=False)
    assert p.returncode == 2 and "give either a SESSION or --all" in p.stderr


DAY_MS = 86_400_000


def test_gc_deletes_old_sessions_with_their_snapshots_blobs_and_files(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    ws = tmp_path / "workspaces"
    now = [0]
    with SQLiteStore(db, clock=lambda: now[0]) as store:
        import time

        real = int(time.time() * 1000)
        for sid, age_days, content in (
            ("old", 40, b"old only"),
            ("new", 1, b"new only"),
            ("busy", 50, b"busy"),
        ):
            now[0] = real - age_days * DAY_MS
            store.record.create_session(session_id=sid)
            step = store.record.write(
                BeginStep(
                    session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "x"})
                )
            )
            from xclaw.store.snapshots.model import content_hash

            h = content_hash(content)
            store.snapshots.put_blobs({h: content})
            store.snapshots.put_blobs({content_hash(b"shared"): b"shared"})
            store.snapshots.save_snapshot(
                sid,
                step.seq,
                {
                    "f.txt": {"hash": h, "size": len(content), "mode": 0o644},
                    "s.txt": {"hash": content_hash(b"shared"), "size": 6, "mode": 0o644},
                },
            )
            store.record.write(
                finish(sid, step.seq, output_data="ok", session_status=Status.SUCCESS)
            )
            (ws / sid).mkdir(parents=True)
            (ws / sid / "f.txt").write_bytes(content)
        now[0] = real
        assert (
            store.leases.acquire_lease("busy", "someone-else", 600) is not None
        )  # driven right now
    env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
    dry = json.loads(
        xclaw(
            "gc", "--dry-run", "--json", "--db", db, "--workspace", ws, env=env, cwd=tmp_path
        ).stdout
    )
    assert (
        sorted(dry["sessions"]) == ["busy", "old"] and dry["snapshots"] == 2 and dry["blobs"] == 2
    )
    assert (ws / "old").exists()
    with SQLiteStore(db) as store:
        assert len(store.record.list_sessions()) == 3  # a dry run deletes nothing
    out = xclaw(
        "gc", "--older-than", "30d", "--yes", "--db", db, "--workspace", ws, env=env, cwd=tmp_path
    ).stdout
    assert (
        "deleted 1 session(s)" in out
        and "1 snapshot(s)" in out
        and "1 stored file content(s)" in out
    )
    assert "kept busy: another process is driving it right now" in out
    with SQLiteStore(db) as store:
        assert sorted(s.session_id for s in store.record.list_sessions()) == ["busy", "new"]
        assert (
            store.snapshots.get_snapshot("new", 1) is not None
        )  # the kept session's rollback still works
        assert store.snapshots.get_blobs([content_hash(b"new only"), content_hash(b"shared")])
    assert not (ws / "old").exists() and (ws / "new" / "f.txt").exists()
    p = xclaw("gc", "--older-than", "soon", "--db", db, env=env, cwd=tmp_path, ok=False)
    assert p.returncode == 2 and "is not an age like 30d" in p.stderr


def test_gc_on_postgres(tmp_path: Path) -> None:
    """The same retention on PostgreSQL: what would go is counted, then it goes."""
    base = os.environ.get("XCLAW_TEST_PG_URL")
    if not base:
        pytest.skip("XCLAW_TEST_PG_URL is not set: no PostgreSQL to collect")
    from xclaw.store import open_store
    from xclaw.store.snapshots.model import content_hash

    pg = PostgresBackend(base)
    pg.query("SELECT 1")
    try:
        store = open_store(pg.url)
        try:
            for sid, content in (("gone", b"only here"), ("kept", b"kept here")):
                store.record.create_session(session_id=sid)
                step = store.record.write(
                    BeginStep(
                        session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "x"})
                    )
                )
                h = content_hash(content)
                store.snapshots.put_blobs({h: content})
                store.snapshots.save_snapshot(
                    sid, step.seq, {"f.txt": {"hash": h, "size": len(content), "mode": 0o644}}
                )
            assert store.record.retention_preview(["gone"]) == (1, 1, len(b"only here"))
            assert store.record.retention_preview([]) == (0, 0, 0)
        finally:
            store.close()
        env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
        pg.query("UPDATE sessions SET updated_at = 0 WHERE session_id = 'gone'")
        out = json.loads(
            xclaw(
                "gc",
                "--json",
                "--yes",
                "--db",
                pg.url,
                "--workspace",
                tmp_path / "ws",
                env=env,
                cwd=tmp_path,
            ).stdout
        )
        assert out["sessions"] == ["gone"] and out["snapshots"] == 1 and out["blobs"] == 1
        assert [r[0] for r in pg.query("SELECT session_id FROM sessions")] == ["kept"]
        assert len(pg.query("SELECT hash FROM blobs")) == 1
    finally:
        pg.drop()


def _old_sessions(db: Path, ws: Path, *ids_and_days: tuple[str, int]) -> None:
    import time

    now = [0]
    real = int(time.time() * 1000)
    with SQLiteStore(db, clock=lambda: now[0]) as store:
        for sid, days in ids_and_days:
            now[0] = real - days * DAY_MS
            store.record.create_session(session_id=sid, title=f"title of {sid}")
            store.record.write(
                AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "x"))
            )
            (ws / sid).mkdir(parents=True)


def _ids(db: Path) -> list[str]:
    with SQLiteStore(db) as store:
        return sorted(s.session_id for s in store.record.list_sessions())


def test_gc_without_a_terminal_and_without_yes_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    db, ws = tmp_path / "x.db", tmp_path / "ws"
    _old_sessions(db, ws, ("old-a", 40), ("old-b", 90), ("fresh", 1))
    env = {**os.environ, "XCLAW_HOME": str(tmp_path)}
    for extra in ([], ["--json"]):
        p = subprocess.run(
            [sys.executable, "-m", "xclaw", "gc", "--db", str(db), "--workspace", str(ws), *extra],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert p.returncode == 2, p.stdout + p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith("error: gc would delete 2 session(s) not updated for 30d")
        assert "oldest updated" in line and "old-b" in line and "newest" in line
        assert "pass --yes" in line and p.stdout == ""
    assert _ids(db) == ["fresh", "old-a", "old-b"] and (ws / "old-a").exists()
    # Nothing to delete: nothing to ask, at any terminal or none.
    p = xclaw("gc", "--older-than", "200d", "--db", db, env=env, cwd=tmp_path)
    assert "deleted 0 session(s)" in p.stdout
    # A dry run asks nothing either.
    p = xclaw("gc", "--dry-run", "--db", db, "--workspace", ws, env=env, cwd=tmp_path)
    assert "would delete 2 session(s)" in p.stdout and _ids(db) == ["fresh", "old-a", "old-b"]


def test_gc_on_a_terminal_shows_what_goes_and_asks(tmp_path: Path) -> None:
    import pexpect

    db, ws = tmp_path / "x.db", tmp_path / "ws"
    _old_sessions(db, ws, ("old-a", 40), ("old-b", 90), ("fresh", 1))
    env = {**os.environ, "XCLAW_HOME": str(tmp_path), "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "xclaw", "gc", "--db", str(db), "--workspace", str(ws)]

    def ask(answer: str) -> str:
        child = pexpect.spawn(cmd[0], cmd[1:], env=env, cwd=str(tmp_path), encoding="utf-8")
        try:
            child.expect(r"Delete them\? \[y/N\]", timeout=60)
            shown = child.before
            child.sendline(answer)
            child.expect(pexpect.EOF, timeout=60)
        finally:
            child.close()
        assert child.exitstatus == (0 if answer == "y" else 1)
        return str(shown)

    shown = ask("n")
    assert "about to delete 2 session(s) not updated for 30d" in shown
    assert "old-b" in shown and "title of old-a" in shown and "fresh" not in shown
    assert _ids(db) == ["fresh", "old-a", "old-b"]  # declined: nothing deleted
    ask("y")
    assert _ids(db) == ["fresh"] and not (ws / "old-a").exists() and (ws / "fresh").exists()
