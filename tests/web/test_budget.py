"""A session at its budget in a real browser (docs/budgets.md): the run stops before the call
that would pass the session's token cap; the page shows the state `budget` in the server's
words — which cap, what was spent, what is left — and, once an admin grants more over HTTP,
the run going on from where it stopped to its answer."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CAP = 400


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def test_the_page_shows_a_session_at_its_cap_and_its_run_going_on_after_a_grant(
    serve, new_page, shot
):
    server = serve(
        [
            {"text": "One.", "tool_calls": [sh("echo one")]},
            {"text": "Two.", "tool_calls": [sh("echo two")]},
            {"text": "Three.", "tool_calls": [sh("echo three")]},
            {"text": "Counted to three."},
        ],
        approval="yolo",
        config_extra=f"max_tokens: 100\nbudgets:\n  session_tokens: {CAP}\n",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("count to three")
    pill = page.locator("#status-pill")
    expect(pill).to_have_class(re.compile(r"\bst-budget\b"), timeout=30_000)
    words = pill.inner_text()
    # The server's words: which cap, spent of what, what is left.
    match = re.search(r"session_tokens: spent (\d+) tokens of 400 tokens, (\d+) tokens left", words)
    assert match is not None, words
    spent, left = int(match[1]), int(match[2])
    assert 0 < spent <= CAP and left == CAP - spent
    # The bar may cut the words short: the whole of them is the pill's title.
    expect(pill).to_have_attribute("title", words)
    sid = app.session_id()
    # The session's entry in the list says it too.
    entry = page.locator(f'#session-list .session-item[data-session="{sid}"]')
    expect(entry).to_contain_text("session_tokens")
    expect(entry.locator(".status-dot")).to_have_class(re.compile(r"\bst-budget\b"))
    # A notice in the conversation says how to go on.
    expect(page.locator("#messages")).to_contain_text("[budget]")
    shot(page, "budget-01-reached")

    granted = httpx.post(
        f"{server.http}/api/budgets/session:{sid}/grant",
        json={"tokens": 5000},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert granted.status_code == 200, granted.text
    # The run goes on where it stopped, to its answer; the state is no longer `budget`.
    final = page.locator("#messages .msg.assistant.final")
    expect(final.last).to_contain_text("Counted to three.", timeout=30_000)
    expect(pill).to_have_class(re.compile(r"\bst-success\b"), timeout=30_000)
    expect(pill).not_to_contain_text("session_tokens")
    app.wait_idle()
    shot(page, "budget-02-granted")
