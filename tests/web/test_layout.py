"""The page at the widths people use: the conversation keeps its documented minimum width
(docs/web.md: 480 px, room for the composer with Stop and Send) whenever the sidebar is shown,
the trace included, and nothing in the header overlaps anything else — a fork with a long
title and the longest state words included."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MIN_CHAT = 480
LONG_TITLE = "A fork with a rather long title, to see how the header copes with it"

# Every visible thing in the header: none may cover another, or leave the header.
HEADER_PARTS = """() => {
  const header = document.querySelector('.topbar').getBoundingClientRect();
  const parts = ['#session-title', '#session-id', '#fork-info', '#status-pill',
                 '#compare-btn', '#trace-toggle'];
  const boxes = [];
  for (const sel of parts) {
    const el = document.querySelector(sel);
    if (!el || el.getClientRects().length === 0) continue;
    // What is drawn: the element's box cut by its clipping ancestors (ellipsis).
    let r = el.getBoundingClientRect();
    let box = {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX === 'visible') continue;
      const c = p.getBoundingClientRect();
      box = {left: Math.max(box.left, c.left), right: Math.min(box.right, c.right),
             top: Math.max(box.top, c.top), bottom: Math.min(box.bottom, c.bottom)};
    }
    if (box.right - box.left < 1 || box.bottom - box.top < 1) continue;
    boxes.push({sel, ...box});
  }
  const problems = [];
  for (const b of boxes) {
    if (b.left < header.left - 0.5 || b.right > header.right + 0.5) problems.push(`${b.sel} leaves the header`);
  }
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      problems.push(`${a.sel} overlaps ${b.sel}`);
  }
  return problems;
}"""

PLACEHOLDER_FITS = """e => { const s = getComputedStyle(e); const c = document.createElement('canvas').getContext('2d');
  c.font = `${s.fontSize} ${s.fontFamily}`; return [c.measureText(e.placeholder).width, e.clientWidth]; }"""


@pytest.fixture
def forked(serve):
    """A server with a session and a fork of it (long title, fork info in the header, state
    "Waiting for your instruction")."""
    server = serve(
        [
            {
                "text": "Looking.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
            },
            {"text": "**Done.** A table:\n\n| file | size |\n|---|---:|\n| a.txt | 12 |"},
        ],
        approval="yolo",
    )
    return server


def _fork(server, page) -> str:
    app = App(page, server).open()
    app.send_and_wait("Please prepare the quarterly release notes and check every file", "Done")
    sid = app.session_id()
    r = httpx.post(
        f"{server.http}/api/sessions/{sid}/fork",
        json={"stepId": "s0003", "title": LONG_TITLE},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["session"]["sessionId"])


@pytest.mark.parametrize("width", [900, 1280, 600])
def test_the_chat_keeps_its_width_and_the_header_never_overlaps(
    forked, new_page, shot, width: int
) -> None:
    fork = _fork(forked, new_page())
    page = new_page(viewport={"width": width, "height": 760})
    page.add_init_script(f"localStorage.setItem('xclaw_session_id', '{fork}')")
    app = App(page, forked).open()
    expect(page.locator("#session-title")).to_have_text(LONG_TITLE)
    expect(app.status).to_have_text("Waiting for your instruction")
    chat = page.locator("#transcript").bounding_box()
    sidebar_shown = page.locator(".sidebar").is_visible()
    assert chat["width"] >= (MIN_CHAT if sidebar_shown else min(MIN_CHAT, width)), chat
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
    fits = page.locator("#input").evaluate(PLACEHOLDER_FITS)
    assert fits[0] <= fits[1], fits
    assert page.evaluate(HEADER_PARTS) == []
    shot(page, f"layout-{width}")
    toggle = page.locator("#trace-toggle")
    if toggle.is_visible():
        # With the trace open (or opened) too, the conversation keeps its width.
        if toggle.get_attribute("aria-pressed") != "true":
            toggle.click()
        expect(page.locator("#trace-panel")).to_be_visible()
        assert page.locator("#transcript").bounding_box()["width"] >= MIN_CHAT
        assert page.evaluate(HEADER_PARTS) == []
        shot(page, f"layout-{width}-trace")
    # The longest state word in the header.
    page.evaluate(
        """() => { const p = document.querySelector('#status-pill');
                   p.textContent = 'Paused · waiting for your approval'; }"""
    )
    assert page.evaluate(HEADER_PARTS) == []
