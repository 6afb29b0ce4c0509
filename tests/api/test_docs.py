"""The programs of docs/python-api.md run as they are written (each ```python block, as a
program, from a copy of the repository's examples), so the page cannot drift from the API."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "python-api.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, re.S)

pytestmark = pytest.mark.slow


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_"))
    }
    env.update(XCLAW_HOME=str(tmp / "home"), PYTHONPATH=str(ROOT), **extra)
    return env


def _run(tmp: Path, code: str, *args: str, **env: str) -> str:
    program = tmp / "program.py"
    program.write_text(code)
    done = subprocess.run(
        [sys.executable, str(program), *args],
        cwd=tmp,
        env=_env(tmp, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, code + done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def here(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


def _block(marker: str) -> str:
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, marker
    return found[0]


def test_there_are_programs_to_run() -> None:
    assert len(BLOCKS) >= 7


def test_quick_start(here: Path) -> None:
    out = _run(here, _block('title="release notes"'))
    assert "reply: The release notes are in NOTES.md" in out
    assert "s0004 tool_call shell completed" in out


def test_cancelling(here: Path) -> None:
    out = _run(here, _block("stopped early"))
    assert out.splitlines()[-2:] == ["stopping: True", "Waiting for your instruction"]


def test_time_travel(here: Path) -> None:
    out = _run(here, _block("time travel"))
    assert "Shorter: 1.2" in out and "3 steps deleted; Waiting for your instruction" in out
    assert out.splitlines()[-1] == "['s0001', 's0002']"


def test_own_tools(here: Path) -> None:
    assert _run(here, _block("order_status")).strip() == "A-1 has shipped."


def test_without_async(here: Path) -> None:
    out = _run(here, _block("open_sync"))
    assert "The release notes are in NOTES.md" in out and "s0004 tool_call completed" in out


def test_schedules_and_webhooks(here: Path) -> None:
    out = _run(here, _block('title="nightly"')).splitlines()
    assert out == [
        "cron 0 18 * * 1-5 Europe/Paris skip",
        "True",
        "True",
        "/hooks/ci True",
        "['ci'] []",
    ]


def test_resume_after_a_kill(here: Path) -> None:
    """The resume program, given a session whose process was SIGKILLed while an approval
    waited: asked again, approved (it never ran), answered."""
    writer = (
        "import asyncio, json, xclaw\n"
        "async def main():\n"
        "    async with xclaw.open(db='notes.db', model='script:examples/scripts/notes.json',"
        " approval='ask') as agent:\n"
        "        s = await agent.new_session()\n"
        "        print(json.dumps({'session': s.id}), flush=True)\n"
        "        async for e in s.send('prepare the release notes'):\n"
        "            print(json.dumps(e.wire()), flush=True)\n"
        "asyncio.run(main())\n"
    )
    (here / "writer.py").write_text(writer)
    out = here / "writer.jsonl"
    with out.open("wb") as f:
        proc = subprocess.Popen(
            [sys.executable, str(here / "writer.py")], cwd=here, env=_env(here), stdout=f
        )
    deadline = time.monotonic() + 60
    while '"approval_request"' not in out.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, out.read_text()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    sid = json.loads(out.read_text().splitlines()[0])["session"]
    result = _run(here, _block("session.resume()"), sid)
    assert result.splitlines() == [
        "The release notes are in NOTES.md: two items, the crash fix and faster exports.",
        "success",
    ]


def test_through_a_gateway(here: Path, gateway: Any) -> None:
    turns = json.loads((ROOT / "examples" / "scripts" / "notes.json").read_text())["turns"]
    server = gateway(turns, approval="ask")
    code = _block("xclaw.connect(").replace("http://127.0.0.1:3000", server.http)
    out = _run(here, code, XCLAW_TOKEN=server.token)
    assert out.splitlines()[0].startswith("The release notes are in NOTES.md")
    assert "('s0004', 'tool_call', 'completed')" in out
