"""A confined command (run without asking) cannot read the owner's credential files: found by
the second campaign, `cat ~/.ssh/id_rsa` (written without `~`, so allowed) ran unasked under
bubblewrap and its output went to the model. The home here is outside /tmp (which the sandbox
replaces anyway), as a real one is."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.test_approval_bypass import _isolation
from xclaw.tools.approval import ApprovalPolicy
from xclaw.tools.base import ToolContext
from xclaw.tools.registry import default_tools
from xclaw.tools.shell import ShellTool

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key-6161"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="xclaw-home-", dir="/var/tmp"))
    try:
        (root / ".ssh").mkdir()
        (root / ".ssh" / "id_ed25519").write_text(KEY)
        (root / ".netrc").write_text(f"machine example.com password {KEY}\n")
        (root / ".aws").mkdir()
        (root / ".aws" / "credentials").write_text(KEY)
        (root / "notes.txt").write_text("ordinary file\n")
        monkeypatch.setenv("HOME", str(root))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_a_confined_command_cannot_read_credential_files(tmp_path: Path, home: Path) -> None:
    iso = _isolation("bwrap", tmp_path)
    ws = tmp_path / "ws" / "s1"
    ws.mkdir(parents=True)
    command = (
        f"cat {home}/.ssh/id_ed25519 {home}/.netrc {home}/.aws/credentials "
        f"{home}/notes.txt; ls -a {home}/.ssh"
    )
    shell = default_tools()["shell"]
    decision = ApprovalPolicy("ask", confinement=True).decide(shell, {"command": command})
    assert decision.kind == "allow" and decision.confine  # so it runs unasked: confined
    tool = ShellTool(default_timeout_s=30, isolation=iso)
    r = await tool.run(
        {"command": command}, ToolContext(workspace=ws, session_id="s1", confined=True)
    )
    assert "ordinary file" in r.content, r.content  # reading in general still works
    assert "not-a-real-key" not in r.content, r.content
    # a command a human approved still has them (git over ssh needs ~/.ssh)
    approved = await tool.run(
        {"command": f"cat {home}/.ssh/id_ed25519"}, ToolContext(workspace=ws, session_id="s1")
    )
    assert "not-a-real-key" in approved.content
