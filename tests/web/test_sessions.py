"""The sessions sidebar: new, switch, rename, delete; slash commands typed into the page; the
dark theme at laptop width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_new_switch_rename_delete(serve, new_page, shot):
    server = serve([{"text": "Done."}, {"text": "Done again."}])
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("alpha task", "Done.")
    alpha = app.session_id()
    items = page.locator(".session-item")
    expect(items).to_have_count(1)

    page.get_by_role("button", name="New session").click()
    expect(page.locator(".empty-state")).to_be_visible()
    expect(page.locator("#session-title")).to_have_text("New session")
    beta = app.session_id()
    assert beta != alpha
    # A session exists from its first message; opening a new one leaves nothing.
    expect(items).to_have_count(1)
    app.send_and_wait("beta task", "Done.")
    expect(items).to_have_count(2)
    expect(page.locator(".session-item.active")).to_have_attribute("data-session", beta)
    expect(page.locator("#session-title")).to_have_text("beta task")
    # The list is sorted by last change: once beta is on top it is settled, and a click lands
    # on the item it aims at (not on one a late refresh moved under the pointer).
    expect(items.first).to_have_attribute("data-session", beta)

    # Switch by clicking: alpha's history comes back.
    page.locator(f'.session-item[data-session="{alpha}"] .session-main').click()
    expect(page.locator("#session-title")).to_have_text("alpha task")
    expect(app.messages).to_contain_text("alpha task")
    expect(app.messages).not_to_contain_text("beta task")
    assert app.session_id() == alpha

    # Rename from the header.
    page.locator("#session-title").click()
    dialog = app.dialog()
    dialog.get_by_role("textbox").fill("Alpha, renamed")
    dialog.get_by_role("textbox").press("Enter")
    expect(page.locator("#session-title")).to_have_text("Alpha, renamed")
    expect(page.locator(f'.session-item[data-session="{alpha}"] .session-title')).to_have_text(
        "Alpha, renamed"
    )
    expect(items.first).to_have_attribute("data-session", alpha)  # just changed: at the top
    shot(page, "17-sessions-sidebar")

    # Delete the session on screen: the page moves to the remaining one.
    row = page.locator(f'.session-item[data-session="{alpha}"] .session-row')
    row.hover()
    row.get_by_role("button", name="Delete Alpha, renamed").click()
    dialog = app.dialog()
    expect(dialog).to_contain_text("every recorded step")
    dialog.get_by_role("button", name="Delete").click()
    expect(items).to_have_count(1)
    expect(page.locator(".session-item.active")).to_have_attribute("data-session", beta)
    expect(page.locator("#session-title")).to_have_text("beta task")
    expect(app.messages).to_contain_text("beta task")


def test_slash_commands_and_dark_theme(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Counting.",
                "tool_calls": [{"name": "shell", "input": {"command": "seq 1 60"}}],
            },
            {
                "text": "Here is a long answer:\n\n```\nline one\nline two\n```\nand `inline code` too."
            },
        ],
        approval="yolo",
    )
    app = App(new_page(color_scheme="dark"), server).open()
    page = app.page
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 18, 23)", (
        background
    )  # the dark palette, from prefers-color-scheme
    app.send_and_wait("count to sixty", "and inline code too.")
    expect(page.locator("#messages .msg.assistant.final pre.answer-code")).to_have_text(
        "line one\nline two"
    )
    # A long tool output is folded; "show all" unfolds it.
    output = app.tool_lines().first.locator(".tool-output")
    output.locator("summary").click()
    expect(output.locator("pre.code")).not_to_contain_text("\n60")
    output.get_by_role("button", name="show all 60 lines").click()
    expect(output.locator("pre.code")).to_contain_text("59\n60")

    # The trace tree folds: collapsing the LLM call hides the tool call under it.
    expect(app.step("s0003")).to_be_visible()
    app.step("s0002").locator(":scope > .trace-row .twisty").click()
    expect(app.step("s0003")).to_have_count(0)
    expect(app.step("s0002")).to_contain_text("1 hidden")
    app.step("s0002").locator(":scope > .trace-row").focus()
    page.keyboard.press("ArrowRight")  # the keyboard opens it again
    expect(app.step("s0003")).to_be_visible()

    app.send("/steps 3")
    expect(app.messages.locator(".notice").last).to_contain_text("s0004")
    expect(app.messages.locator(".notice").last).to_contain_text("/rollback")
    app.send("/new Second thoughts")  # the gateway attaches a new session
    expect(page.locator(".empty-state")).to_be_visible()
    expect(page.locator("#session-title")).to_have_text("Second thoughts")
    expect(page.locator(".session-item")).to_have_count(2)  # named: written at once
    app.send("/nonsense")
    expect(app.messages.locator(".error-line")).to_contain_text("unknown command")
    page.locator(".session-item .session-main").last.click()
    expect(app.messages).to_contain_text("count to sixty")
    app.open_step("s0003")
    shot(page, "18-dark-theme")


def test_opening_the_page_makes_no_session_and_switch_title_rollback_read_right(
    serve, new_page, shot
):
    """Sessions in the page: opening it (in two browsers) writes nothing; /title renames;
    /switch takes a unique prefix of an existing session only; after a rollback the session
    waits for an instruction instead of showing Running."""
    import httpx

    server = serve([{"text": "Done."}, {"text": "Done again."}, {"text": "Third."}])
    first = App(new_page(), server).open()
    App(new_page(), server).open()

    def listed() -> list[dict]:
        r = httpx.get(
            f"{server.http}/api/sessions", headers={"Authorization": f"Bearer {server.token}"}
        )
        return r.json()["sessions"]

    assert listed() == []
    page = first.page
    first.send_and_wait("alpha task", "Done.")
    alpha = first.session_id()
    assert [s["sessionId"] for s in listed()] == [alpha]

    first.send("/title Renamed here")
    expect(page.locator("#session-title")).to_have_text("Renamed here")
    expect(page.locator(".session-item.active .session-title")).to_have_text("Renamed here")

    first.send("/new")
    expect(page.locator("#session-title")).to_have_text("New session")
    # The new session's (empty) history replaces the old one's messages: only then does
    # counting the answers start from the new session.
    expect(page.locator("#messages .msg.assistant.final")).to_have_count(0)
    first.send_and_wait("beta task", "Done.")
    beta = first.session_id()
    assert beta != alpha and len(listed()) == 2
    expect(page.locator(".session-item")).to_have_count(2)

    first.send("/switch zz-no-such")
    expect(first.messages.locator(".error-line")).to_contain_text("no session with id 'zz-no-such'")
    assert first.session_id() == beta
    first.send(f"/switch {alpha[:6]}")
    expect(page.locator("#session-title")).to_have_text("Renamed here")
    assert first.session_id() == alpha
    expect(first.messages).to_contain_text("alpha task")

    first.send("/rollback s0001")
    expect(first.messages.locator(".notice").last).to_contain_text("[rollback]")
    expect(first.status).to_have_text("Waiting for your instruction")
    expect(page.locator(".session-item.active .session-meta")).to_contain_text(
        "Waiting for your instruction"
    )
    expect(page.locator(".session-item")).to_have_count(2)
    shot(page, "rolled-back-waiting")
    assert len(listed()) == 2
