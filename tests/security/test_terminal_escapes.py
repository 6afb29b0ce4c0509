"""Model, tool and server text cannot drive the terminal of `xclaw chat` (or `xclaw steps`,
`export`): every control sequence is shown as visible stand-ins, only xclaw's own colours
reach the terminal as escape codes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from tests.writes import finish
from xclaw.store.steps.writes import AddStep, BeginStep
from xclaw.terminal.render import Renderer
from xclaw.terminal.text import SafeConsole, json_for_terminal, printable

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b[31mred\x1b[0m",  # recolour
    "\x1b]0;pwned title\x07",  # OSC: window title
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: write the clipboard
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b2J",  # C1 CSI, one byte
    "\x9d0;title\x9c",  # C1 OSC ... ST
    "\x1bP+q\x1b\\",  # DCS: terminal query
    'line\rxclaw wants to run [shell]: {"command":"ls"}',  # carriage return forgery
    "abc\x08\x08\x08XYZ",  # backspaces overwrite
    "\u202eevil\u202c",  # bidi override
    "\x00\x05\x7f",
]
# What our own styles may emit: SGR sequences only (colour, bold, dim, reset).
_OWN = re.compile(r"\x1b\[[0-9;]*m")


def render_colour(*frames: dict) -> str:
    buf = io.StringIO()
    # as on a real terminal: styles are emitted
    console = SafeConsole(
        file=buf,
        force_terminal=True,
        color_system="standard",
        highlight=False,
        soft_wrap=True,
        emoji=False,
    )
    r = Renderer(console)
    for f in frames:
        r.frame(f)
    r.approval(
        {
            "type": "approval_request",
            "name": "shell",
            "input": {"command": HOSTILE[0]},
            "reason": HOSTILE[3],
        }
    )
    r.end_stream()
    return buf.getvalue()


def _no_foreign_controls(out: str) -> None:
    rest = _OWN.sub("", out)
    bad = [c for c in rest if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert not bad, [hex(ord(c)) for c in bad]
    for b in ("\u202e", "\u202c"):
        assert b not in rest


def test_every_frame_kind_shows_hostile_text_inertly() -> None:
    frames = []
    for h in HOSTILE:
        frames += [
            {"type": "delta", "content": h},
            {"type": "reply", "content": "done " + h},
            {"type": "tool", "name": "shell", "state": "running", "input": {"command": h}},
            {"type": "tool", "name": "shell", "state": "completed", "output": h},
            {"type": "tool", "name": h, "state": "failed", "output": h},
            {"type": "notice", "content": h},
            {"type": "error", "code": h, "content": h},
            {"type": "session", "sessionId": "s" + h, "title": h, "status": "Success"},
            {
                "type": "history",
                "messages": [{"kind": "user", "text": h}, {"kind": "assistant", "text": h}],
            },
        ]
    out = render_colour(*frames)
    assert _OWN.search(out), "colour was on: our own styles are there"
    _no_foreign_controls(out)
    assert "␛[2J" in out and "␛]52;" in out  # shown, so the user sees the attempt


def test_stand_ins_keep_length_so_styles_stay_aligned() -> None:
    for h in HOSTILE:
        assert len(printable(h)) == len(h)
    assert printable("plain text\n\twith tab") == "plain text\n\twith tab"
    assert printable("héllo ✓ 日本") == "héllo ✓ 日本"


def test_json_printed_by_the_cli_escapes_c1_and_bidi() -> None:
    data = {"x": "".join(HOSTILE)}
    text = json_for_terminal(data)
    assert json.loads(text) == data
    _no_foreign_controls(text)


def test_cli_steps_and_export_print_no_control_sequences(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from xclaw.cli.main import _register, cli
    from xclaw.store import open_store

    db = tmp_path / "x.db"
    store = open_store(str(db))
    s = store.record.create_session(title="t\x1b]0;owned\x07")
    store.close()
    _register()
    runner = CliRunner()
    for args in (["sessions", "--db", str(db)], ["export", s.session_id, "--db", str(db)]):
        res = runner.invoke(cli, args, color=True)
        assert res.exit_code == 0, res.output
        _no_foreign_controls(res.output)


def test_every_store_command_prints_c1_and_bidi_inertly(tmp_path: Path) -> None:
    """Found by the second campaign: `xclaw export SESSION` (JSON Lines) printed a title's
    C1 controls (`\\x9b` is a one-byte CSI) and bidi overrides raw."""
    from click.testing import CliRunner

    from xclaw.cli.main import _register, cli
    from xclaw.store import open_store

    db = tmp_path / "x.db"
    store = open_store(str(db))
    s = store.record.create_session(title="".join(HOSTILE))
    store.close()
    _register()
    runner = CliRunner()
    for args in (
        ["sessions"],
        ["sessions", "--json"],
        ["export", s.session_id],
        ["export", "--all"],
        ["export", s.session_id, "--json"],
        ["steps", s.session_id],
        ["trace", s.session_id],
    ):
        res = runner.invoke(cli, [*args, "--db", str(db)], color=True)
        assert res.exit_code == 0, (args, res.output)
        _no_foreign_controls(res.output)
    # the JSON Lines still read back as the same title
    res = runner.invoke(cli, ["export", s.session_id, "--db", str(db)])
    assert json.loads(res.output.splitlines()[0])["title"] == "".join(HOSTILE)


def test_diff_of_two_sessions_prints_hostile_answers_inertly(tmp_path: Path) -> None:
    """Found by the second campaign: `xclaw diff A B` printed the two final answers' diff
    (model text) raw, and `--json` let C1 controls and bidi overrides through."""
    import click
    from click.testing import CliRunner

    from xclaw.cli import commands_store, commands_workspace
    from xclaw.store.sqlite.store import SQLiteStore
    from xclaw.store.steps.model import NewStep, Status, StepType

    db = tmp_path / "x.db"
    with SQLiteStore(db) as store:
        for sid, answer in (("left", "plain"), ("right", "".join(HOSTILE))):
            store.record.create_session(session_id=sid)
            u = store.record.write(
                AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go"))
            )
            lm = store.record.write(
                BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
            )
            store.record.write(
                finish(sid, lm.seq, output_data={"text": answer}, session_status=Status.SUCCESS)
            )
    group = click.Group("xclaw")
    commands_store.register(group)
    commands_workspace.register(group)
    ws = tmp_path / "ws"
    for sid in ("left", "right"):
        (ws / sid).mkdir(parents=True)
        (ws / sid / "f.txt").write_text(f"{sid}\n")  # (a file diff goes as is into a pipe)
    for extra in ([], ["--json"]):
        r = CliRunner().invoke(
            group,
            ["diff", "left", "right", "--db", str(db), "--workspace", str(ws), *extra],
            color=True,
        )
        assert r.exit_code == 0, r.output
        assert "plain" in r.output or extra
        _no_foreign_controls(r.output)
