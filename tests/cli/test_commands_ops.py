"""`xclaw fsck` as an operator runs it: real `xclaw run` processes write the record, a real
`xclaw fsck` process checks it (SQLite file, and PostgreSQL through --db)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = [
    {
        "text": "",
        "tool_calls": [
            {"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}},
            {"name": "shell", "input": {"command": "echo two >> a.txt"}},
        ],
    },
    {"text": "done"},
]


def xclaw(tmp: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "XCLAW_MODEL"}
    env.update(
        {"XCLAW_HOME": str(tmp), "NO_COLOR": "1", "XCLAW_MODEL": f"script:{tmp / 'script.json'}"}
    )
    if db:
        env["XCLAW_DB"] = db
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        check=False,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _recorded_session(tmp: Path, db: str | None = None) -> None:
    (tmp / "script.json").write_text(json.dumps({"turns": SCRIPT}))
    r = xclaw(tmp, "run", "--approval", "yolo", "make a file", db=db)
    assert r.returncode == 0, r.stderr


def test_fsck_passes_a_healthy_database_and_fails_a_missing_tool_step(tmp_path: Path) -> None:
    _recorded_session(tmp_path)
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")

    conn = sqlite3.connect(tmp_path / "xclaw.db")
    with conn:
        conn.execute("DELETE FROM traces WHERE step_type='tool_call' AND name='shell'")
    conn.close()
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 1
    assert "tool_step_missing" in r.stdout and "shell" in r.stdout
    r = xclaw(tmp_path, "fsck", "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 1 and report["ok"] is False
    assert [f["code"] for f in report["findings"]] == ["tool_step_missing"]
    # Not safely repairable: --repair leaves it (and says so by failing still), no backup made.
    r = xclaw(tmp_path, "fsck", "--repair", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["backup"] is None


def test_fsck_repair_marks_a_dangling_step_after_a_backup(tmp_path: Path) -> None:
    _recorded_session(tmp_path)
    conn = sqlite3.connect(tmp_path / "xclaw.db")
    with conn:
        conn.execute("UPDATE traces SET status='running', end_time=NULL WHERE name='shell'")
    conn.close()
    r = xclaw(tmp_path, "fsck")
    assert r.returncode == 1 and "running_step_in_finished_session" in r.stdout
    assert "[--repair fixes this]" in r.stdout
    r = xclaw(tmp_path, "fsck", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backup: " in r.stdout and "repaired  running_step_in_finished_session" in r.stdout
    [backup] = tmp_path.glob("xclaw.db.fsck-*.bak")
    # The copy holds the whole record (conversations, tool output): no more readable than it.
    assert (
        (backup.stat().st_mode & 0o777) == ((tmp_path / "xclaw.db").stat().st_mode & 0o777) == 0o600
    )
    assert xclaw(tmp_path, "fsck").returncode == 0


@pytest.mark.postgres
def test_fsck_on_postgresql_through_db(tmp_path: Path) -> None:
    from tests.store.conftest import PostgresBackend, postgres_url

    backend = PostgresBackend(postgres_url())
    try:
        _recorded_session(tmp_path, db=backend.url)
        r = xclaw(tmp_path, "fsck", "--db", backend.url)
        assert r.returncode == 0, r.stdout + r.stderr
        backend.query("DELETE FROM traces WHERE step_type='tool_call' AND name='shell'")
        r = xclaw(tmp_path, "fsck", "--db", backend.url, "--json")
        assert r.returncode == 1
        assert [f["code"] for f in json.loads(r.stdout)["findings"]] == ["tool_step_missing"]
    finally:
        backend.drop()


# --- xclaw replay ---------------------------------------------------------------------------


def _no_model_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "XCLAW_MODEL"}
    env.update({"XCLAW_HOME": str(tmp), "NO_COLOR": "1"})
    return env


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _only_session(tmp: Path) -> str:
    r = xclaw(tmp, "sessions", "--json")
    (s,) = json.loads(r.stdout)
    return str(s["sessionId"])


def test_replay_without_a_model_reproduces_the_workspace(tmp_path: Path) -> None:
    script = [
        {
            "text": "",
            "tool_calls": [
                {"name": "write_file", "input": {"path": "src/a.txt", "content": "one\n"}},
                {"name": "shell", "input": {"command": "echo two >> src/a.txt && pwd > where.txt"}},
            ],
        },
        {"text": "", "tool_calls": [{"name": "read_file", "input": {"path": "src/a.txt"}}]},
        {"text": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    sid = _only_session(tmp_path)
    (tmp_path / "script.json").unlink()  # no model anywhere now
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "replay", sid, "--json"],
        check=False,
        cwd=tmp_path,
        env=_no_model_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["reproduced"] is True and out["divergences"] == []
    assert out["modelCallsFromRecord"] == 3 and out["modelCallsLive"] == 0
    new = out["sessionId"]
    assert new != sid
    ws = tmp_path / "workspaces"
    assert _files(ws / new).keys() == _files(ws / sid).keys() == {"src/a.txt", "where.txt"}
    assert (
        (ws / new / "src/a.txt").read_text() == "one\ntwo\n" == (ws / sid / "src/a.txt").read_text()
    )
    # The new session is a session like any other: its record passes fsck.
    assert xclaw(tmp_path, "fsck").returncode == 0
    steps = json.loads(xclaw(tmp_path, "steps", new, "-n", "50", "--json").stdout)
    assert [s["type"] for s in steps].count("tool_call") == 3


def test_replay_reports_the_first_tool_result_that_differs(tmp_path: Path) -> None:
    script = [
        {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo stable"}}]},
        {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "date +%s%N"}}]},
        {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "date +%s%N"}}]},
        {"text": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    sid = _only_session(tmp_path)
    r = xclaw(tmp_path, "replay", sid, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    kinds = [(d["kind"], d["tool"], d["step"]) for d in out["divergences"]]
    assert kinds == [("tool_result", "shell", "s0005"), ("tool_result", "shell", "s0007")]
    assert out["firstDivergence"]["recorded"] != out["firstDivergence"]["replayed"]
    r = xclaw(tmp_path, "replay", sid)
    assert r.returncode == 1
    assert "first divergence at s0005 (tool_result, shell)" in r.stdout


def test_replay_answers_approvals_as_the_record_did(tmp_path: Path) -> None:
    script = [
        {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo x > f"}}]},
        {"text": "could not"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    r = xclaw(tmp_path, "run", "make it")  # ask mode, no terminal: denied
    assert "denied" in r.stdout
    sid = _only_session(tmp_path)
    r = xclaw(tmp_path, "replay", sid, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["reproduced"], r.stdout + r.stderr
    assert not (tmp_path / "workspaces" / out["sessionId"] / "f").exists()


def test_replay_with_a_live_model_from_a_step(tmp_path: Path) -> None:
    script = [
        {
            "text": "",
            "tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "A"}}],
        },
        {
            "text": "",
            "tool_calls": [{"name": "write_file", "input": {"path": "b.txt", "content": "B"}}],
        },
        {"text": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    sid = _only_session(tmp_path)
    other = [
        {
            "text": "",
            "tool_calls": [{"name": "write_file", "input": {"path": "x.txt", "content": "X"}}],
        },
        {
            "text": "",
            "tool_calls": [{"name": "write_file", "input": {"path": "c.txt", "content": "C"}}],
        },
        {"text": "other end"},
    ]
    (tmp_path / "other.json").write_text(json.dumps({"turns": other}))
    # s0004 is the second model call: the session up to it is forked (a.txt with it), the
    # live model answers from there.
    r = xclaw(
        tmp_path,
        "replay",
        sid,
        "--from",
        "s0004",
        "--model",
        f"script:{tmp_path / 'other.json'}",
        "--json",
    )
    out = json.loads(r.stdout)
    assert r.returncode == 1, r.stdout + r.stderr
    assert out["modelCallsFromRecord"] == 0 and out["modelCallsLive"] == 2
    assert out["from"] == "s0004" and out["liveModel"].startswith("script:")
    assert out["firstDivergence"]["kind"] == "model_output"
    assert out["firstDivergence"]["step"] == "s0004"
    ws = tmp_path / "workspaces" / out["sessionId"]
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "c.txt"]
    steps = json.loads(xclaw(tmp_path, "steps", out["sessionId"], "-n", "50", "--json").stdout)
    assert [s["id"] for s in steps][:3] == ["s0001", "s0002", "s0003"]  # forked, not re-run


def test_replay_from_a_step_re_runs_only_the_rest(tmp_path: Path) -> None:
    script = [
        {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo one > a.txt"}}]},
        {
            "text": "",
            "tool_calls": [{"name": "shell", "input": {"command": "cat a.txt; echo two >> a.txt"}}],
        },
        {"text": "done"},
        {"text": "", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]},
        {"text": "read it"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    assert xclaw(tmp_path, "run", "--continue", "--approval", "yolo", "read").returncode == 0
    sid = _only_session(tmp_path)
    (tmp_path / "script.json").unlink()
    for start, calls in (("s0005", 3), ("s0007", 2)):  # mid-turn (the second shell), a turn
        r = subprocess.run(
            [sys.executable, "-m", "xclaw", "replay", sid, "--from", start, "--json"],
            check=False,
            cwd=tmp_path,
            env=_no_model_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        out = json.loads(r.stdout)
        assert r.returncode == 0 and out["reproduced"], r.stdout + r.stderr
        assert out["from"] == start and out["modelCallsFromRecord"] == calls
        ws = tmp_path / "workspaces" / out["sessionId"]
        assert (ws / "a.txt").read_text() == "one\ntwo\n"
    r = xclaw(tmp_path, "replay", sid, "--from", "s0099")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_replay_of_an_unknown_session_is_a_plain_error(tmp_path: Path) -> None:
    r = xclaw(tmp_path, "replay", "nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_replay_reproduces_a_session_with_a_sub_agent(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "A"}},
                            {"name": "spawn_agent", "input": {"task": "list the files"}},
                        ],
                    },
                    {"text": "all done"},
                ],
                "subagent": {
                    "turns": [
                        {
                            "text": "",
                            "tool_calls": [
                                {"name": "write_file", "input": {"path": "b.txt", "content": "B"}}
                            ],
                        },
                        {"text": "wrote b"},
                    ]
                },
            }
        )
    )
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    sid = _only_session(tmp_path)
    (tmp_path / "script.json").unlink()
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "replay", sid, "--json"],
        check=False,
        cwd=tmp_path,
        env=_no_model_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["reproduced"], r.stdout + r.stderr
    assert out["modelCallsFromRecord"] == 4
    ws = tmp_path / "workspaces" / out["sessionId"]
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "b.txt"]


def test_replay_of_a_session_killed_mid_turn_reproduces_up_to_the_end_of_its_record(
    tmp_path: Path,
) -> None:
    import signal
    import time

    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "A"}}
                        ],
                    },
                    {
                        "text": "",
                        "tool_calls": [{"name": "shell", "input": {"command": "sleep 6"}}],
                    },
                    {"text": "never"},
                ]
            }
        )
    )
    env = _no_model_env(tmp_path)
    env["XCLAW_MODEL"] = f"script:{tmp_path / 'script.json'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", "go"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            db = tmp_path / "xclaw.db"
            row = None
            if db.exists():
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    row = conn.execute(
                        "SELECT 1 FROM traces WHERE name='shell' AND status='running'"
                    ).fetchone()
                except sqlite3.OperationalError:
                    pass
                finally:
                    conn.close()
            if row:
                break
            assert time.monotonic() < deadline, "the shell step never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    sid = _only_session(tmp_path)
    # The shell call's result was never recorded: it runs again (the record says it started)
    # with nothing to compare it with; the record ends there, so the replay stops there too
    # and says so.
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "replay", sid, "--json"],
        check=False,
        cwd=tmp_path,
        env=_no_model_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["reproduced"] and out["recordEndsMidTurn"], r.stdout + r.stderr
    assert (tmp_path / "workspaces" / out["sessionId"] / "a.txt").read_text() == "A"


def test_fsck_of_a_database_that_does_not_exist_is_an_error_not_an_empty_ok(tmp_path: Path) -> None:
    """A mistyped --db must not create an empty database and report it healthy."""
    typo = tmp_path / "xclaw-typo.db"
    r = xclaw(tmp_path, "fsck", "--db", str(typo))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no database" in r.stderr and str(typo) in r.stderr
    assert not typo.exists()


def test_a_tool_that_fails_only_in_the_replay_says_why(tmp_path: Path) -> None:
    """Replayed where its Python tool is not configured, a call fails: the report gives the
    replayed error ("unknown tool ..."), not only `completed` vs `failed`."""
    (tmp_path / "echo_tools_q.py").write_text("def echo(text: str) -> str:\n    return text\n")
    (tmp_path / "xclaw.yaml").write_text("tools: ['echo_tools_q:echo']\n")
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "", "tool_calls": [{"name": "echo", "input": {"text": "hi"}}]},
                    {"text": "done"},
                ]
            }
        )
    )
    assert xclaw(tmp_path, "run", "--approval", "yolo", "go").returncode == 0
    sid = _only_session(tmp_path)
    (tmp_path / "xclaw.yaml").unlink()
    r = xclaw(tmp_path, "replay", sid, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    first = json.loads(r.stdout)["firstDivergence"]
    assert (first["kind"], first["recorded"], first["replayed"]) == (
        "tool_status",
        "completed",
        "failed",
    )
    assert first["recordedOutput"] == "hi" and "unknown tool 'echo'" in first["replayedOutput"]
    r = xclaw(tmp_path, "replay", sid)
    assert "replayed: failed: Not run: unknown tool 'echo'" in r.stdout, r.stdout


def test_replay_runs_the_declared_agent_the_session_ran(tmp_path: Path) -> None:
    (tmp_path / "replay_tools.py").write_text(
        "import xclaw\n\n\n@xclaw.tool(read_only=True)\n"
        "def lookup(order_id: str) -> str:\n"
        '    """An order\'s status."""\n'
        '    return f"{order_id} shipped"\n'
    )
    (tmp_path / "xclaw.yaml").write_text(
        "agents:\n  support:\n    builtin_tools: []\n"
        '    tools: ["replay_tools:lookup"]\n    instructions: Answer about orders.\n'
    )
    script = [
        {"text": "", "tool_calls": [{"name": "lookup", "input": {"order_id": "A-1"}}]},
        {"text": "A-1 shipped."},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"turns": script}))
    ran = xclaw(tmp_path, "run", "--agent", "support", "where is A-1?")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    sid = _only_session(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "replay", sid, "--json"],
        check=False,
        cwd=tmp_path,
        env=_no_model_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["reproduced"] is True and out["divergences"] == [], out
    replayed = json.loads(xclaw(tmp_path, "steps", out["sessionId"], "--json").stdout)
    (tool,) = [s for s in replayed if s["type"] == "tool_call"]
    assert tool["name"] == "lookup" and tool["output"] == "A-1 shipped"
    assert xclaw(tmp_path, "fsck").returncode == 0
