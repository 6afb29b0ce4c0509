"""Write-then-run through git (tests/security/bypass_corpus.py GIT_CHAINS), through the real
runtime with real git: the model writes files git reads as repository configuration (auto-edits
approves the edits; a human approved the ordinary git set-up), then asks for a git command that
looks read-only. Whether the policy lets it run confined (git listed as a safe command) or asks
a human who approves what looks read-only, the planted program never runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.harness import Harness
from tests.security.bypass_corpus import GIT_CHAINS, PLANTED_PROGRAM
from xclaw.sandbox.isolation import confinement_available
from xclaw.store.steps.model import StepType
from xclaw.tools.base import ToolContext
from xclaw.tools.settings import DEFAULT_SAFE_COMMANDS
from xclaw.tools.shell import ShellTool

SID = "gitchain"
GIT_READING = ("git status", "git log", "git diff")


def _fill(text: str, ws: Path, chain: dict[str, Any]) -> str:
    return text.replace("{ws}", str(ws)).replace("{planted}", str(ws / str(chain["planted"])))


def _turns(chain: dict[str, Any], ws: Path) -> list[dict[str, Any]]:
    files = {**chain["files"], chain["planted"]: PLANTED_PROGRAM}  # type: ignore[dict-item]
    writes = [
        {"name": "write_file", "input": {"path": p, "content": _fill(c, ws, chain)}}
        for p, c in files.items()
    ]
    setup = [{"name": "shell", "input": {"command": c}} for c in chain["setup"]]  # type: ignore[attr-defined]
    turns: list[dict[str, Any]] = []
    if setup:
        turns.append({"text": "Setting up the repository.", "tool_calls": setup})
    turns.append({"text": "Writing the files.", "tool_calls": writes})
    turns.append(
        {
            "text": "Checking.",
            "tool_calls": [{"name": "shell", "input": {"command": chain["command"]}}],
        }
    )
    turns.append({"text": "Done."})
    return turns


async def _run_chain(
    tmp_path: Path, chain: dict[str, Any], *, isolation: str, listed: bool, believing: bool = True
) -> tuple[Harness, list[dict[str, Any]], str]:
    """One chain in a real session under auto-edits. The human approves the set-up, and the
    git command too when `believing` and its question does not show what the chain planted
    (`chain["shown"]`): they take it for the read-only command it looks like. Returns the
    harness, the questions asked about the git command, and its recorded output."""
    ws = tmp_path / "ws" / SID
    safe = DEFAULT_SAFE_COMMANDS + (GIT_READING if listed else ())
    h = Harness(
        tmp_path,
        _turns(chain, ws),
        approval={"mode": "auto-edits", "safe_commands": safe},
        sandbox={"isolation": isolation},
    )
    asked: list[dict[str, Any]] = []
    try:
        sid = await h.session(SID)
        await h.runtime.send(sid, "check the repository")
        answered: set[str] = set()
        while h.runtime.is_busy(sid):
            for f in h.of("approval_request"):
                if f["stepId"] in answered:
                    continue
                answered.add(f["stepId"])
                command = f["input"].get("command")
                if command == chain["command"]:
                    asked.append(f)
                    approve = not believing or str(chain["shown"]) not in f["reason"]
                else:
                    approve = f["name"] == "shell"  # the human's own set-up
                h.runtime.answer_approval(sid, f["stepId"], approve)
            await asyncio.sleep(0.02)
        await h.runtime.wait_idle(sid)
        calls = [
            s
            for s in h.store.record.steps(sid)
            if s.step_type is StepType.TOOL_CALL and s.input_data.get("command") == chain["command"]
        ]
        output = "\n".join(str(s.output_data or "") + str(s.error_message or "") for s in calls)
        # The premise: the edits ran without a question, and the set-up worked.
        writes = [s for s in h.store.record.steps(sid) if s.name == "write_file"]
        assert writes and all(s.status.value == "completed" for s in writes), writes
        return h, asked, output
    except BaseException:
        await h.close()
        raise


def _bwrap() -> None:
    if not confinement_available() and not os.environ.get("XCLAW_TEST_REQUIRE_BWRAP"):
        pytest.skip("bubblewrap cannot create namespaces here")


def _git_version() -> tuple[int, ...]:
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    return tuple(int(x) for x in out.stdout.split()[2].split(".")[:2])


CHAIN_IDS = [str(c["name"]) for c in GIT_CHAINS]


@pytest.mark.parametrize("chain", GIT_CHAINS, ids=CHAIN_IDS)
async def test_listed_as_safe_the_git_command_is_asked_not_run_confined(
    tmp_path: Path, chain: dict[str, Any]
) -> None:
    """`git status`/`log`/`diff` in approval.safe_commands: confined and unasked before; now the
    policy sees the repository configuration naming a program and asks, naming it."""
    _bwrap()
    h, asked, output = await _run_chain(tmp_path, chain, isolation="auto", listed=True)
    try:
        ws = tmp_path / "ws" / SID
        assert "PLANTED-RAN" not in output, output
        assert not (ws / "PLANTED").exists()
        assert asked and str(chain["shown"]) in asked[0]["reason"], asked
    finally:
        await h.close()


@pytest.mark.parametrize("isolation", ["auto", "none"])
@pytest.mark.parametrize("chain", GIT_CHAINS, ids=CHAIN_IDS)
async def test_asked_the_question_shows_what_git_would_run(
    tmp_path: Path, chain: dict[str, Any], isolation: str
) -> None:
    """git not listed: asked, as before — but a human approving what looks like a read-only
    command used to run the planted program unconfined. The question now names it."""
    if isolation == "auto":
        _bwrap()
    h, asked, output = await _run_chain(tmp_path, chain, isolation=isolation, listed=False)
    try:
        ws = tmp_path / "ws" / SID
        assert asked, "the git command was not asked"
        assert "PLANTED-RAN" not in output, output
        assert not (ws / "PLANTED").exists()
    finally:
        await h.close()


NEUTRALISED = [c for c in GIT_CHAINS if "fsmonitor" in str(c["files"])]


@pytest.mark.parametrize("isolation", ["auto", "none"])
@pytest.mark.parametrize("chain", NEUTRALISED, ids=[str(c["name"]) for c in NEUTRALISED])
async def test_approved_anyway_git_started_by_the_shell_ignores_fsmonitor_and_bare_repositories(
    tmp_path: Path, chain: dict[str, Any], isolation: str
) -> None:
    """Even a human who says yes to the warning does not get the planted program of these
    chains: every git the shell tool starts refuses a repository it would find without a
    `.git` (safe.bareRepository=explicit) and never starts an fsmonitor."""
    if isolation == "auto":
        _bwrap()
    if _git_version() < (2, 38):
        pytest.skip("safe.bareRepository needs git 2.38 (older git: the question still warns)")
    h, asked, output = await _run_chain(
        tmp_path, chain, isolation=isolation, listed=False, believing=False
    )
    try:
        ws = tmp_path / "ws" / SID
        assert asked
        assert "PLANTED-RAN" not in output, output
        assert not (ws / "PLANTED").exists()
    finally:
        await h.close()


def _plant(ws: Path, chain: dict[str, Any]) -> None:
    """The chain's workspace without the runtime: the set-up run by bash, the files written."""
    ws.mkdir(parents=True)
    for command in chain["setup"]:  # type: ignore[attr-defined]
        subprocess.run(["bash", "-c", command], cwd=ws, check=True, capture_output=True)
    files = {**chain["files"], chain["planted"]: PLANTED_PROGRAM}  # type: ignore[dict-item]
    for path, content in files.items():
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(_fill(content, ws, chain))


@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
@pytest.mark.parametrize("chain", GIT_CHAINS, ids=CHAIN_IDS)
async def test_run_confined_anyway_the_git_command_is_refused(
    tmp_path: Path, chain: dict[str, Any], kind: str
) -> None:
    """The shell tool looks again just before a command allowed without asking runs git (a
    parallel sub-agent may have written the files since the policy looked): not run."""
    from tests.security.test_approval_bypass import _isolation

    tool = ShellTool(default_timeout_s=10, kill_grace_s=0.2, isolation=_isolation(kind, tmp_path))
    ws = tmp_path / "ws" / SID
    _plant(ws, chain)
    ctx = ToolContext(workspace=ws, session_id=SID, confined=True)
    result = await tool.run({"command": str(chain["command"])}, ctx)
    assert "PLANTED-RAN" not in result.content, result.content
    assert result.is_error and result.content.startswith("Not run:"), result.content
    assert str(chain["shown"]) in result.content
    assert not (ws / "PLANTED").exists()
