"""`xclaw chat` against a real `xclaw serve`: under a real pseudo-terminal (pexpect) and with
piped stdin."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.gateway.harness import Server, clean_env, write_script, xclaw_cmd

pytestmark = pytest.mark.slow

_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]|\r"
)


class Term:
    """A pexpect child whose output is matched with escape sequences stripped: the client
    colours and prompt_toolkit moves the cursor, the words stay the same."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.raw = ""
        self.pos = 0

    @property
    def text(self) -> str:
        return _ANSI.sub("", self.raw)

    def expect(self, pattern: str, timeout: float = 15.0) -> re.Match[str]:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.text, self.pos)
            if m:
                self.pos = m.end()
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not seen; screen so far:\n{self.text[-3000:]}")
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                m = rx.search(self.text, self.pos)
                if m:
                    self.pos = m.end()
                    return m
                raise AssertionError(
                    f"{pattern!r} not seen before exit; screen:\n{self.text[-3000:]}"
                ) from None

    def drain(self) -> None:
        """Read whatever the client has written so far."""
        while True:
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.2)
            except (pexpect.TIMEOUT, pexpect.EOF):
                return

    def prompt(self) -> None:
        self.expect(r"You:")

    def line(self, text: str) -> None:
        self.child.sendline(text)

    def wait_exit(self, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF):
                self.raw += self.child.read_nonblocking(65536, timeout=0.1)
        assert not self.child.isalive(), "chat did not exit"
        self.child.close()
        return int(self.child.exitstatus or 0)


def llm_call_running(db: Path) -> bool:
    """Whether the server's record holds a model call in flight (read-only, from outside)."""
    if not db.exists():
        return False
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return bool(
            conn.execute(
                "SELECT 1 FROM traces WHERE step_type='llm_call' AND status='running'"
            ).fetchall()
        )
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def make(turns: list[dict[str, Any]], approval: str = "ask") -> Server:
        root = tmp_path / f"srv{len(servers)}"
        root.mkdir()
        s = Server(root=root, script=write_script(root / "script.json", turns), approval=approval)
        servers.append(s)
        return s.start()

    yield make
    for s in servers:
        s.kill()


@pytest.fixture(scope="module")
def task_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with TASK for the tests that neither kill it nor read every session of its
    database: each works in a session of its own (a new one: its own working directory has
    no .cli_session), so they share it rather than each paying for a start."""
    root = tmp_path_factory.mktemp("task-server")
    server = Server(root=root, script=write_script(root / "script.json", TASK), approval="ask")
    try:
        yield server.start()
    finally:
        server.kill()


def chat_env(server: Server) -> dict[str, str]:
    # The token comes from $XCLAW_HOME/token, as on the server's own machine.
    return clean_env(
        XCLAW_HOME=str(server.home), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", COLUMNS="200"
    )


SPAWNED: list[Term] = []


@pytest.fixture(autouse=True)
def stop_leftover_clients() -> Iterator[None]:
    """A failing test must not leave a chat process behind on its pseudo-terminal."""
    yield
    while SPAWNED:
        child = SPAWNED.pop().child
        if not child.closed:
            child.close(force=True)


def spawn_chat(server: Server, cwd: Path, *args: str) -> Term:
    cmd = [*xclaw_cmd(), "chat", "--url", server.http, *args]
    child = pexpect.spawn(
        cmd[0],
        cmd[1:],
        cwd=str(cwd),
        env=chat_env(server),
        encoding="utf-8",
        dimensions=(50, 200),
        timeout=15,
    )
    term = Term(child)
    SPAWNED.append(term)
    return term


TASK = [
    {
        "text": "Writing a.",
        "tool_calls": [{"name": "shell", "input": {"command": "echo a >> effects.txt"}}],
    },
    {"text": "Wrote a."},
    {"text": "Second answer."},
]


def test_terminal_client_approval_steps_fork_switch_rollback_and_restart(
    make_server, tmp_path: Path
) -> None:
    server = make_server(TASK)
    cwd = tmp_path / "work"
    cwd.mkdir()
    t = spawn_chat(server, cwd)
    t.expect(r"\[session\] (\S+) · new")
    t.prompt()
    sid = (cwd / ".cli_session").read_text().strip()
    assert stat.S_IMODE((cwd / ".cli_session").stat().st_mode) == 0o600
    t.line("write a")
    t.expect(re.escape('xclaw wants to run [shell]: {"command":"echo a >> effects.txt"}'))
    t.expect(r"Approve\? \[y/N\]")
    t.line("y")
    t.expect(re.escape('xclaw uses [shell]: {"command":"echo a >> effects.txt"}'))
    t.expect(r"xclaw: Wrote a\.")
    t.prompt()
    t.line("next")
    t.expect(r"xclaw: Second answer\.")
    t.prompt()
    t.child.sendcontrol("c")
    t.expect(r"Ctrl\+C again")
    t.child.sendcontrol("c")
    assert t.wait_exit() == 0
    assert (server.workspace(sid) / "effects.txt").read_text() == "a\n"

    # Started again in the same directory: the same session, its history between markers.
    t = spawn_chat(server, cwd)
    t.expect(rf"\[session\] {re.escape(sid)} · Success")
    t.expect(r"\[history\] --- history starts ---")
    t.expect(r"\[history\] You: write a")
    t.expect(re.escape('[history] xclaw uses [shell]: {"command":"echo a >> effects.txt"}'))
    t.expect(r"\[history\] xclaw: Wrote a\.")
    t.expect(r"\[history\] You: next")
    t.expect(r"\[history\] xclaw: Second answer\.")
    t.expect(r"\[history\] --- history ends ---")
    t.prompt()

    t.line("/steps")
    t.expect(rf"Steps \(session: {re.escape(sid)}\):")
    t.expect(r"s0004\s+tool_call\s+shell\s+\{\"command\":\"echo a >> effects.txt\"\}")
    t.expect(r"/rollback s0006")
    t.prompt()

    t.line("/fork s0005 branch B")
    fork = t.expect(r"\[fork\] new session created: (\S+)").group(1)
    t.expect(rf"original session {re.escape(sid)} is unchanged")
    t.prompt()
    t.line(f"/switch {fork[:8]}")  # a unique prefix is enough
    t.expect(
        rf"\[session\] {re.escape(fork)} · Waiting for your instruction · 'branch B' · fork of {re.escape(sid)}"
    )
    t.expect(r"\[history\] --- history starts ---")
    t.expect(r"\[history\] xclaw: Wrote a\.")
    t.expect(r"\[history\] --- history ends ---")
    t.prompt()
    assert "Second answer" not in t.text[t.text.rindex("history starts") :]
    assert (cwd / ".cli_session").read_text().strip() == fork

    t.line("/rollback s0001")
    t.expect(r"\[rollback\] session reset to before step s0001 — send your new instruction")
    t.prompt()

    # The server dies and comes back: the client reconnects by itself and carries on.
    server.kill()
    t.expect(r"\[offline\]")
    server.start()
    # a rolled-back session waits for the next instruction; it is not "Running"
    t.expect(rf"\[session\] {re.escape(fork)} · Waiting for your instruction", timeout=20)
    t.prompt()
    t.line("/steps")
    t.expect(r"\(no steps yet\)")
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


def test_ctrl_c_cancels_the_run_and_a_second_quits(make_server, tmp_path: Path) -> None:
    server = make_server(
        [{"text": "Thinking slowly.", "sleep": 2}, {"text": "Fast now."}], approval="yolo"
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("think")
    # Ctrl+C once the run is in flight: the server has begun the (slow) model call.
    db = server.home / "xclaw.db"
    deadline = time.monotonic() + 30
    while not llm_call_running(db):
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    t.child.sendcontrol("c")
    t.expect(r"\[cancel\] stopping the run")
    t.expect(r"\[cancel\] run stopped", timeout=10)
    t.prompt()
    t.line("again")
    t.expect(r"xclaw: ")
    t.prompt()
    t.child.sendcontrol("c")
    t.child.sendcontrol("c")
    assert t.wait_exit() == 0


def test_ctrl_c_stops_a_running_command_now_and_the_session_waits(
    make_server, tmp_path: Path
) -> None:
    server = make_server(
        [
            {
                "text": "Napping.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 60"}}],
            },
            {"text": "Awake again."},
        ],
        approval="yolo",
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("nap")
    t.expect(r"xclaw uses \[shell\]")
    started = time.monotonic()
    t.child.sendcontrol("c")
    t.expect(r"\[cancel\] stopping the run now")
    t.expect(r"✗ \[shell\] cancelled by the user", timeout=15)
    t.expect(r"\[cancel\] run stopped; the session waits for your next instruction", timeout=15)
    assert time.monotonic() - started < 15  # not the command's 60 s
    t.prompt()
    t.line("/sessions")
    t.expect(r"Waiting")
    t.prompt()
    t.line("wake up")
    t.expect(r"xclaw: Awake again\.")
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


def run_piped(
    server: Server, cwd: Path, lines: list[str], *args: str, timeout: float = 40
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*xclaw_cmd(), "chat", "--url", server.http, *args],
        input="".join(line + "\n" for line in lines),
        cwd=cwd,
        env=clean_env(XCLAW_HOME=str(server.home)),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_piped_stdin_sends_one_line_per_turn(task_server: Server, tmp_path: Path) -> None:
    server = task_server
    r = run_piped(server, tmp_path, ["write a", "y", "/switch bad!id", "/steps 2", "next"])
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    sid = (tmp_path / ".cli_session").read_text().strip()
    # a refused /switch leaves the client where it was (/switch resolves ids on the
    # gateway, existing sessions only)
    assert "error (unknown_session): no session with id 'bad!id'" in out
    assert f"Steps (session: {sid}):" in out
    assert "You: write a" in out
    assert "Approve? [y/N] y" in out
    assert 'xclaw uses [shell]: {"command":"echo a >> effects.txt"}' in out
    # each line waited for the previous answer
    assert out.index("xclaw: Wrote a.") < out.index("You: /steps 2") < out.index("You: next")
    assert out[-1] == "xclaw: Second answer."
    assert "\x1b[" not in r.stdout  # no colour codes into a pipe


def test_piped_client_survives_a_server_restart_mid_run(make_server, tmp_path: Path) -> None:
    server = make_server(
        [
            {
                "text": "Slow step.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 2"}}],
            },
            {
                "text": "Retrying.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 2"}}],
            },
            {"text": "Finished after the restart."},
        ],
        approval="yolo",
    )
    proc = subprocess.Popen(
        [*xclaw_cmd(), "chat", "--url", server.http, "--new"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=clean_env(XCLAW_HOME=str(server.home)),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("do the slow thing\ny\n")
    proc.stdin.close()
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if line.startswith('xclaw uses [shell]: {"command":"sleep 2"}'):
            break
    server.kill(signal.SIGKILL)
    server.start()
    rest = proc.stdout.read()  # until the client exits (pytest-timeout guards a hang)
    proc.stdout.close()
    assert proc.wait(timeout=10) == 0
    out = seen + rest.splitlines()
    assert any(line.startswith("[offline]") for line in out)
    assert "[resume] detected interrupted tool_call, retrying..." in out
    assert any("may already have run" in line for line in out)
    assert "Approve? [y/N] y" in out
    assert out[-1] == "xclaw: Finished after the restart."


def _piped_chat(
    server: Server, cwd: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`xclaw chat` reading "/steps" from a pipe, with a home that holds no token file."""
    return subprocess.run(
        [*xclaw_cmd(), "chat", *args],
        input="/steps\n",
        cwd=cwd,
        env=clean_env(**{"XCLAW_HOME": str(cwd / "elsewhere"), "NO_COLOR": "1", **env}),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("how", "args", "env"),
    [
        ("no token", (), {}),
        ("--token", ("--token", "wrong-token"), {}),
        ("XCLAW_TOKEN", (), {"XCLAW_TOKEN": "wrong-token"}),
        ("?token=", ("--url", "URL?token=wrong-token"), {}),
    ],
)
def test_unauthorized_client_says_so_once_and_exits_2(
    task_server: Server, tmp_path: Path, how: str, args: tuple[str, ...], env: dict[str, str]
) -> None:
    server = task_server
    args = tuple(a.replace("URL", server.http + "/") for a in args)
    if "--url" not in args:
        args = ("--url", server.http, *args)
    r = _piped_chat(server, tmp_path, *args, **env)
    assert r.returncode == 2, (how, r)
    out = r.stdout + r.stderr
    assert out.count("unauthorized") == 1, out
    assert "--token" in out and "XCLAW_TOKEN" in out  # where a token comes from


def test_the_token_precedence_is_the_one_chat_help_states(
    task_server: Server, tmp_path: Path
) -> None:
    """--token, then the ?token= of --url, then XCLAW_TOKEN, then $XCLAW_HOME/token: each
    source wins over the ones after it, and --help lists them in that order."""
    server = task_server
    right, wrong = server.token, "wrong-token"
    home_file = {"XCLAW_HOME": str(server.home)}  # holds the right token file
    cases = [
        # (args, env, connects?)
        (("--url", server.http, "--token", right), {"XCLAW_TOKEN": wrong}, True),
        (("--url", f"{server.http}/?token={wrong}", "--token", right), {}, True),
        (("--url", f"{server.http}/?token={right}", "--token", wrong), {}, False),
        (("--url", f"{server.http}/?token={right}"), {"XCLAW_TOKEN": wrong}, True),
        (("--url", f"{server.http}/?token={wrong}"), {"XCLAW_TOKEN": right}, False),
        (("--url", server.http), {"XCLAW_TOKEN": right}, True),
        (("--url", server.http), {"XCLAW_TOKEN": wrong, **home_file}, False),
        (("--url", server.http), home_file, True),
    ]
    for args, env, connects in cases:
        r = _piped_chat(server, tmp_path, *args, **env)
        assert (r.returncode == 0) is connects, (args, env, r)
    help_text = subprocess.run(
        [*xclaw_cmd(), "chat", "--help"],
        env=clean_env(COLUMNS="300"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    token_help = " ".join(help_text[help_text.index("--token") :].split())
    order = [
        token_help.index(x) for x in ("--token", "?token=", "XCLAW_TOKEN", "$XCLAW_HOME/token")
    ]
    assert order == sorted(order), token_help


def test_help_lists_quit_and_a_bare_switch_gets_a_usage_line_like_the_others(
    task_server: Server, tmp_path: Path
) -> None:
    server = task_server
    r = subprocess.run(
        [*xclaw_cmd(), "chat", "--url", server.http, "--new"],
        input="/help\n/switch\n/title\n/fork\n",
        cwd=tmp_path,
        env=chat_env(server),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert any(line.strip().startswith("/quit") for line in lines), r.stdout
    usage = [line for line in lines if "usage:" in line]
    assert [u.split("usage: ")[1].split()[0] for u in usage] == ["/switch", "/title", "/fork"]
    # one shape for every command typed without its argument
    assert len({u.split("usage: ")[0] for u in usage}) == 1, usage


def test_new_with_a_title_keeps_it(make_server, tmp_path: Path) -> None:
    """`/new TITLE` names the session at once: it is kept even if nothing is said to it in
    this connection, and the first message does not rename it."""
    server = make_server(TASK)

    def chat(text: str) -> str:
        r = subprocess.run(
            [*xclaw_cmd(), "chat", "--url", server.http],
            input=text,
            cwd=tmp_path,
            env=chat_env(server),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert r.returncode == 0, r
        return r.stdout

    def titles() -> dict[str, str]:
        listed = subprocess.run(
            [*xclaw_cmd(), "sessions", "--json", "--db", str(server.home / "xclaw.db")],
            env=chat_env(server),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {s["sessionId"]: s["title"] for s in json.loads(listed)}

    chat("/new Release notes draft\n")  # and the client leaves
    sid = (tmp_path / ".cli_session").read_text().strip()
    assert titles() == {sid: "Release notes draft"}
    out = chat("write the notes\n")  # the same session, from .cli_session
    assert "Writing a." in out
    assert titles() == {sid: "Release notes draft"}


def test_no_server_says_how_to_start_one_then_connects_by_itself(
    make_server, tmp_path: Path
) -> None:
    # With no server running the client says so, and how to start one, once —
    # not a retry line per attempt — and attaches as soon as the server is up.
    server = make_server([{"text": "Hello there."}], approval="yolo")
    server.kill()
    t = spawn_chat(server, tmp_path, "--new")
    # `xclaw serve` as this machine's shells can type it (xclaw.terminal.invocation)
    t.expect(
        r"\[offline\] no xclaw server at http://127\.0\.0\.1:\d+ .*`[^`]*xclaw serve`", timeout=20
    )
    t.expect(r"Ctrl\+C quits\.")
    # Count the client's next attempts on a socket that hangs up at once (still no server):
    # once several have happened, none of them may have printed anything.
    with socket.create_server(("127.0.0.1", server.port)) as hangup:
        hangup.settimeout(30)
        for _ in range(3):
            conn, _ = hangup.accept()
            conn.close()
    # Each attempt's failure is handled before the next attempt starts, so whatever the first
    # two printed is in the terminal already: read it all.
    t.drain()
    assert t.text.count("[offline]") == 1
    server.start()
    t.expect(r"\[session\] \S+ · new", timeout=30)
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


def test_spinner_tab_completion_and_history_without_approval_answers(
    make_server, tmp_path: Path
) -> None:
    server = make_server(
        [
            {
                "text": "Slow thought.",
                "sleep": 2.5,
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi > f"}}],
            },
            {"text": "Wrote f."},
            {"text": "Again."},
        ],
        approval="ask",
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("write f please")
    # While the model thinks, a spinner counts the seconds (on the terminal only).
    t.expect(r"thinking · [12]s")
    t.expect(r"Approve\? \[y/N\]", timeout=20)
    t.line("y")
    t.expect(r"xclaw: Wrote f\.", timeout=20)
    t.prompt()
    # Up brings back the last message, not the approval's "y".
    t.child.send("\x1b[A")
    t.expect(r"write f please")
    t.child.send("\x15")  # Ctrl+U: clear the line
    # Tab completes slash commands and the step ids the client has seen.
    t.child.send("/roll\t")
    t.expect(r"/rollback")
    t.child.send("s000\t")  # several match: a menu of them, the latest first
    t.expect(r"s0005\s+s0004\s+s0003\s+s0002\s+s0001")
    t.child.send("\x15")
    t.line("/quit")
    assert t.wait_exit() == 0


def test_spinner_times_the_running_step_not_the_turn(make_server, tmp_path: Path) -> None:
    """The working line counts how long the step in flight has run: a command started after
    a slow model call and a long approval wait starts at 0 s, and so does the next model
    call after it."""
    server = make_server(
        [
            {
                "sleep": 3,
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 3; touch made.txt"}}],
            },
            {"text": "After the command.", "sleep": 3},
        ],
        approval="ask",
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("go")
    t.expect(r"thinking · 2s")
    t.expect(r"Approve\? \[y/N\]", timeout=20)
    time.sleep(4)  # the user takes a while to answer: not the command's time
    t.line("y")
    t.expect(r"running shell · \d+s", timeout=20)
    t.expect(r"thinking · \d+s", timeout=20)
    t.expect(r"xclaw: After the command\.", timeout=20)
    shell = [int(n) for n in re.findall(r"running shell · (\d+)s", t.text)]
    after = t.text[t.text.rindex("running shell") :]
    thinking = [int(n) for n in re.findall(r"thinking · (\d+)s", after)]
    # Turn time would be 7 s and more when the command starts, 10 s and more after it.
    assert shell and shell[0] <= 1 and max(shell) <= 5, shell
    assert thinking and thinking[0] <= 1 and max(thinking) <= 5, thinking
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


def test_session_option_takes_a_unique_prefix_and_never_creates_a_typo(
    make_server, tmp_path: Path
) -> None:
    # `xclaw chat --session PREFIX` attaches to the existing session; an id that
    # matches nothing is said so, and the client starts a new session instead of a typo'd one.
    server = make_server([{"text": "First answer."}, {"text": "Second answer."}], approval="yolo")
    r = run_piped(server, tmp_path, ["hello"])
    assert r.returncode == 0, r.stderr
    sid = (tmp_path / ".cli_session").read_text().strip()
    t = spawn_chat(server, tmp_path, "--session", sid[:7])
    t.expect(rf"\[session\] {re.escape(sid)} · Success")
    t.expect(r"\[history\] xclaw: First answer\.")
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0
    t = spawn_chat(server, tmp_path, "--session", "zz-typo")
    t.expect(r"error \(unknown_session\): no session with id 'zz-typo'")
    t.expect(r"starting a new session instead")
    t.expect(r"\[session\] (\S+) · new")
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0
    assert "zz-typo" not in (tmp_path / ".cli_session").read_text()


def test_ctrl_c_at_an_approval_prompt_goes_back_to_the_instruction_prompt(
    make_server, tmp_path: Path
) -> None:
    """Ctrl+C while xclaw asks "Approve?" stops the run; the stale question goes away and the
    next line typed is an instruction (sent to the model), not an answer to nothing."""
    server = make_server(
        [
            {
                "text": "Deleting.",
                "tool_calls": [{"name": "shell", "input": {"command": "rm -f notes.txt"}}],
            },
            {"text": "Next instruction heard."},
        ],
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("delete the notes")
    t.expect(r"Approve\? \[y/N\]")
    t.child.sendcontrol("c")
    t.expect(r"\[cancel\] run stopped", timeout=15)
    t.prompt()
    t.line("do something else")
    t.expect(r"xclaw: Next instruction heard\.")
    assert "no approval is waiting" not in t.text
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


def test_a_question_pending_across_a_server_restart_is_asked_again_in_full(
    make_server, tmp_path: Path
) -> None:
    """The server restarts while xclaw asks "Approve?": after the restored history the client
    shows the question again (what and why), so the prompt is never an orphan under the
    history, and the answer still counts."""
    server = make_server(
        [
            {
                "text": "Deleting.",
                "tool_calls": [{"name": "shell", "input": {"command": "rm -f notes.txt"}}],
            },
            {"text": "Deleted."},
        ],
    )
    t = spawn_chat(server, tmp_path, "--new")
    t.prompt()
    t.line("delete the notes")
    t.expect(r"xclaw wants to run \[shell\]")
    t.expect(r"Approve\? \[y/N\]")
    server.kill(signal.SIGKILL)
    server.start()
    t.expect(r"--- history ends ---", timeout=30)
    t.expect(r"xclaw wants to run \[shell\]", timeout=30)
    t.expect(r"Approve\? \[y/N\]")
    t.line("y")
    t.expect(r"xclaw: Deleted\.", timeout=30)
    t.prompt()
    t.line("/quit")
    assert t.wait_exit() == 0


NOTIFY_TOOL = '''
import xclaw


@xclaw.tool(idempotent=False)
def notify(message: str) -> str:
    """Send a message to the team channel (an effect outside the workspace)."""
    with open("sent.log", "a") as f:
        f.write(message + "\\n")
    return "sent"
'''


def test_rollback_and_fork_list_outside_effects_and_ask_first(tmp_path: Path) -> None:
    """A step whose effects reached outside the workspace (a Python tool that is not read-only,
    with no compensation) cannot be undone: /rollback and /fork across it name it and ask before
    doing anything."""
    root = tmp_path / "srv"
    root.mkdir()
    (root / "notify.py").write_text(NOTIFY_TOOL)
    turns = [
        {
            "text": "Telling the team.",
            "tool_calls": [{"name": "notify", "input": {"message": "hi"}}],
        },
        {"text": "Sent."},
    ]
    server = Server(root=root, script=write_script(root / "script.json", turns), approval="yolo")
    write_config = server.env

    def env_with_tool() -> dict[str, str]:
        env = write_config()
        with (root / "xclaw.yaml").open("a") as f:
            f.write("tools:\n  - notify:notify\n")
        return env

    server.env = env_with_tool  # type: ignore[method-assign]
    server.start()
    try:
        t = spawn_chat(server, tmp_path, "--new")
        t.prompt()
        t.line("tell the team")
        t.expect(r"xclaw: Sent\.")
        t.prompt()
        t.line("/rollback s0001")
        t.expect(r"\[rollback\] to before s0001: outside effects after it")
        t.expect(r"NOT undone — they stay done \(1\)")
        t.expect(r"s\d{4} notify: not undone \(irreversible\)")
        t.expect(r"1 outside effect\(s\) stay done\. Roll back anyway\? \[y/N\]")
        t.line("n")
        t.expect(r"\(no rollback: nothing was changed\)")
        t.prompt()
        t.line("/fork s0001")
        t.expect(
            r"\[fork\] in this session after that step, 1 step had effects outside the workspace"
        )
        t.expect(r"Fork anyway\? \[y/N\]")
        t.line("y")
        t.expect(r"\[fork\] ")
        t.prompt()
        t.line("/quit")
        assert t.wait_exit() == 0
        assert (root / "sent.log").read_text() == "hi\n"  # ran once; the refusal changed nothing
    finally:
        server.kill()
