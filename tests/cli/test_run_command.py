"""`xclaw run`: the headless entry point, as a user runs it (a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def xclaw(
    tmp: Path, *args: str, script: list[dict] | None = None, model: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "XCLAW_MODEL"}
    env.update({"XCLAW_HOME": str(tmp), "NO_COLOR": "1"})
    if model:
        path = tmp / "script.json"
        if script is not None:
            path.write_text(json.dumps({"turns": script}))
        env["XCLAW_MODEL"] = f"script:{path}"
    return subprocess.run(
        [sys.executable, "-m", "xclaw", "run", *args],
        check=False,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_new_session_prints_the_conversation_like_the_tutorial(tmp_path: Path) -> None:
    r = xclaw(
        tmp_path,
        "--approval",
        "yolo",
        "make a file",
        script=[
            {
                "text": "",
                "tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "hi"}}],
            },
            {"text": "Wrote a.txt."},
        ],
    )
    assert r.returncode == 0, r.stderr
    assert 'xclaw uses [write_file]: {"path":"a.txt","content":"hi"}' in r.stdout
    assert "xclaw: Wrote a.txt." in r.stdout
    ws = list((tmp_path / "workspaces").iterdir())
    assert (ws[0] / "a.txt").read_text() == "hi"


def test_continue_uses_the_latest_session_and_its_history(tmp_path: Path) -> None:
    script = [{"text": "first"}, {"text": "second, and I remember the first"}]
    assert xclaw(tmp_path, "hello", script=script).returncode == 0
    r = xclaw(tmp_path, "--continue", "again")
    assert r.returncode == 0, r.stderr
    assert "second, and I remember the first" in r.stdout  # turn 2: the history was loaded


def test_without_a_terminal_ask_mode_denies_and_says_how_to_allow(tmp_path: Path) -> None:
    r = xclaw(
        tmp_path,
        "make it",
        script=[
            {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo x > f"}}]},
            {"text": "could not"},
        ],
    )
    # a run whose tools were all denied for want of a terminal is no success
    assert r.returncode == 3
    assert "no terminal to ask: denied" in r.stdout
    assert "stdin is not a terminal" in r.stderr and "--approval" in r.stderr
    assert not list((tmp_path / "workspaces").glob("*/f"))
    # The record says nobody was asked — not "denied by the user".
    approval = recorded_approval(tmp_path)
    assert approval["output"] == {
        "approved": False,
        "why": "denied: nobody could be asked (stdin is not a terminal)",
        "by": {"kind": "no_terminal"},
    }
    sid = approval["stepId"].split(":")[0]
    listing = cli(tmp_path, "steps", sid)
    assert "— denied: nobody could be asked (stdin is not a terminal)" in listing
    assert "denied by the user" not in listing


def cli(tmp: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCLAW_")}
    env.update({"XCLAW_HOME": str(tmp), "NO_COLOR": "1"})
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        check=False,
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def recorded_approval(tmp: Path) -> dict:
    """The one approval step of the one session in XCLAW_HOME=tmp, as `xclaw steps --json`."""
    (session,) = json.loads(cli(tmp, "sessions", "--json"))
    steps = json.loads(cli(tmp, "steps", session["sessionId"], "--json"))
    (approval,) = [s for s in steps if s["name"] == "approval"]
    return approval


def test_an_answer_at_the_run_prompt_is_recorded_as_the_person_at_the_terminal(
    tmp_path: Path,
) -> None:
    import pexpect

    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [{"name": "shell", "input": {"command": "echo x > f"}}],
                    },
                    {"text": "made it"},
                ]
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        XCLAW_HOME=str(tmp_path), NO_COLOR="1", XCLAW_MODEL=f"script:{tmp_path / 'script.json'}"
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "xclaw", "run", "make it"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect(r"Approve\? \[y/N\]")
        child.sendline("y")
        child.expect("made it")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert recorded_approval(tmp_path)["output"] == {
        "approved": True,
        "why": "approved by the user (xclaw run prompt)",
        "by": {"kind": "person", "client": "run", "via": "terminal"},
    }


def test_no_model_configured_is_a_plain_error(tmp_path: Path) -> None:
    r = xclaw(tmp_path, "hello", model=False)
    assert r.returncode == 2
    assert "no LLM provider is configured" in r.stderr
    assert "Traceback" not in r.stderr
    # a session exists from its first message; one no model could answer makes none
    sessions = subprocess.run(
        [sys.executable, "-m", "xclaw", "sessions", "--json"],
        check=True,
        cwd=tmp_path,
        env={**os.environ, "XCLAW_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert json.loads(sessions.stdout) == []


def test_a_malformed_model_name_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"XCLAW_HOME": str(tmp_path), "XCLAW_MODEL": "gpt4"})
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "run", "x"],
        check=False,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == (
        "error: model 'gpt4': expected anthropic:<model>, openai:<model> or script:<path> "
        "(a provider package adds its own kind: docs/llm-providers.md)"
    )


def test_sessions_get_titles_and_a_prefix_continues_one(tmp_path: Path) -> None:
    script = [{"text": "first"}, {"text": "second"}]
    assert xclaw(tmp_path, "Count the words in README", script=script).returncode == 0
    listed = subprocess.run(
        [sys.executable, "-m", "xclaw", "sessions", "--json"],
        check=True,
        cwd=tmp_path,
        env={**os.environ, "XCLAW_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    (s,) = json.loads(listed.stdout)
    assert s["title"] == "Count the words in README" and s["state"] == "success"
    r = xclaw(tmp_path, "--session", s["sessionId"][:6], "and again")
    assert r.returncode == 0, r.stderr
    assert "xclaw: second" in r.stdout


def test_resume_with_nothing_to_resume_says_so(tmp_path: Path) -> None:
    assert xclaw(tmp_path, "hello", script=[{"text": "hi"}]).returncode == 0
    r = xclaw(tmp_path, "--continue")
    assert r.returncode == 0 and "nothing to resume" in r.stdout


def test_resume_of_a_session_waiting_for_input_uses_the_sessions_state_words(
    tmp_path: Path,
) -> None:
    """`xclaw run --session ID` words a session as `xclaw sessions` does: one waiting for
    the user's next instruction (here after a rollback) is not "Running"."""
    assert xclaw(tmp_path, "hello", script=[{"text": "hi"}, {"text": "again"}]).returncode == 0
    env = {**os.environ, "XCLAW_HOME": str(tmp_path), "NO_COLOR": "1"}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "xclaw", *args],
            check=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        return done.stdout

    (s,) = json.loads(cli("sessions", "--json"))
    sid = s["sessionId"]
    cli("rollback", "--yes", sid, "s0002")
    (s,) = json.loads(cli("sessions", "--json"))
    assert s["state"] == "waiting"
    r = xclaw(tmp_path, "--session", sid)
    assert r.returncode == 0, r.stderr
    assert "nothing to resume" in r.stdout
    assert s["stateText"] in r.stdout and "Running" not in r.stdout
    r = xclaw(tmp_path, "--session", sid, "go on")
    assert r.returncode == 0, r.stderr
    assert f"session {sid} ({s['stateText']})" in r.stderr


@pytest.mark.parametrize("model", ["", "openai:gpt-test"])
def test_errors_about_the_openai_base_url_name_both_variables(tmp_path: Path, model: str) -> None:
    """The code takes OPENAI_API_BASE_URL or OPENAI_BASE_URL: a message naming one would send
    someone who set the other looking for the wrong mistake."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_")) and k != "XCLAW_MODEL"
    }
    env.update({"XCLAW_HOME": str(tmp_path), "NO_COLOR": "1"})
    if model:
        env["XCLAW_MODEL"] = model
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "run", "hello"],
        check=False,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r
    assert "OPENAI_API_BASE_URL" in r.stderr and "OPENAI_BASE_URL" in r.stderr, r.stderr


@pytest.mark.parametrize("text", ["/steps"])
def test_slash_commands_point_to_the_right_tool(tmp_path: Path, text: str) -> None:
    r = xclaw(tmp_path, text, script=[])
    assert r.returncode == 2 and "xclaw chat" in r.stderr


@pytest.mark.parametrize(
    ("mode", "tool", "yaml", "hint"),
    [
        ("ask", "write_file", "", "use --approval auto-edits or yolo"),
        ("ask", "shell", "", "use --approval yolo"),
        ("auto-edits", "shell", "", "use --approval yolo"),
        (
            "auto-edits",
            "shout",
            "tools: ['loud_tools_q:shout']\n",
            "use --approval yolo, or allow it in xclaw.yaml: tool_policies: {shout: {approval: allow}}",
        ),
        (
            "yolo",
            "shout",
            "tools: ['loud_tools_q:shout_hard']\n",
            "it is asked even under yolo; allow it in xclaw.yaml: tool_policies: {shout: {approval: allow}}",
        ),
    ],
)
def test_the_hint_for_a_denied_call_names_what_would_allow_it(
    tmp_path: Path, mode: str, tool: str, yaml: str, hint: str
) -> None:
    """The hint used to say "use --approval auto-edits or yolo" even under auto-edits, and for
    tools neither mode lets run unasked (an MCP server's commit, a destructive tool)."""
    (tmp_path / "loud_tools_q.py").write_text(
        "import xclaw\n\n"
        "@xclaw.tool\ndef shout(text: str) -> str:\n    return text.upper()\n\n"
        "@xclaw.tool(destructive=True, name='shout')\ndef shout_hard(text: str) -> str:\n    return text.upper()\n"
    )
    (tmp_path / "xclaw.yaml").write_text(yaml)
    inputs = {
        "write_file": {"path": "f", "content": "x"},
        "shell": {"command": "echo x > f"},
        "shout": {"text": "hi"},
    }
    r = xclaw(
        tmp_path,
        "--approval",
        mode,
        "do it",
        script=[
            {"text": "", "tool_calls": [{"name": tool, "input": inputs[tool]}]},
            {"text": "could not"},
        ],
    )
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"no terminal to ask: denied ({hint})" in r.stdout, r.stdout


def test_the_last_line_names_the_state_the_run_ended_in(tmp_path: Path) -> None:
    """The first line names the session as it was (a new one: New); the last one, once the
    run is over, as it is now — a run that answered: Success, never New."""
    r = xclaw(tmp_path, "hello", script=[{"text": "hi"}])
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    sid = lines[0].split()[1]
    assert lines[0] == f"session {sid} (New)"
    assert lines[-1] == f"session {sid} ended: Success"
    # A run that failed says so last too.
    r = xclaw(tmp_path, "--continue", "again", script=[{"text": "hi"}, {"fail": "the model broke"}])
    assert r.returncode == 1
    assert f"session {sid} ended: Failed" in r.stderr.strip().splitlines()
