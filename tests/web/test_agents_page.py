"""Declared agents on the page (docs/agents.md, docs/web.md): the sidebar offers the server's
agents for a new session, the header says which agent the session runs, and an approval
can be answered with a reason the model reads or an edited input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.gateway.harness import Server
from tests.gateway.test_agents import AGENTS, TOOLS
from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


class AgentServer(Server):
    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(config.read_text() + AGENTS)
        (self.root / "support_tools.py").write_text(TOOLS)
        return env


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": args}]}


def test_a_new_session_runs_the_agent_chosen_and_says_so(tmp_path, adopt, new_page, shot):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    _call("lookup", order_id="A-1"),
                    {"output": {"title": "A-1 shipped", "priority": 3}},
                ]
            }
        )
    )
    server = adopt(AgentServer(root=tmp_path, script=script, approval="ask")).start()
    try:
        app = App(new_page(), server).open()
        page = app.page
        choice = page.locator("#new-agent")
        expect(page.locator("#agent-choice")).to_be_visible()
        expect(choice.locator("option")).to_have_count(2)
        expect(page.locator("#session-agent")).to_be_hidden()  # xclaw's own: nothing said
        choice.select_option("support")
        page.locator("#new-session").click()
        expect(page.locator("#session-agent")).to_have_text("agent · support")
        app.send_and_wait("where is A-1?", "A-1 shipped")
        sent = [f for f in app.frames_of("reply")]
        assert sent[-1]["output"] == {"title": "A-1 shipped", "priority": 3}
        sid = app.session_id()
        shot(page, "agents-01-session-runs-support")
        # Recorded: after a reload the header still says it.
        app.reload()
        assert app.session_id() == sid
        expect(page.locator("#session-agent")).to_have_text("agent · support")
        # Back to xclaw's own for the next new session.
        choice.select_option("default")
        page.locator("#new-session").click()
        expect(page.locator("#session-agent")).to_be_hidden()
    finally:
        server.kill()


def test_an_approval_answered_with_a_reason_and_an_edited_input(serve, new_page, shot):
    server = serve(
        [
            _call("shell", command="touch first.txt"),
            {"text": "Made it."},
            _call("shell", command="touch second.txt"),
            {"text": "Understood."},
        ]
    )
    app = App(new_page(), server).open()
    page = app.page
    ws = lambda: server.workspace(app.session_id())  # noqa: E731

    app.send("make first.txt")
    dialog = app.dialog()
    dialog.locator("summary", has_text="edit the input").click()
    dialog.locator(".approval-edit").fill('{"command": "touch edited.txt"}')
    shot(page, "agents-02-approval-edited")
    dialog.get_by_role("button", name="Approve").click()
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Made it.")
    app.wait_idle()
    assert (ws() / "edited.txt").exists() and not (ws() / "first.txt").exists()

    app.send("make second.txt")
    dialog = app.dialog()
    dialog.locator(".approval-message").fill("not today")
    dialog.get_by_role("button", name="Deny").click()
    expect(page.locator("#messages .msg.assistant.final").last).to_have_text("Understood.")
    denied = app.tool_lines().last
    expect(denied).to_contain_text("not today")
    assert not (ws() / "second.txt").exists()
