"""Model and tool text is shown as text: terminal escapes, HTML and script in a reply or a
tool's output are never interpreted by the page (issue 13: "check the page never interprets
them")."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = (
    "Hi \x1b[2J\x1b[41mRED\x1b[0m \x1b]0;title\x07 \x9b31m "
    '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> '
    "<a href='javascript:window.__pwned=3'>click</a>"
)


def test_reply_and_tool_output_with_escapes_and_markup_stay_text(serve, new_page, shot):
    server = serve(
        [
            {
                "text": HOSTILE,
                "tool_calls": [
                    {
                        "name": "shell",
                        "input": {
                            "command": "printf '\\033[31m<b>bold</b><img src=x "
                            "onerror=window.__pwned=4>\\n'"
                        },
                    }
                ],
            },
            {"text": "Done: " + HOSTILE},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    app.send_and_wait("go", "Done:")
    page = app.page
    expect(app.answers().last).to_contain_text("<img src=x onerror=")
    expect(app.answers().last).to_contain_text("<script>window.__pwned=2</script>")
    assert page.evaluate("window.__pwned") is None
    assert (
        page.locator("#messages img, #messages script, #messages a[href^=javascript]").count() == 0
    )
    text = page.locator("#messages").inner_text()
    assert "\x1b[41mRED" in text or "RED" in text  # shown, never acted on
    assert page.title() != "title"
    shot(page, "hostile-text")
