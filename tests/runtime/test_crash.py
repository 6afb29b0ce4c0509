"""Crash tests with real processes: `xclaw run` killed with SIGKILL at the worst moments,
then resumed. Every completed side effect ran exactly once, nothing completed is lost, and
the rebuilt messages are accepted by both providers' request validation."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.llm.fakes import validate_anthropic_request, validate_openai_request
from tests.waiting import wait_until
from xclaw.llm.anthropic import anthropic_request
from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import openai_request
from xclaw.recorder.history import build_history
from xclaw.store import open_store
from xclaw.store.steps.model import MAIN_AGENT, StepStatus, StepType

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


class Scenario:
    def __init__(self, tmp: Path, turns: list[dict[str, Any]]) -> None:
        self.tmp = tmp
        self.script = tmp / "script.json"
        self.script.write_text(json.dumps({"turns": turns}))
        self.db = tmp / "xclaw.db"
        self.env = {
            **os.environ,
            "XCLAW_HOME": str(tmp),
            "XCLAW_MODEL": f"script:{self.script}",
            "XCLAW_DB": str(self.db),
        }

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "xclaw", "run", *args],
            cwd=self.tmp,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            conn.close()

    def wait_for(self, sql: str, timeout: float = 20) -> None:
        wait_until(lambda: self.query(sql), sql, timeout, every=0.005)

    def session_id(self) -> str:
        return self.query("SELECT session_id FROM sessions")[0][0]

    def effects(self) -> list[str]:
        path = self.tmp / "workspaces" / self.session_id() / "effects.log"
        return path.read_text().split() if path.exists() else []

    def resume(self, timeout: float = 60) -> str:
        proc = self.start("--approval", "yolo", "--session", self.session_id())
        out, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, out
        return out

    def check_record(self, *, interrupted_may_have_run: bool = False) -> None:
        """Nothing is left running, every completed shell call left exactly one effect, and
        both providers accept the rebuilt history. With `interrupted_may_have_run`, a kill may
        have landed inside a call after its effect and before its completion was committed:
        that call is recorded interrupted (its outcome unknown, never run again), so it may
        have left its one effect or none."""
        store = open_store(str(self.db))
        try:
            every = store.record.steps(self.session_id())  # sub-agents' steps too
        finally:
            store.close()
        steps = [s for s in every if s.agent == MAIN_AGENT]
        assert all(s.status is not StepStatus.RUNNING for s in every)
        completed = [
            s
            for s in every
            if s.step_type is StepType.TOOL_CALL
            and s.name == "shell"
            and s.status is StepStatus.COMPLETED
        ]
        if interrupted_may_have_run:
            interrupted = [
                s
                for s in every
                if s.step_type is StepType.TOOL_CALL and s.name == "shell" and s.interrupted
            ]
            assert len(completed) <= len(self.effects()) <= len(completed) + len(interrupted)
        else:
            assert len(completed) == len(self.effects())
        hist = build_history(
            steps, read_only=lambda n: n in ("read_file", "list_dir"), new_input=True
        )
        request = LLMRequest(system="s", messages=(*hist.messages, UserMessage("next")))
        validate_anthropic_request(anthropic_request("claude-test", request))
        validate_openai_request(openai_request("gpt-test", request))


def sleeper(marker: str) -> dict[str, Any]:
    """The slow side effect: `echo two` runs in the shell itself, after the sleep. The marker
    makes the shell's command line unique (other test runs may share the machine)."""
    return sh(f"sleep 2; echo two >> effects.log  # {marker}")


def command_alive(marker: str) -> bool:
    """Whether any process's command line holds the marker (a zombie's is empty)."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    return True
            except OSError:
                continue  # gone meanwhile
    return False


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)  # reaps it and closes its pipe


TASK = [
    {"text": "step one", "tool_calls": [sh("echo one >> effects.log")]},
    {"text": "step two", "tool_calls": [sh("sleep 2; echo two >> effects.log")]},
    {"text": "step three", "tool_calls": [sh("echo three >> effects.log")]},
    {"text": "all done"},
]


def test_killed_during_a_sleeping_shell_call(tmp_path: Path) -> None:
    marker = f"xclaw-test-{secrets.token_hex(6)}"
    turns = [dict(t) for t in TASK]
    turns[1] = {"text": "step two", "tool_calls": [sleeper(marker)]}
    sc = Scenario(tmp_path, turns)
    proc = sc.start("--approval", "yolo", "do the task")
    sc.wait_for(
        "SELECT 1 FROM traces WHERE step_type='tool_call' AND status='running' AND input_data LIKE '%sleep 2%'"
    )
    wait_until(lambda: command_alive(marker), "the shell of `sleep 2; echo two` runs")
    kill(proc)
    # The killed call's `echo two` must never happen: the shell that would run it dies with
    # xclaw (the lifeline, xclaw/tools/lifeline.py). Once no process holds the command, nothing can write `two`.
    wait_until(lambda: not command_alive(marker), "the killed call's shell is gone")
    out = sc.resume()
    assert "[resume] detected interrupted tool_call, retrying..." in out
    assert "may or may not have run" in out
    assert "all done" in out
    assert not command_alive(marker)  # the resumed run did not start it again
    assert sc.effects() == ["one", "three"]
    interrupted = sc.query("SELECT error_message FROM traces WHERE input_data LIKE '%sleep 2%'")
    assert interrupted == [("interrupted",)]  # kept and marked, never deleted (nothing lost)
    sc.check_record()


def test_killed_during_an_llm_call(tmp_path: Path) -> None:
    turns = [dict(t) for t in TASK]
    turns[1] = {"text": "thinking", "sleep": 1.5, "tool_calls": [sh("echo two >> effects.log")]}
    sc = Scenario(tmp_path, turns)
    proc = sc.start("--approval", "yolo", "do the task")
    sc.wait_for("SELECT 1 FROM traces WHERE step_type='llm_call' AND status='running' AND seq > 2")
    kill(proc)
    assert sc.effects() == ["one"]
    sc.resume()
    assert sc.effects() == ["one", "two", "three"]
    # The interrupted LLM call was re-issued, the completed one was not.
    llm = sc.query(
        "SELECT status, error_message FROM traces WHERE step_type='llm_call' ORDER BY seq"
    )
    assert llm.count(("failed", "interrupted")) == 1
    assert len([r for r in llm if r[0] == "completed"]) == 4
    sc.check_record()


def test_killed_right_after_a_tool_completed(tmp_path: Path) -> None:
    turns = [dict(t) for t in TASK]
    turns[1] = {"text": "next", "sleep": 0.5, "tool_calls": [sh("echo two >> effects.log")]}
    sc = Scenario(tmp_path, turns)
    proc = sc.start("--approval", "yolo", "do the task")
    sc.wait_for("SELECT 1 FROM traces WHERE step_type='tool_call' AND status='completed'")
    kill(proc)
    sc.resume()
    assert sc.effects() == ["one", "two", "three"]  # `one` did not run again
    sc.check_record()


def test_killed_while_waiting_for_approval(tmp_path: Path) -> None:
    turns = [{"text": "", "tool_calls": [sh("echo one >> effects.log")]}, {"text": "wrote it"}]
    sc = Scenario(tmp_path, turns)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "xclaw", "run", "--approval", "ask", "write the file"],
        cwd=str(tmp_path),
        env=sc.env,
        encoding="utf-8",
        timeout=20,
    )
    child.expect(r"Approve\? \[y/N\]")
    assert sc.query("SELECT current_status FROM sessions") == [("Paused",)]
    child.kill(signal.SIGKILL)
    child.wait()
    assert sc.effects() == []
    again = pexpect.spawn(
        sys.executable,
        ["-m", "xclaw", "run", "--approval", "ask", "--session", sc.session_id()],
        cwd=str(tmp_path),
        env=sc.env,
        encoding="utf-8",
        timeout=20,
    )
    again.expect(r"Approve\? \[y/N\]")  # approval asked again after the restart
    again.sendline("y")
    again.expect("wrote it")
    again.expect(pexpect.EOF)
    assert sc.effects() == ["one"]
    approvals = sc.query("SELECT status FROM traces WHERE name='approval'")
    assert approvals == [("completed",)]  # the same approval step, answered once
    sc.check_record()


def test_killed_inside_a_sub_agent_continues_its_own_branch(tmp_path: Path) -> None:
    """Resume note and dangling steps for sub-agents: the resumed run continues the interrupted
    sub-agent from its own steps (what it completed is not done again) instead of starting it
    over or dropping it."""
    marker = f"xclaw-test-{secrets.token_hex(6)}"
    sc = Scenario(tmp_path, [])
    sc.script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "delegating",
                        "tool_calls": [{"name": "spawn_agent", "input": {"task": "write the log"}}],
                    },
                    {"text": "all done"},
                ],
                "subagent": {
                    "turns": [
                        {"text": "", "tool_calls": [sh("echo one >> effects.log")]},
                        {"text": "", "tool_calls": [sleeper(marker)]},
                        {"text": "", "tool_calls": [sh("echo three >> effects.log")]},
                        {"text": "log written"},
                    ]
                },
            }
        )
    )
    proc = sc.start("--approval", "yolo", "do the task")
    sc.wait_for(
        "SELECT 1 FROM traces WHERE step_type='tool_call' AND status='running' AND input_data LIKE '%sleep 2%'"
    )
    wait_until(lambda: command_alive(marker), "the shell of `sleep 2; echo two` runs")
    kill(proc)
    # The killed `echo two` never happens: its shell died with the run.
    wait_until(lambda: not command_alive(marker), "the killed call's shell is gone")
    assert sc.effects() == ["one"]
    out = sc.resume()
    assert "all done" in out
    assert not command_alive(marker)
    assert sc.effects() == ["one", "three"]  # `one` not repeated; the sub-agent went on
    spawns = sc.query(
        "SELECT seq, status, error_message FROM traces WHERE name='spawn_agent' ORDER BY seq"
    )
    assert [(s, e) for _, s, e in spawns] == [("failed", "interrupted"), ("completed", None)]
    first_spawn, second_spawn = (f"s{seq:04d}" for seq, _, _ in spawns)
    # One branch, one agent id: the continued sub-agent's steps are recorded as the same agent.
    agents = {a for (a,) in sc.query("SELECT DISTINCT agent FROM traces WHERE agent != 'main'")}
    assert agents == {first_spawn}
    # The branch records where it resumed, under the new spawn step.
    alerts = sc.query(
        "SELECT t.input_data, p.seq FROM traces t JOIN traces p ON p.step_id = t.parent_step_id "
        f"WHERE t.name='resume' AND t.agent='{first_spawn}'"
    )
    assert len(alerts) == 1 and f"s{alerts[0][1]:04d}" == second_spawn
    assert json.loads(alerts[0][0])["mayHaveRun"]  # the killed `sleep 2; echo two` call
    assert sc.query(
        "SELECT output_data FROM traces WHERE name='spawn_agent' AND status='completed'"
    ) == [('"log written"',)]
    # Every step's ancestors lead to the user's message; the sub-agent's new steps hang under
    # the new spawn_agent step.
    rows = sc.query("SELECT step_id, parent_step_id, seq, step_type, agent FROM traces")
    parent = {sid: p for sid, p, _, _, _ in rows}
    seq_of = {sid: seq for sid, _, seq, _, _ in rows}

    def ancestors(sid: str) -> list[int]:
        chain = []
        node: str | None = sid
        while node is not None:
            chain.append(seq_of[node])
            node = parent[node]
        return chain

    user_seq = min(
        seq for _, _, seq, kind, agent in rows if kind == "user_input" and agent == "main"
    )
    assert all(ancestors(sid)[-1] == user_seq for sid in parent)
    second = int(second_spawn[1:])
    resumed = [sid for sid, _, seq, _, agent in rows if agent == first_spawn and seq > second]
    assert resumed and all(second in ancestors(sid) for sid in resumed)
    sc.check_record()
