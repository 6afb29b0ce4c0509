"""`xclaw snapshots`, `xclaw diff`, and `xclaw rollback` / `xclaw fork` moving the files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.workspace.helpers import Driver, remove, settle, tree, write
from tests.writes import finish
from xclaw.cli import commands_store, commands_workspace
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.writes import AddStep, BeginStep
from xclaw.workspace.timetravel import Workspaces


@pytest.fixture
def cli() -> click.Group:
    group = click.Group("xclaw")
    commands_store.register(group)
    commands_workspace.register(group)
    return group


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, str]:
    """Session 'w': s1 writes notes.txt, s2 thinks, s3 writes data.bin, s4 edits notes.txt,
    s5 removes data.bin and adds a link."""
    db, root = tmp_path / "x.db", tmp_path / "ws"
    with SQLiteStore(db) as store:
        store.record.create_session(session_id="w", title="files")
        d = Driver(store, Workspaces(store, root), "w")
        d.step(write("notes.txt", "one\ntwo\nthree\n"))
        d.think()
        d.step(lambda ws: (ws / "data.bin").write_bytes(b"\0\1\2" * 1000))
        d.step(write("notes.txt", "one\n2\nthree\nfour\n"))
        d.step(remove("data.bin"))
        os.symlink("notes.txt", root / "w" / "link")
        settle()
    return db, root, "w"


def run(cli: click.Group, *args: object, input: str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def test_snapshots_table_and_json(cli, world) -> None:
    db, _, sid = world
    r = run(cli, "snapshots", sid, "--db", db)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["BEFORE", "FILES", "BYTES", "NEW", "SKIPPED", "STORED"]
    assert [line.split()[0] for line in lines[1:5]] == ["s0001", "s0003", "s0004", "s0005"]
    assert lines[2].split()[:2] == ["s0003", "1"] and lines[1].split()[-1] == "whole"
    assert lines[-1] == "diff two of them: xclaw diff w s0001 now"
    data = json.loads(run(cli, "snapshots", sid, "--db", db, "--json").output)
    assert [(s["step"], s["files"], s["bytes"]) for s in data] == [
        ("s0001", 0, 0),
        ("s0003", 1, 14),
        ("s0004", 2, 3014),
        ("s0005", 2, 3017),
    ]
    assert data[2]["newBytes"] > 0 and data[0]["whole"] is True


def test_diff_between_two_steps_with_a_text_diff(cli, world) -> None:
    db, root, sid = world
    r = run(cli, "diff", sid, "s0003", "s0005", "--db", db, "--workspace", root)
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[:3] == [
        "workspace of w: before s0003 -> before s0005, 2 change(s)",
        "A  data.bin  (3000 B, mode 644)",
        "M  notes.txt  (17 B, mode 644)",
    ]
    assert (
        "\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n"
        in r.output
    )
    # s0002 changed no files: the state before it is the state before s0003
    same = run(cli, "diff", sid, "s0002", "s0003", "--db", db)
    assert (
        same.output.strip() == "no changes in the workspace between before s0002 and before s0003"
    )


def test_diff_against_now_and_json(cli, world) -> None:
    db, root, sid = world
    r = run(cli, "diff", sid, "s0004", "now", "--db", db, "--workspace", root, "--json")
    assert r.exit_code == 0, r.output
    changes = {c["path"]: c for c in json.loads(r.output)}
    assert set(changes) == {"data.bin", "link", "notes.txt"}
    assert changes["data.bin"]["change"] == "removed" and changes["data.bin"]["diff"] is None
    assert changes["link"]["new"] == {"link": "notes.txt"}
    assert "+four" in changes["notes.txt"]["diff"]
    r = run(cli, "diff", sid, "s0001", "now", "--db", db, "--workspace", root, "--stat")
    assert "A  link  (symlink -> notes.txt)" in r.output and "---" not in r.output


def test_diff_errors_are_words(cli, world, tmp_path: Path) -> None:
    db, _root, sid = world
    r = run(cli, "diff", sid, "s0099", "s0001", "--db", db)
    assert r.exit_code == 2 and "step 's0099' is not a step of this session" in r.output
    r = run(cli, "diff", "ghost", "1", "2", "--db", db)
    assert r.exit_code == 2 and "no session with id 'ghost'" in r.output
    r = run(cli, "diff", sid, "s0001", "now", "--db", db, "--workspace", tmp_path / "none")
    assert r.exit_code == 1 and "has no workspace at" in r.output
    r = run(cli, "snapshots", "ghost", "--db", db)
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_cli_rollback_and_fork_move_the_files(cli, world) -> None:
    db, root, sid = world
    r = run(cli, "fork", sid, "s0003", "--db", db, "--workspace", root)
    assert r.exit_code == 0, r.output
    fork_id = r.output.splitlines()[0].rsplit(" ", 1)[1]
    assert tree(root / fork_id) == {"notes.txt": "one\ntwo\nthree\n", "data.bin": "\0\1\2" * 1000}
    r = run(cli, "rollback", sid, "s0004", "--db", db, "--workspace", root, "--yes")
    assert r.exit_code == 0, r.output
    assert (
        r.output.splitlines()[-1]
        == "[rollback] workspace restored to its state before s0004 (2 file(s))"
    )
    assert tree(root / sid) == {"notes.txt": "one\ntwo\nthree\n", "data.bin": "\0\1\2" * 1000}
    with SQLiteStore(db) as store:
        assert [s.seq for s in store.record.steps(sid)] == [1, 2, 3]
        assert store.snapshots.pending_restores() == []


def test_diff_of_two_sessions_aligns_steps_by_content(tmp_path: Path) -> None:
    """`xclaw diff A B` compares two branches: steps after the fork aligned by
    content (same / changed / only on one side), the final answers, then the workspaces."""
    from click.testing import CliRunner

    from xclaw.cli import commands_store, commands_workspace
    from xclaw.store.sqlite.store import SQLiteStore
    from xclaw.store.steps.model import NewStep, Status, StepType

    db = tmp_path / "x.db"
    with SQLiteStore(db) as store:
        store.record.create_session(session_id="left")
        u = store.record.write(
            AddStep(session_id="left", step=NewStep(StepType.USER_INPUT, "user", "base"))
        )
        done = store.record.write(
            BeginStep(session_id="left", step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        )
        store.record.write(
            finish("left", done.seq, output_data={"text": "ok"}, session_status=Status.SUCCESS)
        )
        store.record.fork("left", 2, title="right")
        right = next(s.session_id for s in store.record.list_sessions() if s.session_id != "left")

        def turn(sid: str, text: str, commands: list[str], answer: str) -> None:
            u = store.record.write(
                AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", text))
            )
            for c in commands:
                lm = store.record.write(
                    BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
                )
                store.record.write(
                    finish(
                        sid,
                        lm.seq,
                        output_data={
                            "text": "",
                            "tool_calls": [{"name": "shell", "input": {"command": c}}],
                        },
                    )
                )
                t = store.record.write(
                    BeginStep(
                        session_id=sid,
                        step=NewStep(StepType.TOOL_CALL, "shell", {"command": c}, lm.step_id),
                    )
                )
                store.record.write(finish(sid, t.seq, output_data="x"))
            lm = store.record.write(
                BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
            )
            store.record.write(
                finish(sid, lm.seq, output_data={"text": answer}, session_status=Status.SUCCESS)
            )

        turn("left", "go a", ["echo shared"], "Result\nA")
        turn(right, "go b", ["echo extra", "echo shared"], "Result\nB")
    group = click.Group("xclaw")
    commands_store.register(group)
    commands_workspace.register(group)
    ws = tmp_path / "ws"
    (ws / "left").mkdir(parents=True)
    (ws / right).mkdir(parents=True)
    (ws / "left" / "f.txt").write_text("one\n")
    (ws / right / "f.txt").write_text("two\n")
    r = CliRunner().invoke(
        group, ["diff", "left", right[:5], "--db", str(db), "--workspace", str(ws)]
    )
    assert r.exit_code == 0, r.output
    assert "≠ s0003 user: go a" in r.output  # a different instruction at the same place
    shared = [ln for ln in r.output.splitlines() if "echo shared" in ln]
    assert shared and shared[-1].lstrip().startswith("=")  # the shared command lines up
    assert any(ln.lstrip().startswith("▶") and "echo extra" in ln for ln in r.output.splitlines())
    assert "-A" in r.output and "+B" in r.output  # the final answers' diff
    assert "-one" in r.output and "+two" in r.output  # the workspaces' diff


def test_diff_says_why_an_llm_call_failed() -> None:
    """A cancelled (or failed) LLM call is a row that says so, not an empty "llm:"."""
    from xclaw.store.steps.model import Step, StepStatus, StepType
    from xclaw.views.branch_diff import describe

    step = Step(
        step_id="s:s0004",
        session_id="s",
        seq=4,
        parent_step_id=None,
        step_type=StepType.LLM_CALL,
        name="m",
        status=StepStatus.FAILED,
        input_data={},
        error_message="cancelled by the user",
    )
    assert describe(step) == "s0004 llm: [failed: cancelled by the user]"


def test_diff_now_leaves_a_restore_cut_short_alone(cli, world) -> None:
    """Completing a journaled restore would write (the files and the record); diff only
    reads, so it says the workspace is not what the record says yet."""
    import sqlite3

    db, root, sid = world
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO workspace_restores (session_id, restore_id, kind, ignore, created_at) "
            "VALUES (?, 'r1', 'rollback', '[]', 1)",
            (sid,),
        )
    conn.close()
    files = sorted(p.name for p in (root / sid).iterdir())
    r = run(cli, "diff", sid, "s0001", "now", "--db", db, "--workspace", root)
    assert r.exit_code == 1 and "is being restored" in r.output and "Traceback" not in r.output
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM workspace_restores").fetchone() == (1,)
    conn.close()
    assert sorted(p.name for p in (root / sid).iterdir()) == files
    r = run(cli, "diff", sid, "s0001", "s0003", "--db", db, "--workspace", root)
    assert r.exit_code == 0, r.output  # steps against steps: the record alone


def test_diff_shows_workspace_secrets_redacted_and_rollback_keeps_them(
    cli, tmp_path: Path, monkeypatch
) -> None:
    """Snapshots keep a file a tool wrote as it was, its name and its contents, even when
    they hold a credential: a rollback gives the user's file back exactly. What `xclaw diff`
    shows of it is redacted — the name, the text, and a key spanning lines (a private key),
    masked whole before the diff cuts the file into lines."""
    pem = "-----BEGIN KEY-----\nAAAAsecretline1\nBBBBsecretline2\n-----END KEY-----"
    name = "name-secret-4242"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_PRIVATE_KEY", pem)
    monkeypatch.setenv("FILES_API_KEY", name)
    content = f"token={name}\n{pem}\nend\n"
    db, root = tmp_path / "x.db", tmp_path / "ws"
    with SQLiteStore(db) as store:
        store.record.create_session(session_id="k", title="keys")
        d = Driver(store, Workspaces(store, root), "k")
        d.step(write(f"{name}.txt", content))
        d.step(remove(f"{name}.txt"))
        settle()
        before_rm = store.snapshots.get_snapshot("k", 2)
        assert before_rm is not None and f"{name}.txt" in before_rm  # kept verbatim
    for args in (("s0001", "s0002"), ("s0001", "s0002", "--json"), ("s0002", "now")):
        r = run(cli, "diff", "k", *args, "--db", db, "--workspace", root)
        assert r.exit_code == 0, r.output
        assert "[REDACTED]" in r.output
        for piece in (name, "AAAAsecretline1", "BBBBsecretline2"):
            assert piece not in r.output, (args, r.output)
    text = run(cli, "diff", "k", "s0001", "s0002", "--db", db, "--workspace", root).output
    assert "A  [REDACTED].txt" in text and "+token=[REDACTED]\n+[REDACTED]\n+end\n" in text
    r = run(cli, "rollback", "k", "s0002", "--db", db, "--workspace", root, "--yes")
    assert r.exit_code == 0, r.output
    assert tree(root / "k") == {f"{name}.txt": content}  # the user's file, exactly
