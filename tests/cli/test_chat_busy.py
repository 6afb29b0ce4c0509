"""`xclaw chat` takes input while a run is in flight (docs/cli.md; docs/protocol.md, "Input while
a run is busy"): in a real pseudo-terminal (tmux), against a real `xclaw serve` with the
scripted model. Lines typed beside the run are queued (`/queue TEXT`, or a plain line once
`/busy queue` says so), listed and cancellable, refused `busy` under the default policy
without stopping the run; the run's output keeps printing whole lines above the prompt, and
the queued messages run after it, in order — what the screen shows, and what the record
holds."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_chat import chat_env
from tests.gateway.harness import Server, write_script, xclaw_cmd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

SCRIPT = [
    {"text": "Working.", "tool_calls": [{"name": "shell", "input": {"command": "sleep 12"}}]},
    {"text": "First done."},
    {"text": "Second done."},
    {"text": "Fourth done."},
]


class Pane:
    """One tmux session on a server of its own (socket), running `xclaw chat`."""

    def __init__(self, root: Path, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"xclaw-busy-{time.monotonic_ns()}"
        launcher = root / "chat.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        launcher.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(root))}\n"
            f"exec {' '.join(shlex.quote(c) for c in command)}\n"
        )
        launcher.chmod(0o755)
        self.tmux("new-session", "-d", "-s", "chat", "-x", "160", "-y", "45", str(launcher))

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
        ).stdout

    def screen(self) -> list[str]:
        """The pane as shown, scrollback included, trailing blanks dropped."""
        text = self.tmux("capture-pane", "-p", "-J", "-t", "chat", "-S", "-400")
        rows = [row.rstrip() for row in text.splitlines()]
        while rows and not rows[-1]:
            rows.pop()
        return rows

    def wait(self, pred: object, what: str, timeout: float = 60.0) -> list[str]:
        deadline = time.monotonic() + timeout
        rows: list[str] = []
        while time.monotonic() < deadline:
            rows = self.screen()
            if callable(pred) and pred(rows):
                return rows
            time.sleep(0.2)
        raise AssertionError(f"not seen: {what}; the pane:\n" + "\n".join(rows))

    def seen(self, text: str, timeout: float = 60.0) -> list[str]:
        return self.wait(lambda rows: any(text in r for r in rows), repr(text), timeout)

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", line)
        self.tmux("send-keys", "-t", "chat", "Enter")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "srv"
    root.mkdir()
    s = Server(root=root, script=write_script(root / "script.json", SCRIPT), approval="yolo")
    s.start()
    yield s
    s.kill()


def _inputs(server: Server) -> list[str]:
    from xclaw.store import Access, open_store

    with open_store(server.home / "xclaw.db", access=Access.READ) as store:
        (session,) = store.record.list_sessions()
        return [
            str(s.input_data)
            for s in store.record.steps(session.session_id)
            if s.step_type.value == "user_input"
        ]


def test_lines_typed_while_the_agent_works_are_queued_listed_cancelled_and_run_in_order(
    server: Server, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = chat_env(server)
    env.pop("COLUMNS", None)
    pane = Pane(work, [*xclaw_cmd(), "chat", "--url", server.http, "--new"], env)
    try:
        pane.seen("You:")
        pane.type("first")
        # The prompt stays while the run is in flight, under the working line.
        pane.seen("running shell")
        pane.seen("You (busy):")
        # The default policy (reject): refused, and the run goes on.
        pane.type("plain words")
        pane.seen("error (busy)")
        pane.type("/queue second")
        pane.seen("1. [queue] “second”")
        pane.type("/queue third")
        pane.seen("2. [queue] “third”")
        pane.type("/unqueue 2")
        pane.seen("[queue] cancelled 1 waiting message")
        # The session's policy, set beside the run: a plain line is now queued.
        pane.type("/busy queue")
        pane.seen("[busy]")
        pane.type("fourth")
        pane.seen("2. [queue] “fourth”")
        rows = pane.seen("running shell")  # still the same run
        assert not any("First done" in r for r in rows)

        rows = pane.seen("xclaw: Fourth done.", timeout=90)
        rows = pane.wait(
            lambda rows: rows and rows[-1].startswith("You:"), "the idle prompt at the bottom"
        )
        text = "\n".join(rows)
        # Each answer on a line of its own, in order, after the run it waited for.
        answers = [r for r in rows if r.startswith("xclaw: ")]
        assert answers == [
            "xclaw: Working.",
            "xclaw: First done.",
            "xclaw: Second done.",
            "xclaw: Fourth done.",
        ], text
        assert "nothing waits any more" in text
        # What was typed beside the run stays, as typed; nothing else of that prompt did.
        typed = [r for r in rows if "You (busy):" in r]
        assert typed == [
            "You (busy): plain words",
            "You (busy): /queue second",
            "You (busy): /queue third",
            "You (busy): /unqueue 2",
            "You (busy): /busy queue",
            "You (busy): fourth",
        ], text
        assert sum(r.startswith("You:") for r in rows) == 2, text  # the first and the last
        assert not any("thinking ·" in r or "running shell ·" in r for r in rows), text
    finally:
        pane.close()
    assert _inputs(server) == ["first", "second", "fourth"]
