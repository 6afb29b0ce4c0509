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


MARKDOWN = (
    "**Bold**, `code`, a [link](https://example.com) and a table:\n\n"
    "| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nprint('hi')\n```\n"
)


def test_the_content_security_policy_holds_and_the_page_needs_no_exception(
    serve, new_page, page_errors, shot
):
    """With the policy enforced (script-src 'self'), a whole turn — Markdown with a table, a
    code block, a tool, the trace — raises no violation; and a script element that got into
    the page some other way does not run."""
    server = serve(
        [
            {
                "text": "Looking.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
            },
            {"text": MARKDOWN},
        ],
        approval="yolo",
    )
    page = new_page()
    page.add_init_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    app = App(page, server).open()
    app.send_and_wait("go", "Bold")
    expect(page.locator("#messages table")).to_have_count(1)
    expect(page.locator("#messages .code-block")).to_have_count(1)
    app.open_step("s0003")
    assert page.evaluate("window.__violations") == []
    shot(page, "csp-01-a-turn")
    # Markup that slipped past the sanitiser: an inline script and a handler stay inert.
    page.evaluate(
        """() => {
            const s = document.createElement("script");
            s.textContent = "window.__pwned = 1";
            document.body.append(s);
            const d = document.createElement("div");
            d.innerHTML = '<img src="data:," onerror="window.__pwned = 2">';
            document.body.append(d);
        }"""
    )
    page.wait_for_function("window.__violations.length >= 2")
    assert page.evaluate("window.__pwned") is None
    assert all(v.startswith("script-src") for v in page.evaluate("window.__violations"))
    # Chromium reports the refusals on the console too: expected here, nowhere else.
    page_errors.errors = [e for e in page_errors.errors if "Content Security Policy" not in e]
