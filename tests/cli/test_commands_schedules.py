"""`xclaw schedule` and `xclaw hook` on a real SQLite file: add (each kind, each target),
list, pause, resume, remove, fires; the creator recorded and their rights checked; wrong
calls refused with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from tests.store.builders import user
from xclaw.cli.main import _register, cli
from xclaw.people.teams import ShareRole, UserRole
from xclaw.store import open_store
from xclaw.store.steps.writes import AddStep


def run(db: Path, *args: str) -> Result:
    _register()
    return CliRunner().invoke(cli, [*args, "--db", str(db)])


def test_add_list_pause_resume_remove(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    sid = store.record.create_session(title="target").session_id
    store.record.write(AddStep(session_id=sid, step=user("hello")))
    store.close()
    made = run(
        db, "schedule", "add", "--cron", "0 9 * * 1-5", "--session", sid[:8], "-m", "standup"
    )
    assert made.exit_code == 0, made.output
    sch = made.stdout.strip()
    fork = run(
        db, "schedule", "add", "--every", "30m", "--fork-of", sid, "-m", "nightly", "--catch-up",
        "once", "--json",
    )  # fmt: skip
    assert fork.exit_code == 0, fork.output
    assert json.loads(fork.stdout)["forkOf"] == sid and json.loads(fork.stdout)["catchUp"] == "once"
    once = run(db, "schedule", "add", "--at", "2030-01-01T09:00", "--session", sid, "-m", "x")
    assert once.exit_code == 0, once.output
    listed = run(db, "schedule", "list").output
    assert sch in listed and "cron 0 9 * * 1-5" in listed and "every 30m" in listed
    assert "at 2030-01-01T09:00" in listed and "by admin" in listed
    assert run(db, "schedule", "pause", sch).exit_code == 0
    rows = {r["id"]: r for r in json.loads(run(db, "schedule", "list", "--json").stdout)}
    assert rows[sch]["paused"] is True and rows[sch]["createdBy"] is None
    assert run(db, "schedule", "resume", sch).exit_code == 0
    assert run(db, "schedule", "remove", sch).exit_code == 0
    gone = run(db, "schedule", "remove", sch)
    assert gone.exit_code == 2 and "no schedule" in gone.output
    assert sch not in run(db, "schedule", "list").output


def test_wrong_calls_write_nothing(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    sid = store.record.create_session(title="t").session_id
    empty = store.record.create_session(title="no steps").session_id
    store.close()
    for args, says in [
        (("--cron", "* * *", "--session", sid), "five fields"),
        (("--cron", "* * * * *", "--every", "1m", "--session", sid), "one of --cron"),
        (("--every", "1m"), "one of --session"),
        (("--every", "1m", "--session", "nope"), "is written when it is first sent a message"),
        (("--every", "0s", "--session", sid), "at least one second"),
        (("--every", "1m", "--fork-of", empty), "no step to fork from"),
        (("--every", "1m", "--fork-of", empty), "send it its first message, or have"),
        (("--every", "1m", "--session", sid, "--tz", "Nowhere/City"), "time zone"),
    ]:
        out = run(db, "schedule", "add", *args, "-m", "hi")
        assert out.exit_code == 2, (args, out.output)
        assert says in out.output, (args, out.output)
    store = open_store(db)
    assert store.schedules.schedules() == []
    store.close()


def test_the_creator_is_recorded_and_their_rights_checked(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    sid = store.record.create_session(title="t").session_id
    teams = store.teams
    teams.add_user("bob", UserRole.MEMBER, None)
    teams.add_user("eve", UserRole.MEMBER, None)
    teams.share_session(sid, "bob", ShareRole.COLLABORATOR, by=None)
    teams.share_session(sid, "eve", ShareRole.VIEWER, by=None)
    store.close()
    ok = run(db, "schedule", "add", "--every", "1h", "--session", sid, "-m", "x", "--as", "bob")
    assert ok.exit_code == 0, ok.output
    sch = ok.stdout.strip()
    assert "by bob" in run(db, "schedule", "list").output
    viewer = run(db, "schedule", "add", "--every", "1h", "--session", sid, "-m", "x", "--as", "eve")
    assert viewer.exit_code != 0 and "viewer" in viewer.output
    # Only its creator (or an admin) changes it.
    assert run(db, "schedule", "pause", sch, "--as", "eve").exit_code != 0
    assert run(db, "schedule", "pause", sch, "--as", "bob").exit_code == 0
    hook = run(db, "hook", "add", "ci", "--session", sid, "--template", "{body}", "--as", "eve")
    assert hook.exit_code != 0


def test_hook_add_prints_its_secret_once(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    store = open_store(db)
    sid = store.record.create_session(title="t").session_id
    store.close()
    made = run(db, "hook", "add", "ci", "--session", sid, "--template", "build {status}")
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    assert secret.startswith("whsec_") and "/hooks/ci" in made.stderr
    listed = run(db, "hook", "list", "--json")
    assert json.loads(listed.stdout)[0]["url"] == "/hooks/ci" and secret not in listed.stdout
    assert run(db, "hook", "add", "ci", "--session", sid, "--template", "x").exit_code != 0
    assert run(db, "hook", "add", "Bad Name", "--session", sid, "--template", "x").exit_code == 2
    assert run(db, "hook", "remove", "ci").exit_code == 0
    assert run(db, "hook", "list").stdout.strip() == "no webhooks (xclaw hook add)"
