"""The trace tree while the agent runs: sub-agents' steps nest under the call that spawned
them, and rows change live from `step` frames."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_live_tree_with_sub_agents(serve, new_page, shot):
    server = serve([
        {"text": "Asking two helpers.", "tool_calls": [
            {"name": "spawn_agent", "input": {"task": "check the disk"}},
            {"name": "spawn_agent", "input": {"task": "check the clock"}},
        ]},
        {"text": "Both helpers reported."},
    ], approval="yolo", subagent=[
        {"text": "Working.", "tool_calls": [{"name": "shell", "input": {"command": "sleep 1"}}]},
        {"text": "Helper done."},
    ])
    app = App(new_page(), server).open()
    page = app.page

    app.send("use two helpers")
    # Live: the helpers' shell calls show as running before the run ends.
    running = page.locator('#trace .trace-node[data-type="tool_call"][data-status="running"]')
    expect(running.first).to_be_visible()
    expect(app.step("s0001")).to_contain_text("use two helpers")
    shot(page, "19-trace-live")

    expect(page.locator("#messages .msg.assistant.final")).to_have_text("Both helpers reported.", timeout=15_000)
    app.wait_idle()
    expect(running).to_have_count(0)
    spawns = page.locator('#trace .trace-node[data-type="tool_call"]:has(> .trace-row .step-name:text-is("spawn_agent"))')
    expect(spawns).to_have_count(2)
    for i in range(2):
        spawn = spawns.nth(i)
        # Each sub-agent's task, LLM calls and shell call hang under its spawn_agent step.
        expect(spawn.locator(':scope > .trace-children > .trace-node[data-type="user_input"]')).to_have_count(1)
        expect(spawn.locator('.trace-node[data-type="llm_call"]')).to_have_count(2)
        expect(spawn.locator('.trace-node[data-type="tool_call"]')).to_contain_text("sleep 1")
        expect(spawn.locator('.trace-node[data-type="tool_call"]')).to_have_attribute("data-status", "completed")
    # Sub-agent tool lines are labelled in the conversation.
    expect(page.locator("#messages .tool-line .tool-agent").first).to_contain_text("sub-agent")
    shot(page, "20-trace-sub-agents")
