"""The trace tree while the agent runs: sub-agents' steps nest under the call that spawned
them, and rows change live from `step` frames."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_live_tree_with_sub_agents(serve, new_page, shot):
    server = serve(
        [
            {
                "text": "Asking two helpers.",
                "tool_calls": [
                    {"name": "spawn_agent", "input": {"task": "check the disk"}},
                    {"name": "spawn_agent", "input": {"task": "check the clock"}},
                ],
            },
            {"text": "Both helpers reported."},
        ],
        approval="yolo",
        subagent=[
            {
                "text": "Working.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 1"}}],
            },
            {"text": "Helper done."},
        ],
    )
    app = App(new_page(), server).open()
    page = app.page

    app.send("use two helpers")
    # Live: the helpers' shell calls show as running before the run ends.
    running = page.locator('#trace .trace-node[data-type="tool_call"][data-status="running"]')
    expect(running.first).to_be_visible()
    expect(app.step("s0001")).to_contain_text("use two helpers")
    shot(page, "19-trace-live")

    expect(page.locator("#messages .msg.assistant.final")).to_have_text(
        "Both helpers reported.", timeout=15_000
    )
    app.wait_idle()
    expect(running).to_have_count(0)
    spawns = page.locator(
        '#trace .trace-node[data-type="tool_call"]:has(> .trace-row .step-name:text-is("spawn_agent"))'
    )
    expect(spawns).to_have_count(2)
    for i in range(2):
        spawn = spawns.nth(i)
        # Each sub-agent's task, LLM calls and shell call hang under its spawn_agent step.
        expect(
            spawn.locator(':scope > .trace-children > .trace-node[data-type="user_input"]')
        ).to_have_count(1)
        expect(spawn.locator('.trace-node[data-type="llm_call"]')).to_have_count(2)
        expect(spawn.locator('.trace-node[data-type="tool_call"]')).to_contain_text("sleep 1")
        expect(spawn.locator('.trace-node[data-type="tool_call"]')).to_have_attribute(
            "data-status", "completed"
        )
    # Sub-agent tool lines are labelled in the conversation.
    expect(page.locator("#messages .tool-line .tool-agent").first).to_contain_text("sub-agent")
    shot(page, "20-trace-sub-agents")


def test_trace_panel_resizes_and_nothing_covers_or_greys_it(serve, new_page, shot):
    """The trace column is resizable (summaries no longer cut at ~25 characters),
    toasts stay off it, and a restored conversation is not greyed out."""
    long_command = "echo " + "a-fairly-long-argument " * 4
    server = serve(
        [
            {
                "text": "Running it.",
                "tool_calls": [{"name": "shell", "input": {"command": long_command}}],
            },
            {"text": "Done."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send_and_wait("run the long command", "Done.")
    summary = app.step("s0003").locator(".step-summary")
    expect(summary).to_have_attribute("title", long_command.strip())
    panel = page.locator("#trace-panel")
    before = panel.bounding_box()["width"]
    handle = page.locator("#trace-resizer").bounding_box()
    page.mouse.move(handle["x"] + 4, handle["y"] + 200)
    page.mouse.down()
    page.mouse.move(handle["x"] - 200, handle["y"] + 200, steps=5)
    page.mouse.up()
    after = panel.bounding_box()["width"]
    assert after > before + 120, (before, after)  # the chat keeps 480 px of the 1016
    assert page.evaluate("localStorage.getItem('xclaw_trace_width')") == str(round(after))
    app.reload()
    assert abs(page.locator("#trace-panel").bounding_box()["width"] - after) <= 2  # kept
    # Restored messages are shown at full strength.
    opacity = page.locator("#messages .msg.assistant.restored").last.evaluate(
        "e => getComputedStyle(e).opacity"
    )
    assert opacity == "1"
    # A toast appears over the conversation, not over the trace panel.
    page.evaluate("import('/static/dialogs.js').then(m => m.toast('hello from a toast'))")
    toast = page.locator(".toast").filter(has_text="hello from a toast")
    expect(toast).to_be_visible()
    box, trace_box = toast.bounding_box(), page.locator("#trace-panel").bounding_box()
    assert box["x"] + box["width"] <= trace_box["x"], (box, trace_box)
    shot(page, "trace-resized")


def test_a_trace_dragged_wide_leaves_the_composer_usable(serve, new_page, shot):
    """Dragging the trace as wide as it goes still leaves a chat column whose composer shows
    its placeholder on one line, with room for Stop and Send while a run is in flight."""
    server = serve(
        [
            {
                "text": "Working.",
                "tool_calls": [{"name": "shell", "input": {"command": "sleep 30"}}],
            },
            {"text": "Done."},
        ],
        approval="yolo",
    )
    app = App(new_page(), server).open()
    page = app.page
    handle = page.locator("#trace-resizer").bounding_box()
    page.mouse.move(handle["x"] + 4, handle["y"] + 200)
    page.mouse.down()
    page.mouse.move(10, handle["y"] + 200, steps=8)
    page.mouse.up()
    app.send("work")
    expect(page.locator("#composer").get_by_role("button", name="Stop")).to_be_visible()
    box = page.locator("#input")
    # The placeholder, in the textarea's own font, fits in the textarea's width.
    fits = box.evaluate(
        """e => { const s = getComputedStyle(e); const c = document.createElement('canvas').getContext('2d');
                  c.font = `${s.fontSize} ${s.fontFamily}`;
                  return [c.measureText(e.placeholder).width, e.clientWidth]; }"""
    )
    assert fits[0] <= fits[1], fits
    shot(page, "trace-widest")
    # The same width on a narrower window (or after a reload there) still leaves the chat room.
    page.set_viewport_size({"width": 1100, "height": 800})
    assert page.locator("#transcript").bounding_box()["width"] >= 470
    app.reload()
    assert page.locator("#transcript").bounding_box()["width"] >= 470
    page.get_by_role("button", name="Stop").click()
    app.wait_idle()


def test_an_approval_cancelled_from_another_client_closes_the_dialog_and_reads_cancelled(
    serve, new_page, shot
):
    """Another client stops the run while the page asks for an approval: the question goes
    away, the session waits, and the trace says the approval was cancelled, not denied."""
    import json

    from websockets.sync.client import connect

    server = serve(
        [
            {
                "text": "Deleting.",
                "tool_calls": [{"name": "shell", "input": {"command": "rm -f notes.txt"}}],
            },
            {"text": "Done."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("delete the notes")
    expect(app.dialog()).to_be_visible()
    sid = app.session_id()
    ws_url = server.http.replace("http://", "ws://") + "/ws"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {server.token}"}) as ws:
        ws.send(json.dumps({"type": "reconnect", "sessionId": sid}))
        ws.send(json.dumps({"type": "cancel", "sessionId": sid}))
        expect(page.locator("dialog[open]")).to_have_count(0)
    expect(app.status).to_have_text("Waiting for your instruction")
    expect(app.step("s0003").locator(".step-summary")).to_have_text("shell — cancelled by the user")
    expect(page.locator("#composer .stop")).to_have_attribute("title", "Stop the run now")
    shot(page, "approval-cancelled-elsewhere")


def test_tokens_a_server_did_not_report_read_as_estimated(tmp_path, new_page, shot, adopt):
    """A local server that streams no usage (llama-cpp-python): the trace row, its detail
    and the header say `~N` and "estimated", never `0`, and no cost is shown."""
    from dataclasses import dataclass

    from tests.gateway.harness import Server
    from tests.llm.fakes import FakeOpenAIServer, Reply

    with FakeOpenAIServer() as model:
        model.default = Reply(text="Hello from a small local model.", usage=None)

        @dataclass
        class LocalModelServer(Server):
            def env(self) -> dict[str, str]:
                return {
                    **super().env(),
                    "XCLAW_MODEL": "openai:gpt-4o",
                    "OPENAI_BASE_URL": model.url,
                }

        server = adopt(LocalModelServer(root=tmp_path / "srv", script=None, approval="yolo"))
        server.start()
        try:
            app = App(new_page(), server).open()
            app.send_and_wait("hi", "Hello from a small local model.")
            row = app.step("s0002").locator(":scope > .trace-row .step-tok")
            expect(row).to_contain_text("~")
            expect(row).to_contain_text("(estimated)")
            expect(row).not_to_contain_text("$")
            detail = app.open_step("s0002")
            expect(detail.locator(".step-facts")).to_contain_text("estimated")
            expect(app.page.locator("#trace-stats")).to_contain_text("~")
            shot(app.page, "trace-estimated-tokens")
        finally:
            server.kill()


def test_an_approval_given_on_the_page_says_who_answered(serve, new_page, shot):
    """The record says who decided (docs/approval.md): the trace shows an approval given on
    the page as a person on the web page, and the approval step's detail says so."""
    server = serve(
        [
            {"text": "", "tool_calls": [{"name": "shell", "input": {"command": "echo hi > f"}}]},
            {"text": "Done."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    app.send("write f")
    expect(app.dialog()).to_be_visible()
    app.dialog().get_by_role("button", name="Approve").click()
    expect(page.locator("#messages .msg.assistant.final")).to_have_text("Done.", timeout=15_000)
    app.wait_idle()
    expect(app.step("s0003").locator(".step-summary")).to_have_text(
        "shell — approved by the user (web page)"
    )
    detail = app.open_step("s0003")
    expect(detail).to_contain_text("answered by")
    expect(detail).to_contain_text("a person · web page (websocket)")
    shot(page, "approval-answered-by")
