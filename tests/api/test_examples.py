"""The programs of examples/ run as a user runs them (real processes, a real SQLite file, the
scripted model), and type-check under mypy --strict as a user's code would."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.caches import mypy_lock
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.slow


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_"))
    }
    env.update(XCLAW_HOME=str(tmp / "home"), PYTHONPATH=str(ROOT), NO_COLOR="1", **extra)
    return env


def _run(tmp: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=tmp,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_script(tmp_path: Path) -> None:
    out = _run(tmp_path, str(EXAMPLES / "script.py"), str(tmp_path / "notes.db"))
    assert "reply: The release notes are in NOTES.md" in out
    assert "s0004 tool_call    shell      completed" in out
    assert "Shorter: 1.2 fixes the crash" in out
    assert "rolled back to before s0003: 3 steps deleted" in out


def test_the_notebook_style_program(tmp_path: Path) -> None:
    out = _run(tmp_path, str(EXAMPLES / "notebook.py"), str(tmp_path / "notes.db"))
    assert "reply: The release notes are in NOTES.md" in out
    assert "Shorter: 1.2" in out and "Success notebook notes" in out


def test_own_tools(tmp_path: Path) -> None:
    out = _run(tmp_path, str(EXAMPLES / "my_tools.py"), str(tmp_path / "orders.db"))
    assert "order_status: runs; after a crash: retried" in out
    assert "orders: {'A-1': 'shipped', 'A-2': 'shipped'}" in out


def test_the_support_bot(tmp_path: Path) -> None:
    here = _copy_examples(tmp_path)
    out = _run(here, str(here / "examples" / "support_bot.py"), str(tmp_path / "s.db"))
    assert "tools: ['order_status']" in out
    assert "[shell] failed: Not run: unknown tool 'shell'" in out  # it has no shell
    assert "[order_status] completed: A-1: shipped on Monday (asked in " in out
    assert "ticket: A-1 shipped but is late (order A-1, priority 2)" in out
    assert "recorded: support" in out


def test_the_reviewer_sub_agent(tmp_path: Path) -> None:
    here = _copy_examples(tmp_path)
    out = _run(here, str(here / "examples" / "reviewer.py"), str(tmp_path / "r.db"))
    assert "review: approved=False issues=['add() returns a - b, not a + b']" in out
    # The reviewer's steps: a subtree under the lead's spawn_agent call (s0005).
    assert "    s0005 tool_call spawn_agent" in out.splitlines()
    assert "          s0008 tool_call read_file  [sub-agent of s0005]" in out.splitlines()


def test_the_deny_hook(tmp_path: Path) -> None:
    here = _copy_examples(tmp_path)
    out = _run(here, str(here / "examples" / "deny_hook.py"), str(tmp_path / "g.db"))
    assert "[shell] Not run: denied by a hook: this agent never deletes files" in out
    assert "s0003 hook: deny by __main__:no_deletes" in out


def _copy_examples(tmp: Path) -> Path:
    """A copy of the examples, run from beside them as docs/agents.md runs them."""
    import shutil

    here = tmp / "run"
    shutil.copytree(EXAMPLES, here / "examples")
    return here


def test_the_remote_program_against_a_gateway(tmp_path: Path, gateway: Any) -> None:
    turns = json.loads((EXAMPLES / "scripts" / "notes.json").read_text())
    server = gateway(turns["turns"], approval="ask")
    # The gateway's script has no branches: the fork's answer is the script finished.
    out = _run(tmp_path, str(EXAMPLES / "remote.py"), server.http, server.token)
    assert "reply: The release notes are in NOTES.md" in out
    assert "s0004 tool_call shell completed" in out and "fork:" in out


def _start_app(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    env = _env(tmp, NOTES_DB=str(tmp / "web.db"))
    with (tmp / "app.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "examples.web_app:app", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def test_the_web_app_serves_a_session_to_its_users(tmp_path: Path) -> None:
    port = free_port()
    proc = _start_app(tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for _ in range(200):
                try:
                    made = await http.post("/conversations", json={"title": "web notes"})
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            assert made.status_code == 201
            cid = made.json()["id"]
            events: list[dict[str, Any]] = []
            async with http.stream(
                "POST", f"/conversations/{cid}/messages", json={"text": "the notes"}
            ) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    events.append(event)
                    if event["type"] == "approval_request":
                        # A second user of the app (another connection) answers it.
                        async with httpx.AsyncClient(base_url=base) as other:
                            answer = await other.post(
                                f"/conversations/{cid}/approvals/{event['stepId']}",
                                json={"approve": True},
                            )
                            assert answer.json() == {"approved": True}
            assert events[-1]["type"] == "reply"
            shown = (await http.get(f"/conversations/{cid}")).json()
            assert shown["title"] == "web notes" and shown["state"] == "Success"
            assert [s["type"] for s in shown["steps"]][:4] == [
                "user_input",
                "llm_call",
                "system_alert",
                "tool_call",
            ]
            missing = await http.get("/conversations/nope")
            assert missing.status_code == 404 and missing.json()["code"] == "unknown_session"
            rolled = await http.post(f"/conversations/{cid}/rollback", json={"step": "s0002"})
            assert rolled.json() == {"deleted": 4}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_ctrl_c_in_a_synchronous_program_cancels_the_run(tmp_path: Path) -> None:
    """A notebook cell interrupted (SIGINT) while a run streams: the run is cancelled — and
    stopped by the time the interrupt reaches the program —, the session waits for the next
    instruction, and the program goes on."""
    script = tmp_path / "slow.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "Slow.",
                        "tool_calls": [{"name": "shell", "input": {"command": "sleep 30"}}],
                    },
                    {"text": "x"},
                ]
            }
        )
    )
    program = tmp_path / "cell.py"
    program.write_text(
        "import os, signal, threading, xclaw\n"
        # As in a terminal or a notebook kernel, whatever the test runner's own disposition
        # (a job started in the background by a shell inherits SIGINT ignored).
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"agent = xclaw.open_sync(db='cell.db', model='script:{script}', approval='yolo')\n"
        "session = agent.new_session(title='cell')\n"
        "try:\n"
        "    for event in session.send('wait'):\n"
        "        if event.type == 'tool' and event.state == 'running':\n"
        "            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
        # The interrupt went up once the run had stopped: nothing in flight any more.
        "print('busy' if session.info().busy else 'stopped')\n"
        "session.wait()\n"
        "print(session.info().state, session.steps()[-1].error)\n"
        "agent.close()\n"
    )
    began = time.monotonic()
    out = _run(tmp_path, str(program))
    assert out.splitlines() == ["interrupted", "stopped", "waiting cancelled by the user"]
    assert time.monotonic() - began < 25  # the sleep did not run to its end


def test_the_examples_type_check_strictly() -> None:
    """What a user's code meets: `py.typed`, and every public name typed."""
    with mypy_lock("examples") as cache:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--cache-dir",
                cache,
                *map(str, sorted(EXAMPLES.glob("*.py"))),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout + done.stderr


def _readme_install() -> list[list[str]]:
    """The README's first command line up to the install: `python3 -m venv .venv` and
    `.venv/bin/pip install …`, each as its words."""
    first = re.search(r"```bash\n(.*?)\n", (ROOT / "README.md").read_text())
    assert first is not None
    steps = [shlex.split(part) for part in first.group(1).split("&&")]
    assert steps[0][:3] == ["python3", "-m", "venv"], steps
    assert steps[1][0] == ".venv/bin/pip" and "install" in steps[1], steps
    return steps[:2]


def test_the_documented_install_is_type_checkable(tmp_path: Path) -> None:
    """After the README's `pip install -e .` in a fresh venv, a type checker finds `xclaw`
    there: mypy, run from outside the repository on the examples, with that venv's
    interpreter. (setuptools' default editable install of a flat layout is an import hook,
    which static tools cannot follow; a plain path in a `.pth` file they can.)"""
    venv = tmp_path / "venv"
    make, install = _readme_install()
    for words in (make, install):
        words = [str(venv) if w == ".venv" else w.replace(".venv/", f"{venv}/") for w in words]
        if words[0] == "python3":
            words[0] = shutil.which("python3") or sys.executable
        # The README's words; only pip's compiling every installed module to bytecode is
        # left out (PIP_COMPILE=0; ~1/8 of the install's CPU), as a type checker reads
        # sources.
        done = subprocess.run(
            words,
            cwd=ROOT,
            env={**os.environ, "PIP_COMPILE": "0"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    mine = tmp_path / "mine"  # a user's program, nowhere near the checkout
    mine.mkdir()
    for example in EXAMPLES.glob("*.py"):
        shutil.copy(example, mine / example.name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    # mypy's cache is the machine's (tests/caches.py), not this test's: every module is found
    # afresh in this venv, and a cached result is used only for a file of the same contents
    # (7.9 CPU-s from nothing, 0.5 with the cache of a run in another venv).
    with mypy_lock("install") as cache:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--python-executable",
                str(venv / "bin" / "python"),
                "--cache-dir",
                cache,
                *sorted(p.name for p in mine.glob("*.py")),
            ],
            cwd=mine,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout + done.stderr
