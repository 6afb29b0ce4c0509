"""The model's reasoning in the browser: a `thinking` frame shows as a closed "Thinking" box
above the answer, opens on click, and is folded again in the history after a refresh."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.gateway.harness import Server
from tests.llm.fakes import FakeOpenAIServer, Reply
from tests.web.app_page import LOCKED, App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

THOUGHT = "The user wants a greeting. A shell echo proves the workspace works; then I answer."


def test_thinking_is_folded_live_and_after_refresh(serve, new_page, shot):
    server = serve(
        [
            {
                "thinking": THOUGHT,
                "text": "Let me check.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
            },
            {"text": "All good."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("say hi", "All good.")
    fold = page.locator("#messages details.thinking")
    expect(fold).to_have_count(1)
    expect(fold.locator("summary")).to_have_text("Thinking · 15 words")
    expect(fold.locator(".thinking-text")).to_be_hidden()  # folded
    # It sits above the answer text that streamed while the call ran.
    order = page.evaluate(
        "() => [...document.querySelectorAll('#messages > *')].map(e => e.className)"
    )
    assert order.index("thinking") < next(i for i, c in enumerate(order) if "assistant" in c)
    shot(page, "thinking-01-folded")
    fold.locator("summary").click()
    expect(fold.locator(".thinking-text")).to_have_text(THOUGHT)
    shot(page, "thinking-02-open")

    app.reload()
    restored = page.locator("#messages details.thinking.restored")
    expect(restored).to_have_count(1)
    expect(restored.locator(".thinking-text")).to_be_hidden()
    expect(restored.locator("summary")).to_have_text("Thinking · 15 words")


def test_the_thinking_of_a_retried_call_is_shown_once(tmp_path, new_page, shot, adopt):
    """The provider's stream breaks off after its thinking was shown; the call is retried and
    thinks again: the page drops the failed attempt's box (`thinking_discarded`) and shows
    the new one, once."""
    first = "The first attempt wonders about the weather."
    second = "The second attempt thinks about the greeting."
    with FakeOpenAIServer() as provider:
        # the role chunk and one chunk per word of reasoning, then the stream ends
        provider.push(
            Reply.cut(1 + len(first.split()), thinking=[first]),
            Reply(thinking=[second], text="Hello."),
        )
        server = adopt(Server(root=tmp_path / "srv", script=None, approval="yolo"))
        base_env = server.env
        server.env = lambda: {  # type: ignore[method-assign]
            **base_env(),
            "XCLAW_MODEL": "openai:m",
            "OPENAI_API_BASE_URL": provider.url,
        }
        server.start()
        try:
            app = App(new_page(), server).open()
            app.send_and_wait("say hello", "Hello.")
            folds = app.page.locator("#messages details.thinking")
            expect(folds).to_have_count(1)
            folds.locator("summary").click()
            expect(folds.locator(".thinking-text")).to_have_text(second)
            shot(app.page, "thinking-03-retried-once")
        finally:
            server.kill()
    assert len(provider.requests) == 2


def test_compact_from_the_page(serve, new_page, shot):
    """/compact typed in the page: the summary is announced, the composer is free again, and
    the next turn goes on (the scripted model summarises deterministically)."""
    server = serve(
        [
            {
                "text": "Looking.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
            },
            {"text": "Done looking."},
            {"text": "Continuing after the summary."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("look around", "Done looking.")
    app.send("/compact")
    notice = page.locator("#messages .notice", has_text="[compact]")
    expect(notice).to_have_count(1)
    expect(page.locator("#composer")).not_to_have_class(LOCKED)
    shot(page, "compact-01-notice")
    app.send_and_wait("go on", "Continuing after the summary.")


def test_a_compacted_conversation_shows_its_summary_folded_not_as_a_user_message(
    serve, new_page, shot
):
    """After /compact the restored conversation starts from the summary: shown folded as the
    summary it is, not as a message the user typed."""
    server = serve(
        [
            {
                "text": "Looking.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
            },
            {"text": "Done looking."},
            {"text": "Continuing after the summary."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("look around", "Done looking.")
    app.send("/compact")
    expect(page.locator("#messages .notice", has_text="[compact]")).to_have_count(1)
    app.send_and_wait("go on", "Continuing after the summary.")
    app.reload()
    users = page.locator("#messages .msg.user")
    expect(users).to_have_count(1)
    expect(users.first).to_have_text("go on")
    summary = page.locator("#messages details.summary")
    expect(summary).to_have_count(1)
    expect(summary.locator("summary")).to_contain_text("Earlier conversation, summarised")
    expect(summary).not_to_contain_text("[Summary of the earlier conversation")
    summary.locator("summary").click()
    expect(summary).to_contain_text("look around")
    shot(page, "compact-02-restored-summary")
