"""The session view lists the schedules that send to the session (docs/schedules.md): a
small list above the trace, from GET /api/schedules, asked again when the trace is (an
attach, the end of a run); a fire of one is a message of the session, labelled as the
schedule's live and when the history is shown again.

Real components: Chromium (Playwright) and an `xclaw serve` with the scripted model."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_session_view_lists_its_schedules_and_shows_a_fire(serve, new_page, shot) -> None:
    server = serve([{"text": "Done."}, {"text": "Checked."}] + [{"text": "Again."}] * 5)
    app = App(new_page(), server).open()
    page = app.page
    box = page.locator("#schedules")
    app.send_and_wait("hello", "Done.")
    expect(box).to_be_hidden()  # none yet
    sid = app.session_id()
    api = httpx.Client(
        base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
    )
    with api:
        r = api.post(
            "/schedules",
            json={"cron": "0 9 * * 1-5", "sessionId": sid, "message": "standup notes"},
        )
        assert r.status_code == 201, r.text
        # A moment already past fires at once: its message comes to the page as the
        # schedule's, then its run's answer.
        once = api.post(
            "/schedules", json={"at": "2020-01-01T00:00Z", "sessionId": sid, "message": "check"}
        )
        assert once.status_code == 201, once.text
        expect(app.answers().last).to_contain_text("Checked.", timeout=20_000)
        fired = page.locator("#messages .msg.user").last
        expect(fired.locator(".bubble-text")).to_have_text("check")
        expect(fired.locator(".sender")).to_have_text("schedule")
        rows = box.locator(".schedule")
        expect(rows).to_have_count(2)  # asked again at the end of the fire's run
        first = box.locator(f'.schedule[data-id="{r.json()["id"]}"]')
        expect(first.locator(".schedule-when")).to_have_text("cron 0 9 * * 1-5")
        expect(first.locator(".schedule-message")).to_have_text("standup notes")
        expect(first.locator(".schedule-next")).to_contain_text("next ")
        done = box.locator(f'.schedule[data-id="{once.json()["id"]}"] .schedule-next')
        expect(done).to_have_text("done")
        shot(page, "schedules-list")
        app.reload()  # the history holds the fire's message, still labelled the schedule's
        expect(app.messages).to_contain_text("check")
        restored = page.locator("#messages .msg.user")
        expect(restored).to_have_count(2)
        expect(restored.first.locator(".sender")).to_have_count(0)  # "hello": typed here
        expect(restored.last.locator(".bubble-text")).to_have_text("check")
        expect(restored.last.locator(".sender")).to_have_text("schedule")
        expect(rows).to_have_count(2)
        assert api.delete(f"/schedules/{r.json()['id']}").status_code == 204
        assert api.delete(f"/schedules/{once.json()['id']}").status_code == 204
    app.reload()
    expect(box).to_be_hidden()
