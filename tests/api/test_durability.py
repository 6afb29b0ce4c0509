"""A program using xclaw as a library is SIGKILLed in the middle of `send` — mid-tool, or
while an approval waits — and a fresh process opens the same database and resumes the
session (`agent.session(id)`, `session.resume()`): completed steps never run again, the
interrupted call runs again only if the model re-issues it and a person approves (warned
`maybe_repeated`), a pending approval is asked again as an event. Real processes, a real
SQLite file, the scripted model running a shell `sleep`, marker files counting runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

CHILD = Path(__file__).with_name("child.py")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


class Child:
    def __init__(self, tmp: Path, *args: str, program: Path = CHILD) -> None:
        self.out = tmp / f"child-{time.monotonic_ns()}.jsonl"
        self.err = self.out.with_suffix(".err")
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(program), *args],
                cwd=tmp,
                env=_env(),
                stdout=out,
                stderr=err,
            )

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def wait_for(self, pred: Any, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if pred(line):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"not seen; output {self.lines()}\n{self.err.read_text()}")

    def finish(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        code = self.proc.wait(timeout=timeout)
        assert code == 0, self.err.read_text()
        return self.lines()


def _script(tmp: Path, slow: str) -> Path:
    path = tmp / "script.json"
    sh = lambda command: {"name": "shell", "input": {"command": command}}  # noqa: E731
    path.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "First the quick part.", "tool_calls": [sh("echo run >> first.txt")]},
                    {"text": "Now the slow part.", "tool_calls": [sh(slow)]},
                    {
                        "after_interruption": True,
                        "text": "That was interrupted; running it again.",
                        "tool_calls": [sh(slow)],
                    },
                    {"text": "Done."},
                ]
            }
        )
    )
    return path


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("answer", ["no", "yes"])
def test_sigkill_mid_tool_then_resume_from_a_fresh_process(tmp_path: Path, answer: str) -> None:
    ws = tmp_path / "home" / "workspaces"
    # The first run sleeps (and is killed there); a run approved again does not.
    slow = "echo run >> marker.txt; [ $(wc -l < marker.txt) -gt 1 ] || sleep 30"
    script = _script(tmp_path, slow)
    db, home = str(tmp_path / "app.db"), str(tmp_path / "home")
    first = Child(tmp_path, "send", db, home, str(script), "do the two parts")
    sid = first.wait_for(lambda line: "session" in line)["session"]
    marker = ws / sid / "marker.txt"
    deadline = time.monotonic() + 30
    while _count(marker) < 1:  # the slow call is running: its sleep has begun
        assert time.monotonic() < deadline and first.proc.poll() is None, first.lines()
        time.sleep(0.02)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    assert _count(ws / sid / "first.txt") == 1 and _count(marker) == 1

    second = Child(tmp_path, "resume", db, home, str(script), sid, answer)
    lines = second.finish()
    asked = [e for e in lines if e.get("type") == "approval_request"]
    # The interrupted call is asked again, warned that it may already have happened.
    assert len(asked) == 1 and asked[0]["maybeRepeated"] is True, lines
    assert asked[0]["input"] == {"command": slow}
    notices = [e["content"] for e in lines if e.get("type") == "notice"]
    assert any("[resume]" in n for n in notices), notices
    assert lines[-2] == {"type": "reply", "sessionId": sid, "content": "Done."}
    assert lines[-1]["end"] == "success"
    # Completed once: the quick call never ran again; the slow one only if approved.
    assert _count(ws / sid / "first.txt") == 1
    assert _count(marker) == (2 if answer == "yes" else 1)

    # The record says what happened: the interrupted step kept, marked interrupted.
    third = Child(tmp_path, "resume", db, home, str(script), sid, "no")
    assert third.finish()[-1] == {"end": "success", "status": "Success"}  # nothing to resume
    import asyncio

    import xclaw

    async def steps() -> list[Any]:
        async with xclaw.open(db=db, home=home, model=f"script:{script}") as agent:
            return await (await agent.session(sid)).steps()

    recorded = asyncio.run(steps())
    interrupted = [s for s in recorded if s.error == "interrupted"]
    assert [s.input for s in interrupted] == [{"command": slow}]
    assert interrupted[0].type == "tool_call" and interrupted[0].status == "failed"


def test_sigkill_while_an_approval_waits_asks_it_again(tmp_path: Path) -> None:
    """Killed while Paused on an approval: the fresh process's resume asks it again."""
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "Writing.",
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "a.txt", "content": "x"}}
                        ],
                    },
                    {"text": "Written."},
                ]
            }
        )
    )
    db, home = str(tmp_path / "app.db"), str(tmp_path / "home")
    program = tmp_path / "wait.py"
    program.write_text(
        "import asyncio, json, sys, xclaw\n"
        "async def main():\n"
        f"    async with xclaw.open(db={db!r}, home={home!r}, model='script:{script}',"
        " approval='ask') as agent:\n"
        "        s = await agent.new_session()\n"
        "        print(json.dumps({'session': s.id}), flush=True)\n"
        "        async for e in s.send('write it'):\n"
        "            print(json.dumps(e.wire()), flush=True)\n"
        "asyncio.run(main())\n"
    )
    out = tmp_path / "wait.jsonl"
    with out.open("wb") as f:
        proc = subprocess.Popen([sys.executable, str(program)], env=_env(), stdout=f, cwd=tmp_path)
    deadline = time.monotonic() + 30
    while '"approval_request"' not in out.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, out.read_text()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    sid = json.loads(out.read_text().splitlines()[0])["session"]

    second = Child(tmp_path, "resume", db, home, str(script), sid, "yes")
    lines = second.finish()
    asked = [e for e in lines if e.get("type") == "approval_request"]
    assert len(asked) == 1 and asked[0]["name"] == "write_file", lines
    assert asked[0]["maybeRepeated"] is False  # never ran: nothing to warn about
    assert lines[-1]["end"] == "success"
    assert (tmp_path / "home" / "workspaces" / sid / "a.txt").read_text() == "x"
