"""The approval policy as a table: mode x tool x arguments -> allow / ask / deny."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.config.settings import Settings
from xclaw.errors import ConfigError
from xclaw.tools.approval import (
    ALLOW,
    ALLOW_CONFINED,
    ASK,
    DENY,
    ApprovalPolicy,
    NotSafe,
    simple_commands,
)
from xclaw.tools.base import Tool
from xclaw.tools.registry import default_tools

CONFINED = ALLOW_CONFINED("only listed commands with allowed options; run confined")

TOOLS = default_tools()


class CustomTool(Tool):
    """A tool the policy knows nothing about by name."""

    name = "send_email"
    description = "sends an email"
    read_only = False

    def __init__(self) -> None:
        self.input_schema = {"type": "object"}

    async def run(self, args, ctx):  # type: ignore[no-untyped-def]
        raise AssertionError("never run here")


def kind(mode: str, tool: str, args: dict[str, object]) -> str:
    t = CustomTool() if tool == "send_email" else TOOLS[tool]
    return ApprovalPolicy(mode, confinement=True).decide(t, args).kind  # type: ignore[arg-type]


SHELL_SAFE = {"command": "ls -la && cat a.txt | grep x"}
SHELL_UNSAFE = {"command": "rm a.txt"}
SHELL_DENIED = {"command": "rm -rf /"}
WRITE = {"path": "a.txt", "content": "x"}
EDIT = {"path": "a.txt", "old_text": "x", "new_text": "y"}

TABLE = [
    # tool, args, ask, auto-edits, yolo
    ("read_file", {"path": "a"}, "allow", "allow", "allow"),
    ("view_file", {"path": "a"}, "allow", "allow", "allow"),
    ("list_dir", {}, "allow", "allow", "allow"),
    ("spawn_agent", {"task": "t"}, "allow", "allow", "allow"),
    ("write_file", WRITE, "ask", "allow", "allow"),
    ("edit_file", EDIT, "ask", "allow", "allow"),
    ("shell", SHELL_SAFE, "allow", "allow", "allow"),
    ("shell", SHELL_UNSAFE, "ask", "ask", "allow"),
    ("shell", SHELL_DENIED, "deny", "deny", "deny"),
    ("shell", {"command": "mkfs.ext4 /dev/sda"}, "deny", "deny", "deny"),
    ("shell", {}, "allow", "allow", "allow"),  # nothing runs: the tool refuses the input
    ("shell", {"command": ["rm", "x"]}, "allow", "allow", "allow"),
    ("send_email", {"to": "x"}, "ask", "ask", "allow"),
]


def test_policy_table_needs_a_sandbox_for_anything_unasked() -> None:
    policy = ApprovalPolicy("ask", confinement=False)
    decision = policy.decide(TOOLS["shell"], SHELL_SAFE)
    assert decision.kind == "ask" and "no sandbox" in decision.reason
    assert ApprovalPolicy("yolo", confinement=False).decide(TOOLS["shell"], SHELL_SAFE) == ALLOW


@pytest.mark.parametrize(("tool", "args", "ask", "auto_edits", "yolo"), TABLE)
def test_policy_table(
    tool: str, args: dict[str, object], ask: str, auto_edits: str, yolo: str
) -> None:
    assert (kind("ask", tool, args), kind("auto-edits", tool, args), kind("yolo", tool, args)) == (
        ask,
        auto_edits,
        yolo,
    )


# Contract changed with the bashlex reader and per-command option allowlists:
# reasons are worded by the new reader; globs, ~ and any unlisted option are asked; what runs
# unasked is ALLOW_CONFINED (read-only sandbox), not a plain ALLOW.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls && rm x", ASK("shell command runs 'rm', which is not in the safe-command list")),
        ("cat a | grep b", CONFINED),
        ("echo $(rm x)", ASK("shell command uses command substitution")),
        ("echo `rm x`", ASK("shell command uses command substitution")),
        ('echo "$(rm x)"', ASK("shell command uses command substitution")),
        ("echo '$(rm x)'", CONFINED),
        ("echo hi > f", ASK("shell command redirects output to a file")),
        ("echo hi >> f", ASK("shell command redirects output to a file")),
        ("ls &> f", ASK("shell command redirects output to a file")),
        ("ls >&f", ASK("shell command redirects output to a file")),
        ('echo "a > b; rm x"', CONFINED),
        ("ls 2>/dev/null", CONFINED),
        ("grep -r x . 2>&1 | sort | uniq -c | head", CONFINED),
        ("cat < notes.txt", CONFINED),
        ("cat < /dev/tcp/example.com/80", ASK("shell command opens a network connection")),
        ("diff <(ls a) <(ls b)", ASK("shell command uses process substitution")),
        ("cat <<EOF\nhi\nEOF", ASK("shell command uses a here-document")),
        ("ls; rm x", ASK("shell command runs 'rm', which is not in the safe-command list")),
        ("ls\nrm x", ASK("shell command runs 'rm', which is not in the safe-command list")),
        ("ls || rm x", ASK("shell command runs 'rm', which is not in the safe-command list")),
        ("sleep 1 & rm x", ASK("shell command starts a background job (&)")),
        ("(ls)", ASK("shell command uses a subshell, group or compound command")),
        ("FOO=1 ls", ASK("shell command sets environment variables")),
        ("ls # ; rm x", CONFINED),
        ("/bin/rm x", ASK("shell command runs '/bin/rm', which is not in the safe-command list")),
        ("find . -name '*.py'", CONFINED),
        (
            "find . -name x -exec rm {} \\;",
            ASK("shell command uses pathname, brace or tilde expansion ('{' unquoted)"),
        ),
        (
            "find . -name x -exec rm '{}' ';'",
            ASK("shell command runs 'find' with '-exec', which is not on its allowlist"),
        ),
        (
            "find . -delete",
            ASK("shell command runs 'find' with '-delete', which is not on its allowlist"),
        ),
        (
            "sort -o out.txt in.txt",
            ASK("shell command runs 'sort' with -o (in '-o'), which is not on its allowlist"),
        ),
        ("sort -u in.txt", CONFINED),
        (
            "uniq in.txt out.txt",
            ASK(
                "shell command runs 'uniq' with 2 operands (at most 1: another would be written to)"
            ),
        ),
        ("   ", ASK("shell command is empty")),
    ],
)
def test_safe_command_parsing_in_ask_mode(command: str, expected: object) -> None:
    policy = ApprovalPolicy("ask", confinement=True)
    assert policy.decide(TOOLS["shell"], {"command": command}) == expected


def test_edit_reason_names_the_path() -> None:
    decision = ApprovalPolicy("ask").decide(TOOLS["write_file"], WRITE)
    assert decision == ASK("write_file changes 'a.txt'")


def test_deny_reason_shows_what_matched() -> None:
    decision = ApprovalPolicy("yolo").decide(TOOLS["shell"], {"command": "sudo reboot now"})
    assert decision.kind == "deny"
    assert decision.reason.startswith("refused by policy: matches 'reboot'")


def test_configured_lists_replace_the_defaults(tmp_path: Path) -> None:
    policy = ApprovalPolicy(
        "ask",
        safe_commands=["git status", "pytest"],
        denied_patterns=[r"\bcurl\b"],
        confinement=True,
    )
    shell = TOOLS["shell"]
    assert policy.decide(shell, {"command": "git status --short"}, tmp_path) == CONFINED
    assert policy.decide(shell, {"command": "pytest tests"}) == CONFINED
    assert policy.decide(shell, {"command": "pytest -q"}).kind == "ask"  # -q is not listed
    assert policy.decide(shell, {"command": "git push"}).kind == "ask"
    assert policy.decide(shell, {"command": "ls"}).kind == "ask"  # no longer in the list
    assert policy.decide(shell, {"command": "curl http://x"}) == DENY(
        "refused by policy: matches 'curl' (deny pattern \\bcurl\\b)"
    )


def test_from_settings(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        database=":memory:",
        workspace_root=tmp_path,
        approval={"mode": "auto-edits", "safe_commands": ("make",), "deny": ("forbidden",)},
    )
    policy = ApprovalPolicy.from_settings(settings.tool_setup())
    assert policy.mode == "auto-edits"
    assert policy.decide(TOOLS["write_file"], WRITE) == ALLOW
    assert policy.decide(TOOLS["shell"], {"command": "make all"}).kind == (
        "allow" if policy.confinement else "ask"
    )
    assert policy.decide(TOOLS["shell"], {"command": "echo forbidden"}).kind == "deny"


def test_bad_configuration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="approval mode 'careful'"):
        ApprovalPolicy("careful")
    with pytest.raises(ConfigError, match=r"deny pattern '\(' is not a regex"):
        ApprovalPolicy("ask", denied_patterns=["("])


def test_simple_commands_splits_and_unquotes() -> None:
    assert simple_commands("ls -la 'a b' \"c d\" e\\ f && grep -n x|wc -l; echo ''") == [
        ["ls", "-la", "a b", "c d", "e f"],
        ["grep", "-n", "x"],
        ["wc", "-l"],
        ["echo", ""],
    ]
    assert simple_commands("ls 2>/dev/null >/dev/null") == [["ls"]]
    with pytest.raises(NotSafe):
        simple_commands("echo $(date)")


def test_a_listed_git_command_runs_unasked_only_over_data_only_configuration(
    tmp_path: Path,
) -> None:
    """git takes programs from the repository's files (the write-then-run chain): a listed
    git command is judged with what git would read in the workspace."""
    import subprocess

    policy = ApprovalPolicy("auto-edits", safe_commands=["git status", "ls"], confinement=True)
    shell = TOOLS["shell"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert policy.decide(shell, {"command": "git status"}, tmp_path) == CONFINED
    no_workspace = policy.decide(shell, {"command": "git status"})
    assert no_workspace == ASK("shell command runs git, and there is no workspace to check")
    (tmp_path / "vendor" / "objects").mkdir(parents=True)
    (tmp_path / "vendor" / "refs").mkdir()
    (tmp_path / "vendor" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "vendor" / "config").write_text('[diff "x"]\n\ttextconv = sh x.sh\n')
    asked = policy.decide(shell, {"command": "ls && git status"}, tmp_path)
    assert asked == ASK(
        "shell command runs git, which here would take programs to run from files in the "
        "workspace: vendor/config: diff.x.textconv = sh x.sh"
    )
    # A command that does not run git is not affected; one that may is warned about.
    assert policy.decide(shell, {"command": "ls vendor"}, tmp_path) == CONFINED
    warned = policy.decide(shell, {"command": "git -C vendor log"}, tmp_path)
    assert warned.kind == "ask"
    assert warned.reason == (
        "shell command runs 'git', which is not in the safe-command list. WARNING: git, which "
        "here would take programs to run from files in the workspace: vendor/config: "
        "diff.x.textconv = sh x.sh"
    )
    assert "WARNING" not in policy.decide(shell, {"command": "rm x"}, tmp_path).reason
    # yolo: everything runs, by the owner's choice.
    assert ApprovalPolicy("yolo").decide(shell, {"command": "git status"}, tmp_path) == ALLOW


async def test_review_looks_at_the_workspace_in_a_thread_and_agrees_with_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent loop's entry: the same decisions, the walk off the event loop, and none at
    all for a command that cannot run git."""
    import threading

    from xclaw.tools import approval

    walks: list[bool] = []
    real = approval.program_sources

    def spy(workspace: Path) -> list[str]:
        walks.append(threading.current_thread() is threading.main_thread())
        return real(workspace)

    monkeypatch.setattr(approval, "program_sources", spy)
    policy = ApprovalPolicy("ask", safe_commands=["git status", "ls"], confinement=True)
    shell = TOOLS["shell"]
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n\tpager = x\n")
    for command in ("git status", "ls", "rm -rf x", "cat .git/config"):
        reviewed = await policy.review(shell, {"command": command}, tmp_path)
        assert reviewed == policy.decide(shell, {"command": command}, tmp_path), command
    assert (await policy.review(shell, {"command": "git status"}, tmp_path)).kind == "ask"
    walks.clear()
    await policy.review(shell, {"command": "ls"}, tmp_path)
    assert walks == []
    await policy.review(shell, {"command": "git status"}, tmp_path)
    assert walks == [False]  # one walk, in a worker thread
