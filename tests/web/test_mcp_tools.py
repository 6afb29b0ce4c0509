"""MCP tools seen from the web page: the rollback dialog lists the effects outside the
workspace it does not undo, and /tools lists the server's tools."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.gateway.harness import write_script
from tests.tools.mcp_servers.test_mcp_serve_crash import McpServe
from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_rollback_dialog_lists_outside_effects_and_tools_command(
    tmp_path: Path, new_page, shot, adopt
):
    root = tmp_path / "srv"
    root.mkdir()
    script = write_script(
        root / "script.json",
        [
            {
                "text": "Toggling.",
                "tool_calls": [
                    {"name": "mcp__ev__toggle-simulated-logging", "input": {}},
                    {"name": "mcp__ev__echo", "input": {"message": "hello"}},
                ],
            },
            {"text": "Toggled logging."},
        ],
    )
    server = adopt(McpServe(root=root, script=script, approval="yolo"))
    # Trusted, so that echo's read-only hint counts (an untrusted server's does not).
    server.server_extra = "    trusted: true\n"
    server.start()
    try:
        app = App(new_page(), server).open()
        page = app.page
        app.send_and_wait("toggle the logging", "Toggled logging.")

        node = app.open_step("s0001")
        node.get_by_role("button", name="Roll back to before").click()
        dialog = app.dialog()
        outside = dialog.locator(".outside-effects")
        expect(outside).to_contain_text("1 outside effect stays done — nothing undoes it")
        expect(outside).to_contain_text("mcp__ev__toggle-simulated-logging")
        expect(outside).to_contain_text("not undone: irreversible")
        expect(outside).not_to_contain_text("mcp__ev__echo")  # read-only: nothing to undo
        # Leaving it done is an explicit word, not a click: the button waits for the tick.
        expect(dialog.get_by_role("button", name="Delete")).to_be_disabled()
        shot(page, "mcp-rollback-outside-effects")
        dialog.get_by_role("button", name="Cancel").click()

        app.send("/tools")
        expect(app.messages).to_contain_text("mcp__ev__echo")
        expect(app.messages).to_contain_text("MCP server 'ev'")
        shot(page, "mcp-tools-command")
    finally:
        server.kill()
