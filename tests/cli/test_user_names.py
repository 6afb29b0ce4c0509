"""Names are exact (docs/teams.md, Users): one rule for every way a user is made — the real
`xclaw users add`, a name a trusted proxy vouches for with `teams.proxy_adds_users`, and the
store itself — matched whole (a trailing newline is no part of a name) and with the reserved
`admin` refused in any case."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.gateway.harness import clean_env, xclaw_cmd
from xclaw.errors import EXIT_USAGE
from xclaw.gateway.identity import Authenticator
from xclaw.gateway.settings import TeamSettings
from xclaw.people.teams import TeamError, UserRole, check_user_name
from xclaw.store.sqlite.store import SQLiteStore

# What shows as a proper name, or as the admin, and is not one.
NOT_NAMES = ("admin\n", "alice\n", "Admin", "ADMIN", "aDmIn", "\nalice", " alice", "a b", "")
NAMES = ("alice", "a", "bob.smith@example.com", "x-1_2", "administrator", "A" * 64)


def test_the_rule_matches_whole_names_and_reserves_admin_in_any_case() -> None:
    for name in NAMES:
        assert check_user_name(name) == name
    for name in (*NOT_NAMES, "A" * 65, "-alice"):
        with pytest.raises(TeamError):
            check_user_name(name)


def test_the_command_refuses_what_is_not_a_name(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    SQLiteStore(db).close()
    env = clean_env(XCLAW_HOME=str(tmp_path / "home"), NO_COLOR="1")

    def add(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*xclaw_cmd(), "users", "add", name, "--db", str(db)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    for name in ("admin\n", "Admin", "ADMIN", "alice\n"):
        r = add(name)
        assert r.returncode == EXIT_USAGE, (name, r.stdout, r.stderr)
        assert r.stdout == "" and "error:" in r.stderr and "xcu_" not in r.stderr
    assert add("alice").stdout.startswith("xcu_")
    store = SQLiteStore(db)
    try:
        assert [u.name for u in store.teams.users()] == ["alice"]
    finally:
        store.close()


async def test_the_store_and_the_proxy_hold_the_same_rule(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    try:
        teams = store.teams
        for name in NOT_NAMES:
            with pytest.raises(TeamError):
                teams.add_user(name, UserRole.MEMBER, None)
        settings = TeamSettings(trusted_proxies=("10.1.0.0/16",), proxy_adds_users=True)
        auth = Authenticator("s" * 32, store.teams, settings)
        for name in ("Admin", "ADMIN", "zoe\n", "a b"):
            assert await auth.identify(None, "10.1.2.3", {"x-forwarded-user": name}) is None
        assert teams.users() == []
    finally:
        store.close()
