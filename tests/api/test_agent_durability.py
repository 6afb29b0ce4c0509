"""A program's own agent survives a SIGKILL mid-tool (docs/agents.md, "In the record"): a
fresh process that declares the same definition resumes the session — its own tool's
completed call never runs again, the interrupted one only if a person approves, the hook
denies as before, the answer is a validated Ticket — and one that declares a changed
definition is refused, saying why, with nothing run. Real processes (tests/api/
agent_child.py), a real SQLite file, the scripted model, marker files counting runs."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_durability import Child as ProgramChild

CHILD = Path(__file__).with_name("agent_child.py")

pytestmark = pytest.mark.slow


class Child(ProgramChild):
    def __init__(self, tmp: Path, *args: str) -> None:
        super().__init__(tmp, *args, program=CHILD)


def _lead_script(tmp: Path) -> Path:
    path = tmp / "lead.json"
    call = lambda name, **args: {"name": name, "input": args}  # noqa: E731
    path.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [call("spawn_agent", task="do it", agent="reviewer")]},
                    {"text": "The reviewer is done."},
                ],
                "agents": {
                    "reviewer": {
                        "turns": [
                            {"tool_calls": [call("slow")]},
                            {
                                "after_interruption": True,
                                "output": {"title": "interrupted", "priority": 1},
                            },
                            {"output": {"title": "done", "priority": 3}},
                        ]
                    }
                },
            }
        )
    )
    return path


def _script(tmp: Path) -> Path:
    path = tmp / "script.json"
    call = lambda name, **args: {"name": name, "input": args}  # noqa: E731
    path.write_text(
        json.dumps(
            {
                "turns": [
                    {"tool_calls": [call("note", text="the secret is 42")]},
                    {"tool_calls": [call("note", text="first")]},
                    {"tool_calls": [call("slow")]},
                    {"after_interruption": True, "output": {"title": "interrupted", "priority": 1}},
                    {"output": {"title": "done", "priority": 3}},
                ]
            }
        )
    )
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _killed_mid_tool(tmp: Path) -> tuple[str, Path, list[str], list[dict[str, Any]]]:
    """A run killed while its own `slow` tool runs: (session, workspace, the args to resume)."""
    script = _script(tmp)
    db, home = str(tmp / "app.db"), str(tmp / "home")
    first = Child(tmp, "send", db, home, str(script), "v1", "open a ticket")
    sid = first.wait_for(lambda line: "session" in line)["session"]
    ws = tmp / "home" / "workspaces" / sid
    deadline = time.monotonic() + 30
    while not _lines(ws / "marker.txt"):  # the slow call is running
        assert time.monotonic() < deadline and first.proc.poll() is None, first.lines()
        time.sleep(0.02)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    return sid, ws, [db, home, str(script)], first.lines()


def _tool_steps(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["name"], e["state"]) for e in lines if e.get("type") == "tool"]


def test_killed_mid_tool_it_resumes_with_the_same_definition(tmp_path: Path) -> None:
    sid, ws, args, before = _killed_mid_tool(tmp_path)
    # The hook denied the first note, and the model was told why; the second ran, once.
    denied = [e for e in before if e.get("type") == "tool" and e["state"] == "failed"]
    assert denied[0]["output"] == "Not run: denied by a hook: notes must not hold secrets"
    assert "shell" not in {e.get("name") for e in before}  # it has no shell to call
    assert _lines(ws / "notes.txt") == [f"{sid} first"]
    (marker,) = _lines(ws / "marker.txt")
    assert marker.startswith(f"{sid} s00")  # the tool saw its session and its step

    second = Child(tmp_path, "resume", *args, "v1", sid, "no")
    lines = second.finish()
    end = lines[-1]
    assert end == {"end": "success", "output": {"title": "interrupted", "priority": 1}}, lines
    asked = [e for e in lines if e.get("type") == "approval_request"]
    # The interrupted `slow` is not run again behind anyone's back (nothing re-issued it
    # unasked); the notes were not written again: completed once.
    assert all(a["name"] != "note" for a in asked)
    assert _lines(ws / "notes.txt") == [f"{sid} first"]
    assert _lines(ws / "marker.txt") == [marker]
    notices = [e["content"] for e in lines if e.get("type") == "notice"]
    assert any("[resume]" in n for n in notices), notices


def test_a_changed_definition_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    sid, ws, args, _ = _killed_mid_tool(tmp_path)
    changed = Child(tmp_path, "resume", *args, "v2", sid, "yes")
    lines = changed.finish()
    errors = [e for e in lines if e.get("type") == "error"]
    assert [e["code"] for e in errors] == ["agent_mismatch"], lines
    assert "agent 'support'" in errors[0]["content"]
    assert "resume it where the recorded one is declared" in errors[0]["content"]
    assert _tool_steps(lines) == [] and lines[-1]["end"] == "interrupted"
    assert len(_lines(ws / "marker.txt")) == 1

    # The same definition still can.
    again = Child(tmp_path, "resume", *args, "v1", sid, "no")
    assert again.finish()[-1]["end"] == "success"


def test_a_named_sub_agent_killed_mid_tool_continues_from_its_record(tmp_path: Path) -> None:
    script = _lead_script(tmp_path)
    db, home = str(tmp_path / "app.db"), str(tmp_path / "home")
    first = Child(tmp_path, "send", db, home, str(script), "lead", "get it done")
    sid = first.wait_for(lambda line: "session" in line)["session"]
    ws = tmp_path / "home" / "workspaces" / sid
    deadline = time.monotonic() + 30
    while not _lines(ws / "marker.txt"):  # the sub-agent's slow call is running
        assert time.monotonic() < deadline and first.proc.poll() is None, first.lines()
        time.sleep(0.02)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)

    second = Child(tmp_path, "resume", db, home, str(script), "lead", sid, "no")
    lines = second.finish()
    assert lines[-1]["end"] == "success", lines
    replies = [e for e in lines if e.get("type") == "reply"]
    assert [r["content"] for r in replies] == ["The reviewer is done."]
    # The sub-agent went on from its own record with its own definition: its interrupted
    # call not repeated, its answer the Ticket of its output type.
    assert len(_lines(ws / "marker.txt")) == 1
    spawned = [e for e in lines if e.get("type") == "tool" and e["name"] == "spawn_agent"]
    assert json.loads(spawned[-1]["output"]) == {"title": "interrupted", "priority": 1}


def test_a_hooks_decision_is_replayed_after_a_crash_not_asked_again(tmp_path: Path) -> None:
    script = tmp_path / "replay.json"
    call = {"name": "slow_read", "input": {}}
    script.write_text(
        json.dumps(
            {"turns": [{"tool_calls": [call]}, {"output": {"title": "read", "priority": 2}}]}
        )
    )
    db, home = str(tmp_path / "app.db"), str(tmp_path / "home")
    first = Child(tmp_path, "send", db, home, str(script), "replay", "read it")
    sid = first.wait_for(lambda line: "session" in line)["session"]
    ws = tmp_path / "home" / "workspaces" / sid
    deadline = time.monotonic() + 30
    while not _lines(ws / "reads.txt"):  # the read-only call is running, the hook allowed it
        assert time.monotonic() < deadline and first.proc.poll() is None, first.lines()
        time.sleep(0.02)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    assert _lines(tmp_path / "hook-asked.txt") == ["call_0_0"]

    second = Child(tmp_path, "resume", db, home, str(script), "replay", sid, "no")
    lines = second.finish()
    # Read-only, so run again after the crash — under the decision the record holds: the
    # hook, which would deny now, was not asked again.
    assert lines[-1] == {"end": "success", "output": {"title": "read", "priority": 2}}, lines
    assert _lines(tmp_path / "hook-asked.txt") == ["call_0_0"]
    assert len(_lines(ws / "reads.txt")) == 2
