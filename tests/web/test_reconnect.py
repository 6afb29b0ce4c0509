"""The server is SIGKILLed in the middle of a tool call while the page is open; it starts
again on the same port; the page reconnects by itself and the run resumes — asking first,
with the "may already have run" warning, before repeating the interrupted side effect."""

from __future__ import annotations

import signal

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COMMAND = "sleep 2; touch done.txt"


def test_kill_and_restart_server_while_the_page_is_open(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Starting the long step.",
                "tool_calls": [{"name": "shell", "input": {"command": COMMAND}}],
            },
            # After the restart the model re-issues the same call (resume note, dangling steps).
            {
                "text": "The step was interrupted; running it again.",
                "tool_calls": [{"name": "shell", "input": {"command": COMMAND}}],
            },
            {"text": "Resumed and finished."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    sid = app.session_id()

    app.send("run the long step")
    expect(app.tool_lines().first).to_have_attribute("data-state", "running")
    server.kill(signal.SIGKILL)

    banner = page.locator("#banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Connection to the xclaw server lost")
    expect(page.locator("#conn")).to_have_attribute("data-state", "waiting")
    expect(page.locator("#composer .send")).to_be_disabled()
    shot(page, "14-server-killed")

    server.start()  # same port, same database
    expect(page.locator("#conn")).to_have_attribute("data-state", "open", timeout=20_000)
    expect(banner).to_be_hidden()
    assert app.session_id() == sid
    # History re-rendered from the `history` frame; the resumed run says what happened.
    expect(page.locator(".restored-start")).to_be_visible()
    expect(app.messages).to_contain_text("run the long step")
    expect(app.messages).to_contain_text("[resume]")

    dialog = app.dialog()
    expect(dialog).to_contain_text(COMMAND)
    warning = dialog.locator(".warning")
    expect(warning).to_contain_text("may already have run")
    shot(page, "15-resumed-approval-may-have-run")
    dialog.get_by_role("button", name="Approve").click()

    expect(page.locator("#messages .msg.assistant.final").last).to_have_text(
        "Resumed and finished.", timeout=15_000
    )
    app.wait_idle()
    expect(app.status).to_have_text("Success")
    # The interrupted call is kept in the trace, marked interrupted (nothing recorded is lost).
    interrupted = page.locator('#trace .trace-node[data-type="tool_call"] .status-icon.interrupted')
    expect(interrupted).to_have_count(1)
    assert (server.workspace(sid) / "done.txt").exists()
    shot(page, "16-resumed-and-finished")


def test_refresh_while_a_command_runs_shows_it_running_not_interrupted(serve, new_page, shot):
    """A refresh is not a crash: the command still running on the server is shown running in
    the restored conversation (not as an "[interrupted]" error), and its result lands on the
    same line when it finishes."""
    server = serve(
        [
            {
                "text": "Starting the long step.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 4; echo finished"}}],
            },
            {"text": "All done."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    app.send("run the long step")
    expect(app.tool_lines().first).to_have_attribute("data-state", "running")

    app.reload()
    lines = app.tool_lines()
    expect(lines).to_have_count(1)
    expect(lines.first).to_have_attribute("data-state", "running")
    expect(app.messages).not_to_contain_text("[interrupted]")
    shot(app.page, "refresh-mid-command")

    expect(app.answers().last).to_contain_text("All done.", timeout=30_000)
    expect(lines).to_have_count(1)
    expect(lines.first).to_have_attribute("data-state", "completed")
    expect(lines.first).to_contain_text("finished")


def test_refresh_while_an_approval_waits_shows_the_call_pending_then_its_result(
    serve, new_page, shot
):
    """Opening (or refreshing) a session that waits for an approval: the call asked about is
    pending in the conversation, not a red "[not run]" error; approved, its result lands on
    that same line."""
    server = serve(
        [
            {
                "text": "Deleting.",
                "tool_calls": [
                    {"name": "shell", "input": {"command": "rm -f notes.txt; echo removed"}}
                ],
            },
            {"text": "Deleted."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("delete the notes")
    expect(app.dialog()).to_be_visible()
    app.reload()
    expect(app.dialog()).to_be_visible()
    lines = app.tool_lines()
    expect(lines).to_have_count(1)
    expect(lines.first).to_have_attribute("data-state", "running")
    expect(app.messages).not_to_contain_text("[not run]")
    shot(page, "refresh-while-approval-waits")
    app.dialog().get_by_role("button", name="Approve").click()
    expect(app.answers().last).to_contain_text("Deleted.")
    expect(lines).to_have_count(1)
    expect(lines.first).to_have_attribute("data-state", "completed")
    expect(lines.first).to_contain_text("removed")
