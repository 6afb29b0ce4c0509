"""Every conversation is on disk: whatever the umask, other local users read none of it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from xclaw.gateway.auth import load_or_create_token
from xclaw.sandbox.paths import workspace_dir
from xclaw.store import open_store


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o000)  # the worst case: everything created world-writable by default
    try:
        yield
    finally:
        os.umask(old)


def test_home_token_database_wal_shm_and_workspaces_are_private(tmp_path: Path, open_umask) -> None:
    home = tmp_path / "home" / ".xclaw"
    load_or_create_token(home)
    assert mode(home) == 0o700
    assert mode(home / "token") == 0o600
    store = open_store(str(home / "xclaw.db"))
    try:
        session = store.record.create_session(title="t")
        assert (home / "xclaw.db-wal").exists() and (home / "xclaw.db-shm").exists()
        for name in ("xclaw.db", "xclaw.db-wal", "xclaw.db-shm"):
            assert mode(home / name) == 0o600, name
        ws = workspace_dir(home / "workspaces", session.session_id)
        assert mode(ws) == 0o700 and mode(home / "workspaces") == 0o700
    finally:
        store.close()


def test_files_left_readable_by_an_older_version_are_fixed(tmp_path: Path) -> None:
    home = tmp_path / "old"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    (home / "token").write_text("x" * 32 + "\n")
    os.chmod(home / "token", 0o644)
    db = home / "xclaw.db"
    open_store(str(db)).close()
    os.chmod(db, 0o644)
    load_or_create_token(home)
    open_store(str(db)).close()
    assert mode(home / "token") == 0o600
    assert mode(db) == 0o600


def test_a_database_in_a_user_directory_leaves_that_directory_alone(tmp_path: Path) -> None:
    mine = tmp_path / "shared"
    mine.mkdir()
    os.chmod(mine, 0o755)
    open_store(str(mine / "x.db")).close()
    assert mode(mine) == 0o755  # not xclaw's to change
    assert mode(mine / "x.db") == 0o600


def test_the_chat_history_file_is_private(tmp_path: Path, open_umask) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from xclaw.cli.chat import TerminalInput

    history = tmp_path / "home" / "chat_history"
    with create_pipe_input() as pipe:
        from prompt_toolkit.application.current import create_app_session

        with create_app_session(input=pipe, output=DummyOutput()):
            TerminalInput(history)
    assert mode(history) == 0o600
    assert mode(history.parent) == 0o700
