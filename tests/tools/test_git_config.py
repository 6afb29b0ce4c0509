"""The strict reader of git configuration (xclaw/tools/git_config.py): what real git writes
passes, every key that can name a program is caught, and on whatever the reader accepts it
finds exactly the keys git itself finds (checked against `git config --list`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from xclaw.tools.git_config import Unreadable, program_keys, read_entries


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_what_git_itself_writes_names_no_program(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    git(origin, "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q",
        "--allow-empty", "-m", "x")  # fmt: skip
    git(tmp_path, "clone", "-q", str(origin), "clone")
    clone = tmp_path / "clone"
    git(clone, "remote", "add", "mirror", "https://example.com/r.git")
    git(clone, "config", "user.name", "Someone")
    git(clone, "config", "user.email", "someone@example.com")
    git(clone, "config", "pull.rebase", "true")
    git(clone, "config", "color.ui", "auto")
    git(clone, "config", "core.autocrlf", "input")
    git(clone, "branch", "-q", "topic")
    git(clone, "branch", "-q", "--set-upstream-to=origin/HEAD", "topic")
    for repo in (origin, clone):
        data = (repo / ".git" / "config").read_bytes()
        assert program_keys(data) == [], data.decode()


@pytest.mark.parametrize(
    "text",
    [
        "[core]\n\tfsmonitor = ./x",
        "[core]\n\thooksPath = .githooks",
        "[core]\n\tpager = less",
        "[core]\n\tsshCommand = ssh -i k",
        "[core]\n\teditor = vi",
        "[core]\n\taskPass = x",
        "[diff]\n\texternal = x",
        '[filter "lfs"]\n\tclean = x',
        '[filter "x"]\n\tprocess = x',
        '[diff "pdf"]\n\ttextconv = x',
        '[diff "pdf"]\n\tcommand = x',
        '[merge "m"]\n\tdriver = x',
        "[alias]\n\tst = !x",
        "[include]\n\tpath = ../shared.gitconfig",
        '[includeIf "gitdir:/"]\n\tpath = x',
        "[gpg]\n\tprogram = x",
        "[log]\n\tshowSignature = true",
        "[credential]\n\thelper = x",
        "[uploadpack]\n\tpackObjectsHook = x",
        '[hook "h"]\n\tcommand = x',
        '[remote "o"]\n\tuploadpack = x',
        '[remote "o"]\n\tvcs = x',
        '[submodule "s"]\n\tupdate = !x',
        '[url "ext::sh -c x"]\n\tinsteadOf = https://',
        "[protocol]\n\tallow = always",
        "[sequence]\n\teditor = x",
        "[pager]\n\tstatus = x",
        "[interactive]\n\tdiffFilter = x",
        "[CORE]\n\tFSMonitor = x",
        "[Core]\n  FsMonitor=x",
        "[core.x]\n\tfsmonitor = x",
        "[alias.st]\n\tx = y",
        "[core]\n\tfsmonitor",  # a bare boolean
        "\ufeff[core]\n\tfsmonitor = x",
        "[core]\r\n\tfsmonitor = x\r\n",
    ],
)
def test_keys_that_may_name_a_program_are_caught(text: str) -> None:
    assert program_keys(text.encode()), text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[core] fsmonitor = x", "section header"),  # a key on the header's line
        ('[remote "o"]\n\turl = x \\\n[core]\n\tbare = false', "backslash"),
        ("[core]\n\tbare = false \\", "backslash"),
        ("fsmonitor = x", "under a section"),
        ("[core]\n\tbare\x0b= false", "control"),
        ("[core]\n\t=x", "under a section"),
        ("[core\n\tbare = false", "section header"),
        ('[a "b]\n\tc = d', "section header"),
    ],
)
def test_what_the_reader_cannot_be_sure_of_is_unreadable(text: str, why: str) -> None:
    with pytest.raises(Unreadable, match=why):
        read_entries(text.encode())
    [found] = program_keys(text.encode())
    assert "git may read more there than xclaw can check" in found


@pytest.mark.parametrize(
    "text",
    [
        '[remote "origin"]\n\turl = https://x/y.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*',
        "[remote.origin]\n\turl = x",  # the older spelling
        '[Remote "O"]\n\tURL = x',
        '[branch "a \\"b\\""]\n\tremote = origin\n\tmerge = refs/heads/a',
        "# comment\n; comment\n[core]\n\tbare = false ; trailing\n\tfilemode = true # x",
        '[color "diff"]\n\tmeta = yellow',
        '[user]\n\tname = "A \\\\ B"\n\temail = a@b',
        "",
    ],
)
def test_data_only_configuration_passes(text: str) -> None:
    assert program_keys(text.encode()) == [], text


def _git_keys(tmp_path: Path, data: bytes) -> list[str] | None:
    """The keys `git config --list` finds in a file (None when git refuses the file)."""
    path = tmp_path / "config"
    path.write_bytes(data)
    done = subprocess.run(
        ["git", "config", "--file", str(path), "--list", "--name-only", "-z"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    return [k.decode("utf-8", "replace") for k in done.stdout.split(b"\0") if k]


_FRAGMENTS = st.sampled_from(
    [
        "[core]",
        "[CoRe]",
        '[remote "o"]',
        '[remote "a\\"b"]',
        '[remote  "x y"]',
        "[remote.origin]",
        "[alias]",
        '[filter "f"]',
        "[core] bare = true",
        "[a.b.c]",
        "\turl = x",
        "  fsmonitor = y",
        "bare",
        "bare = true # c",
        'x = "quoted # not a comment"',
        'x = "unterminated',
        "x = a \\",
        "x = a \\\\",
        "x = a\\",
        "; comment",
        "# comment \\",
        "clean = sh -c 'x'",
        "\tmerge = refs/heads/main\r",
        "9key = x",
        "key-1 = x",
        "key_1 = x",
        "\x0bkey = x",
        "",
    ]
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_FRAGMENTS, min_size=1, max_size=8))
@example(lines=['[remote "o"]', "x = a \\", "[alias]", "key-1 = x"])  # a continued line
@example(lines=["[core] bare = true", "x = y"])  # a key on a header's line
def test_the_reader_finds_exactly_the_keys_git_finds(tmp_path: Path, lines: list[str]) -> None:
    data = "\n".join(lines).encode()
    try:
        mine = [e.key for e in read_entries(data)]
    except Unreadable:
        return  # refused: the command is asked, whatever git reads there
    theirs = _git_keys(tmp_path, data)
    if theirs is None:
        return  # git refuses the file: it runs nothing
    assert mine == theirs, data
