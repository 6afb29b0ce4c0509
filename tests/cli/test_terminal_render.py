"""What `xclaw chat` prints for each server frame (the original tutorial's terminal format)."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest
from rich.console import Console

from xclaw.cli.chat import read_session_file, write_session_file, ws_url
from xclaw.terminal.render import HISTORY_END, HISTORY_START, Renderer, history_lines


def render(*frames: dict) -> str:
    buf = io.StringIO()
    r = Renderer(Console(file=buf, highlight=False, soft_wrap=True, no_color=True, width=60))
    for f in frames:
        r.frame(f)
    r.end_stream()
    return buf.getvalue()


def test_streamed_answer_is_one_xclaw_line_and_the_reply_is_not_repeated() -> None:
    out = render(
        {"type": "delta", "content": "All "},
        {"type": "delta", "content": "done."},
        {"type": "reply", "content": "All done."},
    )
    assert out == "xclaw: All done.\n"


def test_reply_without_deltas() -> None:
    assert render({"type": "reply", "content": "hi"}) == "xclaw: hi\n"


def test_text_before_a_tool_call_ends_its_line() -> None:
    out = render(
        {"type": "delta", "content": "Let me look."},
        {
            "type": "tool",
            "stepId": "s0003",
            "name": "shell",
            "input": {"command": "ls"},
            "state": "running",
        },
        {
            "type": "tool",
            "stepId": "s0003",
            "name": "shell",
            "input": {"command": "ls"},
            "state": "completed",
            "output": "a.txt\nb.txt",
        },
        {"type": "reply", "content": "Two files."},
    )
    assert out.splitlines() == [
        "xclaw: Let me look.",
        'xclaw uses [shell]: {"command":"ls"}',
        "  ↳ a.txt …",
        "xclaw: Two files.",
    ]


def test_long_lines_are_not_wrapped() -> None:
    long = "x" * 300
    out = render({"type": "tool", "name": "shell", "input": {"command": long}, "state": "running"})
    assert out.count("\n") == 1 and long in out


def test_history_between_markers_tutorial_content_only() -> None:
    content = json.dumps(
        [{"role": "user", "content": "list files"}, {"role": "assistant", "content": "a.ts\nb.ts"}]
    )
    out = render({"type": "history", "content": content})
    assert out.splitlines() == [
        HISTORY_START,
        "[history] You: list files",
        "[history] xclaw: a.ts",
        "[history]   b.ts",
        HISTORY_END,
    ]


def test_history_structured_messages_show_tool_calls() -> None:
    msgs = [
        {"kind": "user", "text": "count"},
        {
            "kind": "assistant",
            "text": "",
            "tool_calls": [{"id": "c1", "name": "shell", "input": {"command": "wc -l"}}],
        },
        {"kind": "tool_result", "tool_call_id": "c1", "name": "shell", "content": "3"},
        {"kind": "assistant", "text": "3 lines", "tool_calls": []},
    ]
    assert history_lines({"type": "history", "content": "[]", "messages": msgs}) == [
        "You: count",
        'xclaw uses [shell]: {"command":"wc -l"}',
        "xclaw: 3 lines",
    ]


def test_empty_history_prints_nothing() -> None:
    assert render({"type": "history", "content": "[]", "messages": []}) == ""


def test_notice_error_and_unknown_frames() -> None:
    out = render(
        {"type": "notice", "content": "[resume] detected interrupted tool_call, retrying..."},
        {"type": "error", "code": "busy", "content": "a run is in flight"},
        {"type": "step", "step": {"id": "s0001"}},
        {"type": "whatever"},
    )
    assert out.splitlines() == [
        "[resume] detected interrupted tool_call, retrying...",
        "error (busy): a run is in flight",
    ]


def test_approval_warns_when_maybe_repeated() -> None:
    buf = io.StringIO()
    r = Renderer(Console(file=buf, no_color=True, soft_wrap=True))
    r.approval(
        {
            "type": "approval_request",
            "stepId": "s0007",
            "name": "shell",
            "input": {"command": "rm x"},
            "reason": "shell needs approval",
            "maybeRepeated": True,
        }
    )
    text = buf.getvalue()
    assert 'xclaw wants to run [shell]: {"command":"rm x"}' in text
    assert "may already have run" in text
    buf2 = io.StringIO()
    Renderer(Console(file=buf2, no_color=True)).approval(
        {"name": "shell", "input": {}, "maybeRepeated": False}
    )
    assert "may already have run" not in buf2.getvalue()


@pytest.mark.parametrize(
    "given, url, token",
    [
        ("http://127.0.0.1:3000/?token=abc", "ws://127.0.0.1:3000/ws", "abc"),
        ("127.0.0.1:3000", "ws://127.0.0.1:3000/ws", None),
        ("ws://h:1/ws", "ws://h:1/ws", None),
        ("https://gw.example/xclaw/", "wss://gw.example/xclaw/ws", None),
    ],
)
def test_ws_url(given: str, url: str, token: str | None) -> None:
    assert ws_url(given) == (url, token)


def test_ws_url_rejects_other_schemes() -> None:
    with pytest.raises(ValueError):
        ws_url("ftp://x")


def test_session_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / ".cli_session"
    assert read_session_file(path) is None
    write_session_file(path, "abc123")
    assert read_session_file(path) == "abc123"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_session_file(path, "def")
    assert read_session_file(path) == "def"


def test_markdown_answers_are_rendered_on_a_terminal_and_plain_in_a_pipe() -> None:
    # On a terminal a Markdown answer is shown rendered (the streamed raw text is
    # erased and redrawn); a pipe keeps the tutorial's plain `xclaw: …` text.
    answer = "Here is **bold** and a list:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=60, height=40, color_system=None)
    r = Renderer(console)
    assert r.markdown
    r.frame({"type": "delta", "content": answer})
    r.frame({"type": "reply", "content": answer})
    out = buf.getvalue()
    rendered = out[out.rindex("\x1b[J") :]  # what follows the erase of the streamed text
    assert "**" not in rendered and "bold" in rendered
    assert "• one" in rendered and "• two" in rendered
    assert " a  b " in rendered and "────" in rendered and "|---|" not in rendered  # a table
    assert (
        render({"type": "delta", "content": answer}, {"type": "reply", "content": answer}).count(
            "**bold**"
        )
        == 1
    )


def test_a_markdown_link_shows_its_target_and_no_escape_reaches_the_terminal() -> None:
    buf = io.StringIO()
    r = Renderer(Console(file=buf, force_terminal=True, width=80, height=40, color_system=None))
    r.frame(
        {
            "type": "reply",
            "content": "see [the docs](https://evil.example/x) and `\x1b]0;pwned\x07`",
        }
    )
    out = buf.getvalue()
    assert "evil.example" in out and "\x1b]8;" not in out and "\x1b]0;" not in out


def test_history_answers_are_rendered_markdown_on_a_terminal_and_plain_in_a_pipe() -> None:
    # The conversation shown again after /switch, /rollback or a reconnect reads like the live
    # one: Markdown rendered on a terminal (each line still marked [history]), plain in a pipe.
    answer = (
        "Here is **bold**:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```"
    )
    frame = {
        "type": "history",
        "messages": [
            {"kind": "user", "text": "show **me**"},
            {
                "kind": "assistant",
                "text": answer,
                "tool_calls": [{"id": "c1", "name": "shell", "input": {"command": "ls"}}],
            },
            {"kind": "assistant", "text": "plain answer"},
        ],
    }
    buf = io.StringIO()
    r = Renderer(Console(file=buf, force_terminal=True, width=60, height=40, color_system=None))
    r.frame(frame)
    lines = buf.getvalue().splitlines()
    assert (
        lines[0] == "[history] --- history starts ---"
        and lines[-1] == "[history] --- history ends ---"
    )
    assert all(line.startswith("[history]") for line in lines)
    body = "\n".join(lines)
    assert "[history] You: show **me**" in body  # what the user typed is shown as typed
    assert "**bold**" not in body and "bold" in body
    assert "• one" in body and "|---|" not in body and "```" not in body
    assert '[history] xclaw uses [shell]: {"command":"ls"}' in body
    assert "[history] xclaw: plain answer" in body
    piped = render(frame)
    assert "**bold**" in piped and "|---|" in piped


def test_a_compaction_summary_in_the_history_is_not_shown_as_typed_by_the_user() -> None:
    frame = {
        "type": "history",
        "messages": [
            {"kind": "summary", "text": "The user asked for a release note.\nDetails follow."},
            {"kind": "user", "text": "go on"},
        ],
    }
    out = render(frame)
    assert "[history] ▸ earlier conversation, summarised (" in out
    assert "The user asked for a release note. …" in out
    assert out.count("You: ") == 1 and "[history] You: go on" in out


def test_the_spinner_line_never_wraps_in_a_narrow_terminal() -> None:
    # A wrapped spinner line cannot be erased with one carriage return: every tick would leave
    # a line behind. A long tool name (MCP tools have them) is cut to the terminal's width.
    import re

    from xclaw.cli.chat_spinner import Spinner

    buf = io.StringIO()
    spinner = Spinner(buf, enabled=True, columns=lambda: 40)
    spinner.start("running mcp__filesystem__read_multiple_files_with_a_long_name")
    spinner.draw()
    visible = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", buf.getvalue())
    assert len(visible) <= 39, visible
    assert visible.startswith(tuple("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")) and "…" in visible


def test_a_shared_session_shows_who_sent_what() -> None:
    """docs/teams.md: in a session shared by a team, another member's messages carry their
    name — in the history and as they arrive live; this client's own stay `You:`."""
    history = {
        "type": "history",
        "content": "[]",
        "messages": [
            {"kind": "user", "text": "first", "user": "alice"},
            {"kind": "assistant", "text": "ok", "tool_calls": []},
            {"kind": "user", "text": "second", "user": "bob"},
        ],
    }
    assert history_lines(history, me="bob") == ["alice: first", "xclaw: ok", "You: second"]
    out = render(
        {"type": "session", "sessionId": "s", "status": "Success", "user": "bob"},
        history,
        {
            "type": "step",
            "step": {
                "type": "user_input",
                "agent": "main",
                "input": "third\x1b[31m",
                "output": {"by": {"kind": "person", "via": "websocket", "user": "alice"}},
            },
        },
        {
            "type": "step",
            "step": {
                "type": "user_input",
                "agent": "main",
                "input": "mine",
                "output": {"by": {"kind": "person", "via": "websocket", "user": "bob"}},
            },
        },
    )
    approved = render(
        {"type": "session", "sessionId": "s", "status": "Paused", "user": "bob"},
        {
            "type": "step",
            "step": {
                "type": "system_alert",
                "name": "approval",
                "status": "completed",
                "output": {
                    "approved": True,
                    "why": "approved by alice (web page)",
                    "by": {"kind": "person", "client": "web", "user": "alice"},
                },
            },
        },
    )
    assert "[approval] approved by alice (web page)" in approved
    assert "[history] alice: first" in out and "[history] You: second" in out
    assert "alice: third" in out and "\x1b" not in out
    assert "mine" not in out  # what this client typed is on the screen already


def test_the_queue_is_a_line_per_waiting_message_numbered_for_unqueue() -> None:
    waiting = {
        "type": "queue",
        "sessionId": "s",
        "queued": [
            {"id": "m-2", "busy": "queue", "content": "then   this", "at": 1},
            {"id": "m-3", "busy": "steer", "content": "x" * 80, "at": 2, "user": "ann"},
        ],
    }
    out = render(
        {"type": "queue", "sessionId": "s", "queued": []}, waiting, {**waiting, "queued": []}
    )
    assert out.splitlines() == [
        "[queue] 2 waiting (/unqueue N cancels one):",
        "  1. [queue] “then this”",
        "  2. [steer] “" + "x" * 69 + "…” · ann",
        "[queue] nothing waits any more",
    ]


@pytest.mark.parametrize("whole_lines", [False, True])
def test_a_queue_line_between_the_streamed_answer_and_its_reply_does_not_repeat_it(
    whole_lines: bool,
) -> None:
    """The queue's frame can come after an answer's deltas and before its reply (the run's
    end hands over to the next message): its line ends the stream, and the reply, the same
    text, is not printed a second time."""
    buf = io.StringIO()
    r = Renderer(Console(file=buf, highlight=False, soft_wrap=True, no_color=True, width=60))
    r.whole_lines = whole_lines
    waiting = {"type": "queue", "sessionId": "s", "queued": [{"id": "m", "content": "next"}]}
    for f in (
        waiting,
        {"type": "delta", "content": "First done."},
        {**waiting, "queued": []},
        {"type": "reply", "content": "First done."},
        {"type": "delta", "content": "Next done."},
        {"type": "reply", "content": "Next done."},
        {"type": "reply", "content": "A reply never streamed."},
    ):
        r.frame(f)
    r.end_stream()
    assert [row for row in buf.getvalue().splitlines() if row.startswith("xclaw")] == [
        "xclaw: First done.",
        "xclaw: Next done.",
        "xclaw: A reply never streamed.",
    ]


# --- messages a schedule or a webhook sent (docs/schedules.md, "In the clients") -------------


def _fired_step(fire_id: str, text: str, by: str | None = None) -> dict:
    out: dict = {"messageId": fire_id}
    if by is not None:
        out["by"] = {"kind": "person", "user": by}
    step = {"id": "s0003", "type": "user_input", "agent": "main", "status": "completed"}
    return {"type": "step", "step": {**step, "input": text, "output": out}}


def test_a_fired_message_is_shown_under_what_fired_it_live() -> None:
    out = render(
        _fired_step("schedule.sch0a1b2c3d4e5.1796720400000", "Summarise the day"),
        _fired_step("hook.ci.build-7", "Build green\non main", by="alice"),
        # A person's own message (no fire) stays unshown live: they typed it.
        {"type": "step", "step": {**_fired_step("m-1", "hi")["step"], "output": {}}},
    )
    assert out.splitlines() == [
        "⏰ schedule sch0a1b2c3d4e5 · 2026-12-08 09:00:00Z",
        "  Summarise the day",
        "↪ hook ci · delivery build-7",
        "  Build green",
        "  on main",
    ]


def test_a_fired_message_is_labelled_in_the_history_too() -> None:
    frame = {
        "type": "history",
        "messages": [
            {"kind": "user", "text": "hello"},
            {"kind": "user", "text": "Ping", "fire": "schedule.sch01.1577836800000"},
            {"kind": "user", "text": "x", "user": "bob", "fire": "hook.deploy.d1"},
        ],
    }
    assert history_lines(frame) == [
        "You: hello",
        "⏰ schedule sch01 · 2020-01-01 00:00:00Z",
        "  Ping",
        "↪ hook deploy · delivery d1",
        "  x",
    ]
    shown = render(frame)
    assert "[history] ⏰ schedule sch01 · 2020-01-01 00:00:00Z\n[history]   Ping\n" in shown


def test_a_hostile_webhook_body_cannot_drive_the_terminal() -> None:
    body = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil\rxclaw: approved"
    out = render(_fired_step("hook.ci.d\x1b[1m", body))
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    assert "\u202e" not in out
    assert out.splitlines()[0] == "↪ hook ci · delivery d␛[1m"
    assert "␛[2J␛]0;pwned␇" in out
    # A carriage return cannot pull "xclaw: approved" over the label's line: it is its own.
    assert all(line.startswith(("↪", "  ")) for line in out.splitlines())


def test_ids_that_are_no_fire_are_not_labelled() -> None:
    from xclaw.terminal.render import fire_label

    for mid in (None, 7, "", "m-1", "schedule.", "schedule.x", "hook.ci", "other.a.b"):
        assert fire_label(mid) is None, mid
    assert fire_label("schedule.s.notanumber") == "⏰ schedule s · tick notanumber"
