"""The offline store commands, run through click (and once through a real `xclaw` process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.writes import finish
from xclaw.cli import commands_store
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, Status, StepType
from xclaw.store.steps.writes import AddStep, BeginStep


@pytest.fixture
def cli() -> click.Group:
    group = click.Group("xclaw")
    commands_store.register(group)
    return group


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database with one session 'cli': user, llm, tool (child of llm), llm, user."""
    path = tmp_path / "x.db"
    with SQLiteStore(path) as store:
        store.record.create_session(session_id="cli", title="log analysis", metadata={"t": 1})
        u = store.record.write(
            AddStep(session_id="cli", step=NewStep(StepType.USER_INPUT, "user", "帮我分析日志"))
        )
        lm = store.record.write(
            BeginStep(session_id="cli", step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        )
        store.record.write(
            finish(
                "cli",
                lm.seq,
                output_data={"text": ""},
                token_usage_prompt=10,
                token_usage_completion=3,
            )
        )
        t = store.record.write(
            BeginStep(
                session_id="cli",
                step=NewStep(StepType.TOOL_CALL, "shell", {"command": "cat app.log"}, lm.step_id),
            )
        )
        store.record.write(finish("cli", t.seq, output_data="ERROR x"))
        l2 = store.record.write(
            BeginStep(session_id="cli", step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        )
        store.record.write(
            finish("cli", l2.seq, output_data={"text": "done"}, session_status=Status.SUCCESS)
        )
        store.record.write(
            AddStep(session_id="cli", step=NewStep(StepType.USER_INPUT, "user", "统计 ERROR 行数"))
        )
    return path


def run(cli: click.Group, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def test_sessions_table_and_json(cli, db: Path) -> None:
    r = run(cli, "sessions", "--db", db)
    assert r.exit_code == 0, r.output
    # STATE says what the session does, in words; TOKENS and COST sum its LLM calls (model "m"
    # has no price: tokens only).
    header = ["SESSION", "STATE", "UPDATED", "TOKENS", "COST", "TITLE"]
    assert r.output.splitlines()[0].split() == header
    assert "cli" in r.output and "log analysis" in r.output and " 10/3 " in r.output
    assert "just now" in r.output
    assert "Interrupted · resumes when opened" in r.output  # Running, but no run anywhere
    r = run(cli, "sessions", "--db", db, "--json")
    (s,) = json.loads(r.output)
    assert s["sessionId"] == "cli" and s["status"] == "Running" and s["metadata"] == {"t": 1}
    assert s["usage"]["input"] == 10 and s["usage"]["output"] == 3 and s["cost"] is None
    assert s["unpricedCalls"] == 1
    assert s["state"] == "interrupted" and s["busy"] is False


def test_sessions_filtered_by_state_and_a_search_word(cli, db: Path) -> None:
    with SQLiteStore(db) as store:
        store.record.create_session(session_id="alpha", title="Refactor the Parser")
        done = store.record.create_session(session_id="beta", title="write docs")
        store.record.write(
            AddStep(session_id=done.session_id, step=NewStep(StepType.USER_INPUT, "user", "x"))
        )
        store.record.transition("beta", Status.SUCCESS)

    def ids(r):
        return [row["sessionId"] for row in json.loads(r.output)]

    assert ids(run(cli, "sessions", "--db", db, "--json", "--status", "success")) == ["beta"]
    assert ids(run(cli, "sessions", "--db", db, "--json", "--status", "new")) == ["alpha"]
    assert ids(run(cli, "sessions", "--db", db, "--json", "parser")) == ["alpha"]
    assert ids(run(cli, "sessions", "--db", db, "--json", "parser", "--status", "failed")) == []
    r = run(cli, "sessions", "--db", db, "nothing-like-it")
    assert r.exit_code == 0 and r.output.strip() == "No session matches."
    r = run(cli, "sessions", "--db", db, "--status", "bogus")
    assert r.exit_code == 2 and "bogus" in r.output


def _priced_db(path: Path) -> None:
    with SQLiteStore(path) as store:
        store.record.create_session(session_id="p", title="priced")
        u = store.record.write(
            AddStep(session_id="p", step=NewStep(StepType.USER_INPUT, "user", "go"))
        )
        for model in ("anthropic:claude-sonnet-4-5-20250929", "openai:my-local-model"):
            lm = store.record.write(
                BeginStep(session_id="p", step=NewStep(StepType.LLM_CALL, model, {}, u.step_id))
            )
            usage = {"input": 100_000, "output": 1_000, "cache_read": 90_000, "cache_write": 5_000}
            store.record.write(
                finish(
                    "p",
                    lm.seq,
                    output_data={"text": "", "model": model, "usage": usage},
                    token_usage_prompt=100_000,
                    token_usage_completion=1_000,
                )
            )


def test_tokens_and_cost_per_step_and_per_session(cli, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "p.db"
    _priced_db(path)
    monkeypatch.setenv("XCLAW_CONFIG", str(tmp_path / "none.yaml"))
    # Sonnet 4.5: 5k plain x $3 + 90k read x $0.30 + 5k written x $3.75 + 1k out x $15 (per M)
    expected = (5_000 * 3 + 90_000 * 0.3 + 5_000 * 3.75 + 1_000 * 15) / 1e6
    steps = run(cli, "steps", "p", "--db", path).output
    assert "100k in (90k cached, 5.0k written) → 1.0k out · $" + f"{expected:.4f}" in steps
    unpriced = next(ln for ln in steps.splitlines() if "s0003" in ln)
    assert "100k in (90k cached, 5.0k written) → 1.0k out" in unpriced and "$" not in unpriced
    (s,) = json.loads(run(cli, "sessions", "--db", path, "--json").output)
    assert s["cost"] == round(expected, 6) and s["usage"]["cache_read"] == 180_000
    table = run(cli, "sessions", "--db", path).output
    assert f"${expected:.4f}" in table and "200k/2.0k (90% cached)" in table
    lines = run(cli, "export", "p", "--db", path).output.splitlines()
    assert json.loads(lines[0])["cost"] == round(expected, 6)
    step = json.loads(lines[2])
    assert step["usage"]["cache_write"] == 5_000 and step["cost"] == round(expected, 6)
    assert json.loads(lines[3])["cost"] is None  # unknown model: tokens only

    # xclaw.yaml's prices extend and override the table.
    conf = tmp_path / "xclaw.yaml"
    conf.write_text("prices:\n  my-local-model: {input: 1.0, output: 2.0}\n")
    monkeypatch.setenv("XCLAW_CONFIG", str(conf))
    (s,) = json.loads(run(cli, "sessions", "--db", path, "--json").output)
    assert s["cost"] == round(expected + (100_000 * 1.0 + 1_000 * 2.0) / 1e6, 6)
    conf.write_text("prices:\n  my-local-model: {input: cheap}\n")
    r = run(cli, "sessions", "--db", path)
    assert r.exit_code != 0 and "prices.my-local-model.input must be a number" in r.output


def test_sessions_limit(cli, db: Path) -> None:
    with SQLiteStore(db) as store:
        for _ in range(3):
            store.record.create_session()
    assert len(json.loads(run(cli, "sessions", "--db", db, "--json").output)) == 4
    assert len(json.loads(run(cli, "sessions", "--db", db, "--json", "-n", "2").output)) == 2


def test_sessions_on_a_missing_database_creates_nothing(cli, tmp_path: Path) -> None:
    """A mistyped --db is an error, not an empty database created (with its directories)
    and reported as "No sessions yet."."""
    target = tmp_path / "deep" / "er" / "new.db"
    r = run(cli, "sessions", "--db", target)
    assert r.exit_code == 2, r.output
    assert r.output.strip().startswith(f"error: no database at {target}")
    assert not (tmp_path / "deep").exists()


def test_db_defaults_to_xclaw_home(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XCLAW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XCLAW_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    r = run(cli, "sessions")
    assert r.exit_code == 2 and f"no database at {tmp_path / 'home' / 'xclaw.db'}" in r.output
    assert not (tmp_path / "home").exists()
    for path, title in ((tmp_path / "home" / "xclaw.db", "at home"), (tmp_path / "env.db", "env")):
        with SQLiteStore(path) as store:
            store.record.create_session(title=title)
    assert "at home" in run(cli, "sessions").output
    monkeypatch.setenv("XCLAW_DB", str(tmp_path / "env.db"))
    r = run(cli, "sessions")
    assert r.exit_code == 0 and "env" in r.output and "at home" not in r.output


def test_steps(cli, db: Path) -> None:
    r = run(cli, "steps", "cli", "--db", db)
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0] == "Steps (session: cli):"
    assert lines[1] == '  s0001  user_input    user        "帮我分析日志"'
    assert lines[3] == '  s0003  tool_call     shell       {"command":"cat app.log"}'
    # offline, the hint names the offline commands, not the slash commands
    assert "  xclaw rollback cli s0005   go back to just before this step" in lines
    assert "  xclaw fork cli s0005       branch a new session from this step" in lines
    r = run(cli, "rollback", "cli", "s0099", "-y", "--db", db)
    assert r.exit_code == 2 and "shown by `xclaw steps cli`" in r.output
    r = run(cli, "steps", "cli", "-n", "2", "--db", db, "--json")
    assert [s["id"] for s in json.loads(r.output)] == ["s0004", "s0005"]


def test_trace(cli, db: Path) -> None:
    r = run(cli, "trace", "cli", "--db", db)
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[0].startswith('s0001  user_input  user  "帮我分析日志"')
    assert lines[1].startswith("├─ s0002  llm_call  m") and "10+3 tok" in lines[1]
    assert lines[2].startswith('│  └─ s0003  tool_call  shell  {"command":"cat app.log"}')
    assert lines[3].startswith("└─ s0004")
    assert lines[4].startswith("s0005")
    tree = json.loads(run(cli, "trace", "cli", "--db", db, "--json").output)
    assert [n["id"] for n in tree] == ["s0001", "s0005"]
    assert [c["id"] for c in tree[0]["children"]] == ["s0002", "s0004"]
    assert tree[0]["children"][0]["children"][0]["id"] == "s0003"


def test_rollback_asks_first(cli, db: Path) -> None:
    r = run(cli, "rollback", "cli", "s0003", "--db", db, input="n\n")
    assert r.exit_code == 1 and "Delete s0003 and everything after it (3 step(s))" in r.output
    with SQLiteStore(db) as store:
        assert len(store.record.steps("cli")) == 5
    r = run(cli, "rollback", "cli", "s0003", "--db", db, input="y\n")
    assert r.exit_code == 0
    assert "[rollback] session reset to before step s0003 — send your new instruction" in r.output
    with SQLiteStore(db) as store:
        assert [s.seq for s in store.record.steps("cli")] == [1, 2]
        assert store.record.get_session("cli").awaiting_input


def test_rollback_yes_and_addressing(cli, db: Path) -> None:
    r = run(cli, "rollback", "cli", "cli:s0004", "--yes", "--db", db)
    assert r.exit_code == 0 and "(2 step(s) deleted)" in r.output
    assert run(cli, "rollback", "cli", "3", "-y", "--db", db).exit_code == 0


def test_fork(cli, db: Path) -> None:
    r = run(cli, "fork", "cli", "s0003", "--title", "方案A", "--db", db)
    assert r.exit_code == 0
    first = r.output.splitlines()[0]
    assert first.startswith("[fork] new session created: ")
    new_id = first.rsplit(" ", 1)[1]
    assert "original session cli is unchanged." in r.output
    with SQLiteStore(db) as store:
        fork = store.record.get_session(new_id)
        assert fork.title == "方案A" and fork.parent_session_id == "cli"
        assert len(store.record.steps(new_id)) == 3 and len(store.record.steps("cli")) == 5
    r = run(cli, "fork", "cli", "1", "--db", db, "--json")
    data = json.loads(r.output)
    assert data["isForked"] and data["forkedFrom"] == "s0001"
    assert data["title"] == "fork of log analysis at s0001"


def test_export_jsonl(cli, db: Path) -> None:
    r = run(cli, "export", "cli", "--db", db)
    assert r.exit_code == 0
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert lines[0]["kind"] == "session" and lines[0]["sessionId"] == "cli"
    assert [x["kind"] for x in lines[1:]] == ["step"] * 5
    assert [x["id"] for x in lines[1:]] == ["s0001", "s0002", "s0003", "s0004", "s0005"]
    assert lines[3]["output"] == "ERROR x" and lines[3]["parent"] == "s0002"
    assert lines[1]["input"] == "帮我分析日志"


@pytest.mark.parametrize(
    "args",
    [
        ["steps", "ghost"],
        ["trace", "ghost"],
        ["export", "ghost"],
        ["rollback", "ghost", "1", "-y"],
        ["fork", "ghost", "1"],
    ],
)
def test_unknown_session_is_exit_2_without_traceback(cli, db: Path, args) -> None:
    r = run(cli, *args, "--db", db)
    assert r.exit_code == 2
    assert "error: no session with id 'ghost'" in r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("step", ["s0009", "0", "abc", "other:s0001"])
@pytest.mark.parametrize("command", ["rollback", "fork"])
def test_bad_step_is_exit_2(cli, db: Path, command: str, step: str) -> None:
    r = run(cli, command, "cli", step, "--yes" if command == "rollback" else "--json", "--db", db)
    assert r.exit_code == 2, r.output
    # offline the hint names `xclaw steps SESSION`, not the slash command
    assert "error: step" in r.output and "use an id shown by `xclaw steps cli`" in r.output
    with SQLiteStore(db) as store:
        assert len(store.record.steps("cli")) == 5 and len(store.record.list_sessions()) == 1


def test_unusable_database_is_a_message(cli, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 200)
    r = run(cli, "sessions", "--db", junk)
    assert r.exit_code == 2 and "not a usable xclaw database" in r.output
    r = run(cli, "sessions", "--db", "postgresql://u:pw@127.0.0.1:1/x?connect_timeout=2")
    assert r.exit_code == 1 and "cannot connect to PostgreSQL at postgresql://u:***@" in r.output


def test_real_process_end_to_end(db: Path, tmp_path: Path) -> None:
    """`xclaw sessions --db X` through the installed entry point's module."""
    done = subprocess.run(
        [sys.executable, "-m", "xclaw", "sessions", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["sessionId"] == "cli"
    bad = subprocess.run(
        [sys.executable, "-m", "xclaw", "steps", "ghost", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert bad.returncode == 2 and "no session with id 'ghost'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_session_ids_take_a_unique_prefix_and_export_has_json(cli, db: Path) -> None:
    with SQLiteStore(db) as store:
        store.record.create_session(session_id="clipper-1", title="one")
        store.record.create_session(session_id="clipper-2", title="two")
    r = run(cli, "steps", "--db", db, "cli")  # exact id wins over the prefix matches
    assert r.exit_code == 0 and "Steps (session: cli)" in r.output
    r = run(cli, "export", "--db", db, "clipper")
    assert r.exit_code == 2 and "matches 2 sessions" in r.output and "clipper-1" in r.output
    r = run(cli, "export", "--db", db, "clipper-2", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["session"]["sessionId"] == "clipper-2" and doc["steps"] == []
    r = run(cli, "trace", "--db", db, "nope")
    assert r.exit_code == 2 and "no session with id 'nope'" in r.output


def test_a_command_killed_holding_the_lease_does_not_block_the_next_run(db: Path) -> None:
    """`xclaw rollback` (or fork) SIGKILLed while it holds the session's lease: the next run
    takes the lease at once, as it does a dead server's, instead of waiting out its expiry."""
    code = (
        "import sys, time; from xclaw.cli.commands_store import holding_lease; "
        "from xclaw.store.sqlite.store import SQLiteStore; s = SQLiteStore(sys.argv[1]); "
        "cm = holding_lease(s, 'cli', 'roll it back'); cm.__enter__(); "
        "print('held', flush=True); time.sleep(120)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with SQLiteStore(db) as store:
            assert store.leases.lease_info(
                "cli"
            ).live  # a live command holds it: others are refused
            assert store.leases.acquire_lease("cli", "server:x", 60) is None
            child.kill()
            child.communicate(timeout=30)
            lease = store.leases.acquire_lease("cli", "server:x", 60)
            assert lease is not None, store.leases.lease_info("cli")
            dead = [w for w in store.leases.workers() if w.worker_id.startswith("cli:")]
            assert [w.alive for w in dead] == [False]  # `xclaw workers` shows it dead
    finally:
        child.kill()
        child.communicate(timeout=30)
