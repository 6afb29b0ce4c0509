"""The queued messages in a real browser (docs/protocol.md, "Input while a run is busy"):
while a run is in flight the page's Queue button keeps a message to run after it; the page
lists every waiting message — its own and another client's — with a button that cancels
it; each runs, shown as said, in order, once the run before ends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect
from websockets.sync.client import connect

from tests.web.app_page import LOCKED, App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def test_the_page_queues_lists_and_cancels_waiting_messages(serve, new_page, shot):
    server = serve(
        [
            {"text": "Working on it.", "tool_calls": [sh("sleep 4")]},
            {"text": "First task done."},
            {"text": "Second task done."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("first task")
    expect(page.locator("#composer")).to_have_class(LOCKED)
    queue_button = page.locator("#composer .queue-send")
    expect(queue_button).to_be_visible()
    box = page.locator("#input")
    box.fill("second task")
    queue_button.click()
    items = page.locator("#queue .queue-item")
    expect(items).to_have_count(1)
    expect(items.first.locator(".queue-text")).to_have_text("second task")
    expect(items.first.locator(".queue-mode")).to_have_text("queue")

    # Another client of the session queues one too: the page lists it.
    sid = app.session_id()
    with connect(f"{server.ws_url}?token={server.token}") as ws:
        ws.send(json.dumps({"type": "reconnect", "sessionId": sid}))
        ws.send(
            json.dumps(
                {
                    "type": "message",
                    "sessionId": sid,
                    "content": "a message to drop",
                    "messageId": "drop-1",
                    "busy": "queue",
                }
            )
        )
        while json.loads(ws.recv(timeout=30)).get("type") != "queued":
            pass
    expect(items).to_have_count(2)
    expect(items.nth(1).locator(".queue-text")).to_have_text("a message to drop")
    expect(page.locator("#queue .queue-head")).to_have_text("Queued · 2 waiting")
    shot(page, "queue-01-two-waiting")

    items.nth(1).locator(".queue-cancel").click()
    expect(items).to_have_count(1)

    # The run ends; the waiting message runs, shown as said, and the list empties.
    expect(page.locator("#messages .msg.assistant.final")).to_have_count(2, timeout=30_000)
    expect(page.locator("#messages .msg.assistant.final").last).to_contain_text("Second task done.")
    expect(page.locator("#queue")).to_be_hidden()
    expect(page.locator("#messages .msg.user")).to_have_text(["first task", "second task"])
    app.wait_idle()
    shot(page, "queue-02-ran")
