"""The session view lists what the session's commands left running between steps
(docs/web.md, docs/containers.md): a small list above the trace, from
GET /api/sessions/{id}/processes, asked again at the end of a run and after a rollback.

Real components: Chromium (Playwright), an `xclaw serve` with `sandbox.isolation: container`
(podman with runc and the test image, tests/containers.py; under XCLAW_TEST_REQUIRE_PODMAN
this fails rather than skips)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.containers import remove_containers, test_image
from tests.gateway.harness import Server, write_script
from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SERVER_CMD = "httpd -p 127.0.0.1:8098 -h /opt"
TURNS: list[dict[str, Any]] = [
    {"text": "", "tool_calls": [{"name": "shell", "input": {"command": SERVER_CMD}}]},
    {"text": "Started the server."},
]


def test_the_session_view_lists_its_background_processes_until_a_rollback_stops_them(
    tmp_path: Path, adopt: Any, new_page: Any, shot: Any
) -> None:
    image = test_image()
    root = tmp_path / "srv"
    root.mkdir()
    server = adopt(
        Server(
            root=root,
            script=write_script(root / "script.json", TURNS),
            approval="yolo",
            config_extra=f"sandbox:\n  isolation: container\n  image: {image}\n",
        )
    ).start()
    try:
        app = App(new_page(), server).open()
        page = app.page
        box = page.locator("#processes")
        expect(box).to_be_hidden()  # a new session: nothing runs
        app.send_and_wait("start a server", "Started the server.")
        sid = app.session_id()
        shell = next(f["step"]["id"] for f in app.frames_of("step") if f["step"]["name"] == "shell")
        expect(box).to_be_visible()
        rows = box.locator(".process")
        expect(rows).to_have_count(1)
        expect(rows.first.locator(".process-step")).to_have_text(shell)
        expect(rows.first.locator(".process-cmd")).to_have_text(SERVER_CMD)
        expect(box.locator(".process-where")).to_contain_text("1 in container xclaw-")
        expect(rows.first.locator(".process-pid")).to_have_text(
            f"pid {rows.first.get_attribute('data-pid')}"
        )
        shot(page, "processes-list")

        # A rollback to before that step stops the server: the list goes with it.
        done = httpx.post(
            f"{server.http}/api/sessions/{sid}/rollback",
            json={"stepId": shell},
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=60,
        )
        assert done.status_code == 200, done.text
        expect(box).to_be_hidden()
        expect(rows).to_have_count(0)
    finally:
        server.kill()
        remove_containers(server.home / "workspaces")
