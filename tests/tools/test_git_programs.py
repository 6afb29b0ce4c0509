"""Where git could take a program to run from in a workspace (xclaw/tools/git_programs.py),
on repositories made by real git, and the configuration every git of the shell tool gets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from xclaw.tools import git_programs
from xclaw.tools.base import ToolContext
from xclaw.tools.git_programs import git_env, mentions_git, program_sources, runs_git
from xclaw.tools.shell import ShellTool


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_an_empty_workspace_and_a_fresh_repository_name_nothing(tmp_path: Path) -> None:
    assert program_sources(tmp_path) == []
    git(tmp_path, "init", "-q")
    git(tmp_path, "init", "-q", "nested")
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    assert program_sources(tmp_path) == []  # only the template's *.sample hooks


def test_linked_worktrees_and_separate_git_dirs_are_followed(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "main")
    git(tmp_path / "main", "-c", "user.name=u", "-c", "user.email=u@example.com", "commit",
        "-q", "--allow-empty", "-m", "x")  # fmt: skip
    git(tmp_path / "main", "worktree", "add", "-q", "../wt")
    git(tmp_path, "init", "-q", "--separate-git-dir", "meta", "sep")
    assert program_sources(tmp_path) == []
    with (tmp_path / "meta" / "config").open("a") as f:
        f.write("[core]\n\tfsmonitor = ./x\n")
    with (tmp_path / "main" / ".git" / "worktrees" / "wt" / "config.worktree").open("w") as f:
        f.write("[diff]\n\texternal = ./y\n")
    found = program_sources(tmp_path)
    assert "meta/config: core.fsmonitor = ./x" in found
    assert "main/.git/worktrees/wt/config.worktree: diff.external = ./y" in found


def test_a_submodule_is_data_a_worktree_outside_the_workspace_is_named(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    git(origin, "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q",
        "--allow-empty", "-m", "x")  # fmt: skip
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "sub")
    assert program_sources(ws) == []  # .git/modules/sub/config: core.worktree = ../../../sub
    git(ws, "config", "core.worktree", str(tmp_path))
    assert program_sources(ws) == [f".git/config: core.worktree = {tmp_path}"]


def test_a_bare_repository_planted_anywhere_is_read(tmp_path: Path) -> None:
    for where in (tmp_path, tmp_path / "a" / "b"):
        (where / "objects").mkdir(parents=True)
        (where / "refs").mkdir()
        (where / "HEAD").write_text("ref: refs/heads/main\n")
        (where / "config").write_text("[core]\n\tbare = false\n\tfsmonitor = sh p.sh\n")
    assert program_sources(tmp_path) == [
        "config: core.fsmonitor = sh p.sh",
        "a/b/config: core.fsmonitor = sh p.sh",
    ]


def test_hooks_includes_and_pointers_out_of_the_workspace_are_named(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / ".git" / "hooks" / "post-index-change").write_text("#!/bin/sh\n")
    git(ws, "config", "include.path", "../shared.gitconfig")
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    (ws / "link").mkdir()
    (ws / "link" / ".git").symlink_to(tmp_path)
    (ws / "odd").mkdir()
    (ws / "odd" / ".git").write_text("not a gitdir line\n")
    found = program_sources(ws)
    assert ".git/hooks/post-index-change: a hook git may run" in found
    assert ".git/config: include.path = ../shared.gitconfig" in found
    assert f"sub/.git: points outside the workspace, to {tmp_path / 'elsewhere'}" in found
    assert f"link/.git: points outside the workspace, to {tmp_path}" in found
    assert "odd/.git: not a `gitdir:` line xclaw can read" in found


def test_a_fifo_for_a_config_file_does_not_hang_the_check(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".git" / "config").unlink()
    os.mkfifo(tmp_path / ".git" / "config")
    assert program_sources(tmp_path) == [".git/config: not a regular file"]


def test_a_workspace_too_large_to_walk_is_named_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_programs, "MAX_ENTRIES", 10)
    for i in range(12):
        (tmp_path / f"f{i}").write_text("")
    [found] = program_sources(tmp_path)
    assert "more than 10 files" in found


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git status", True),
        ("/usr/bin/git log", True),
        ("cd x && g'i't status", True),
        ("bash -c 'git diff'", True),
        ("git-upload-pack .", True),
        ("cat .git/config", False),
        ("cat .gitignore", False),
        ("echo digit", False),
    ],
)
def test_which_commands_may_start_git(command: str, expected: bool) -> None:
    assert mentions_git(command) is expected


def test_runs_git_reads_the_first_word() -> None:
    assert runs_git(["git", "status"]) and runs_git(["/usr/bin/git"]) and runs_git(["git-log"])
    assert not runs_git(["cat", "git"]) and not runs_git([])


def test_git_env_appends_to_what_the_environment_already_gives_git(tmp_path: Path) -> None:
    env = git_env(
        {"GIT_CONFIG_COUNT": "1", "GIT_CEILING_DIRECTORIES": "/a"}, tmp_path, confined=True
    )
    assert env["GIT_CONFIG_KEY_1"] == "safe.bareRepository"
    assert env["GIT_CONFIG_VALUE_1"] == "explicit"
    assert env["GIT_CONFIG_COUNT"] == str(1 + len(git_programs.ALWAYS + git_programs.CONFINED))
    assert env["GIT_CEILING_DIRECTORIES"] == f"/a:{tmp_path.resolve().parent}"
    assert "core.hooksPath" not in git_env({}, tmp_path, confined=False).values()


async def test_git_started_by_the_shell_stays_inside_the_workspace(tmp_path: Path) -> None:
    """A repository above the workspace (the user's own) is not found; one planted without a
    `.git` is refused; an approved command still uses an ordinary repository."""
    git(tmp_path, "init", "-q")
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    tool = ShellTool(isolation=None)
    ctx = ToolContext(workspace=ws, session_id="s1")
    above = await tool.run({"command": "git rev-parse --show-toplevel"}, ctx)
    assert above.is_error and "not a git repository" in above.content, above.content
    (ws / "objects").mkdir()
    (ws / "refs").mkdir()
    (ws / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "config").write_text("[core]\n\tbare = true\n")
    bare = await tool.run({"command": "git log"}, ctx)
    assert bare.is_error and "safe.bareRepository" in bare.content, bare.content
    ok = await tool.run(
        {"command": "rm -r objects refs HEAD config && git init -q && git status && echo fine"},
        ctx,
    )
    assert not ok.is_error and "fine" in ok.content, ok.content
