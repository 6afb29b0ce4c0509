"""Time travel in a real browser: rollback from the trace tree; fork, switch, continue on the
branch, and compare the two branches side by side."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_rollback_from_the_tree_deletes_the_later_steps(serve, new_page, shot):
    server = serve(
        [
            {"text": "First answer."},
            {
                "text": "Writing a file.",
                "tool_calls": [
                    {"name": "write_file", "input": {"path": "notes.txt", "content": "two"}}
                ],
            },
            {"text": "File written."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("first task", "First answer.")
    app.send_and_wait("second task", "File written.")
    app.expect_step_ids(["s0001", "s0002", "s0003", "s0004", "s0005", "s0006"])

    node = app.open_step("s0003")
    expect(node.locator(".trace-detail")).to_contain_text("second task")
    node.get_by_role("button", name="Roll back to before").click()
    dialog = app.dialog()
    expect(dialog).to_contain_text("Rollback to before s0003?")
    expect(dialog).to_contain_text("4 steps")
    expect(dialog).to_contain_text("s0003\u2013s0006")
    expect(dialog).to_contain_text("workspace files")
    shot(page, "09-rollback-confirm")
    dialog.get_by_role("button", name="Delete 4 steps").click()

    # At once: the later steps are gone from the tree and the conversation.
    expect(page.locator("#trace .trace-node")).to_have_count(2)
    app.expect_step_ids(["s0001", "s0002"])
    expect(app.messages).not_to_contain_text("second task")
    expect(app.messages).not_to_contain_text("File written.")
    expect(app.messages).to_contain_text("First answer.")
    expect(app.messages).to_contain_text("[rollback] session reset to before step s0003")
    expect(page.locator(".toast")).to_contain_text("4 steps deleted")
    shot(page, "10-after-rollback")

    # The scripted model replays by position: the rewound session is at its second turn again.
    app.send_and_wait("a new direction", "File written.")
    expect(app.messages).not_to_contain_text("second task")
    expect(page.locator('#trace .trace-node[data-type="user_input"]')).to_have_count(2)
    expect(page.locator('#trace .trace-node[data-type="user_input"]').last).to_contain_text(
        "a new direction"
    )


def test_fork_switch_continue_and_compare(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Making a plan.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo plan ready"}}],
            },
            {"text": "The plan is ready."},
            {
                "text": "Checking the clock.",
                "tool_calls": [{"name": "shell", "input": {"command": "date +%s%N"}}],
            },
            {"text": "Finished this branch."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("make a plan", "The plan is ready.")
    app.send_and_wait("carry on with path A", "Finished this branch.")
    parent = app.session_id()
    expect(page.locator("#compare-btn")).to_be_disabled()  # nothing to compare with yet

    node = app.open_step("s0004")
    node.get_by_role("button", name="Fork from here").click()
    dialog = app.dialog()
    expect(dialog).to_contain_text("Fork from s0004")
    expect(dialog).to_contain_text("up to and including s0004")
    dialog.get_by_role("textbox").fill("Path B")
    dialog.get_by_role("button", name="Create fork").click()

    offer = app.dialog()
    expect(offer).to_contain_text("Fork created")
    expect(offer).to_contain_text("Path B")
    # The fork is in the sidebar at once, nested under its parent.
    fork_item = page.locator(f'.session-item[data-session="{parent}"] .forks .session-item.fork')
    expect(fork_item).to_have_count(1)
    expect(fork_item).to_contain_text("Path B")
    shot(page, "11-fork-created")
    offer.get_by_role("button", name="Switch to the fork").click()

    expect(page.locator("#session-title")).to_have_text("Path B")
    expect(page.locator("#fork-info")).to_contain_text("fork of")
    fork = app.session_id()
    assert fork != parent
    # The branch has the history up to and including s0004 and nothing after it.
    expect(page.locator(".restored-start")).to_be_visible()
    expect(app.messages).to_contain_text("The plan is ready.")
    expect(app.messages).not_to_contain_text("carry on with path A")
    app.expect_step_ids(["s0001", "s0002", "s0003", "s0004"])

    app.send_and_wait("carry on with path B", "Finished this branch.")
    shot(page, "12-fork-continued")

    page.locator("#compare-btn").click()
    view = page.locator("#compare")
    expect(view).to_be_visible()
    expect(page.locator(".branch-select").first).to_have_value(parent)
    expect(page.locator(".branch-select").last).to_have_value(fork)
    expect(view.locator(".compare-shared summary")).to_contain_text("s0001\u2013s0004")
    rows = view.locator(".compare-row")
    expect(rows).to_have_count(4)  # s0005..s0008 on both sides
    # The user inputs and the clock readings differ; the rest is the same. (Rows are
    # aligned by content and marked same / changed / only-left / only-right.)
    expect(view.locator('.compare-row[data-seq="5"]')).to_have_class(
        "compare-grid compare-row changed"
    )
    expect(view.locator('.compare-row[data-seq="5"]')).to_contain_text("carry on with path A")
    expect(view.locator('.compare-row[data-seq="5"]')).to_contain_text("carry on with path B")
    expect(view.locator('.compare-row[data-seq="7"]')).to_have_class(
        "compare-grid compare-row changed"
    )
    expect(view.locator('.compare-row[data-seq="7"] .cell-output.field-differs')).to_have_count(2)
    expect(view.locator('.compare-row[data-seq="6"]')).to_have_class(
        "compare-grid compare-row same"
    )
    expect(view.locator(".compare-legend")).to_contain_text(
        "2 same, 2 changed, 0 only left, 0 only right"
    )
    expect(view.locator(".compare-answer").first).to_contain_text("Finished this branch.")
    shot(page, "13-compare", full_page=False)

    # Back to the chat; the original tutorial's way of switching branches works too: change the
    # stored session id and reload.
    view.get_by_role("button", name="Back to chat").click()
    expect(view).to_be_hidden()
    page.evaluate(f"localStorage.setItem('xclaw_session_id', '{parent}')")
    app.reload()
    assert app.session_id() == parent
    expect(app.messages).to_contain_text("carry on with path A")
    expect(app.messages).not_to_contain_text("carry on with path B")


def test_compare_aligns_branches_by_content_and_diffs_the_answers(serve, new_page, shot):
    """One branch does an extra step first; the step both branches then take lines
    up as "same" instead of every later row showing ≠; the final answers get a line diff."""
    import json

    import httpx

    server = serve(
        [
            {
                "text": "Starting.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo base"}}],
            },
            {"text": "Base done."},
        ],
        approval="yolo",
    )
    # The scripted model's branches: what it does depends on the instruction (path A / B).
    server.script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "Starting.",
                        "tool_calls": [{"name": "shell", "input": {"command": "echo base"}}],
                    },
                    {"text": "Base done."},
                ],
                "branches": [
                    {
                        "when": "path a",
                        "turns": [
                            {
                                "text": "A.",
                                "tool_calls": [
                                    {"name": "shell", "input": {"command": "echo shared step"}}
                                ],
                            },
                            {"text": "Result:\nline one\nline two A"},
                        ],
                    },
                    {
                        "when": "path b",
                        "turns": [
                            {
                                "text": "B first.",
                                "tool_calls": [
                                    {"name": "shell", "input": {"command": "echo extra"}}
                                ],
                            },
                            {
                                "text": "B.",
                                "tool_calls": [
                                    {"name": "shell", "input": {"command": "echo shared step"}}
                                ],
                            },
                            {"text": "Result:\nline one\nline two B"},
                        ],
                    },
                ],
            }
        )
    )
    server.kill()
    server.start()
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("base", "Base done.")
    parent = app.session_id()
    app.send_and_wait("take path a", "line two A")
    auth = {"Authorization": f"Bearer {server.token}"}
    r = httpx.post(
        f"{server.http}/api/sessions/{parent}/fork",
        json={"stepId": "s0004", "title": "B"},
        headers=auth,
    )
    fork = r.json()["session"]["sessionId"]
    page.evaluate(f"localStorage.setItem('xclaw_session_id', '{fork}')")
    app.reload()
    app.send_and_wait("take path b", "line two B")
    page.locator("#compare-btn").click()
    view = page.locator("#compare")
    expect(view).to_be_visible()
    expect(view.locator(".compare-row.same").filter(has_text="echo shared step")).to_have_count(1)
    expect(view.locator(".compare-row.only-right").filter(has_text="echo extra")).to_have_count(1)
    expect(view.locator(".compare-row.changed").first).to_contain_text("take path a")
    expect(view.locator(".text-diff")).to_contain_text("- line two A")
    expect(view.locator(".text-diff")).to_contain_text("+ line two B")
    shot(page, "compare-by-content")


def test_compare_shows_a_resume_alert_in_words(serve, new_page, shot):
    """A branch that was resumed after a crash has a `resume` alert row: the comparison says
    what it did in words (as the trace does), not the alert's raw JSON."""
    import json
    import signal

    server = serve([{"text": "Base done."}], approval="yolo")
    server.script.write_text(
        json.dumps(
            {
                "turns": [{"text": "Base done."}],
                "branches": [
                    {"when": "path a", "turns": [{"text": "A done."}]},
                    {
                        "when": "path b",
                        "turns": [
                            {
                                "text": "B.",
                                "tool_calls": [{"name": "shell", "input": {"command": "sleep 30"}}],
                            },
                            {"text": "B done."},
                        ],
                    },
                ],
            }
        )
    )
    server.kill()
    server.start()
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("base", "Base done.")
    parent = app.session_id()
    app.send_and_wait("take path a", "A done.")
    import httpx

    auth = {"Authorization": f"Bearer {server.token}"}
    r = httpx.post(
        f"{server.http}/api/sessions/{parent}/fork",
        json={"stepId": "s0003", "title": "B"},
        headers=auth,
    )
    fork = r.json()["session"]["sessionId"]
    page.evaluate(f"localStorage.setItem('xclaw_session_id', '{fork}')")
    app.reload()
    app.send("take path b")
    expect(app.tool_lines().last).to_have_attribute("data-state", "running")
    server.kill(signal.SIGKILL)
    server.start()
    app.reload()
    expect(app.answers().last).to_contain_text("B done.", timeout=30_000)
    app.wait_idle()
    page.locator("#compare-btn").click()
    view = page.locator("#compare")
    expect(view).to_be_visible()
    row = view.locator(".compare-row").filter(has_text="resume")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("interrupted s0006")
    expect(row).not_to_contain_text('{"interrupted"')
    expect(view).to_contain_text("1 step after the fork")  # one step, not "1 steps"
    shot(page, "compare-resume-in-words")
