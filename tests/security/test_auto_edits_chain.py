"""The write-then-run chain under `auto-edits` (found by the second campaign): edits run
without a question there, so a prompt-injected model could write `.git/hooks/pre-commit` or
`.git/config` (`core.fsmonitor`, `core.hooksPath`, `diff.external`, `core.pager`) and wait for
the owner to approve an innocent-looking `git commit` or `git status`, which then runs the
model's program unconfined. Edits inside `.git` are therefore always asked."""

from __future__ import annotations

import pytest

from xclaw.tools.approval import ApprovalPolicy
from xclaw.tools.registry import default_tools

TOOLS = default_tools()


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        "./.git/config",
        "sub/.git/hooks/post-checkout",
        "a/../.git/hooks/pre-push",
        ".GIT/config",
        ".git",
        ".git/",
        "x/./.git/info/attributes",
    ],
)
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_edits_inside_git_are_asked_under_auto_edits(tool: str, path: str) -> None:
    policy = ApprovalPolicy("auto-edits", confinement=True)
    d = policy.decide(TOOLS[tool], {"path": path, "content": "x", "old": "a", "new": "b"})
    assert d.kind == "ask" and ".git" in d.reason, (path, d)


@pytest.mark.parametrize(
    "path",
    ["src/main.py", ".gitignore", ".github/workflows/ci.yml", "notes/.gitkeep", "git/config"],
)
def test_ordinary_edits_still_run_under_auto_edits(path: str) -> None:
    policy = ApprovalPolicy("auto-edits", confinement=True)
    assert policy.decide(TOOLS["write_file"], {"path": path, "content": "x"}).kind == "allow"
