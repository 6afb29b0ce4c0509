"""The page's rollback dialog past outside effects, in a real browser: it shows what is
undone (and by what) and what stays done, needs an explicit tick before it leaves an effect
done, and afterwards the trace shows the compensation that undid the payment."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.gateway.test_rollback_effects import TURNS, serve
from tests.web.app_page import App

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_dialog_shows_compensations_and_needs_a_tick_for_what_stays_done(
    tmp_path: Path, new_page, shot, adopt
):
    server = adopt(serve(tmp_path, TURNS))
    server.start()
    try:
        app = App(new_page(), server).open()
        page = app.page
        app.send_and_wait("pay and mail", "Paid and noted.")
        assert server.ledger.refs() == ["A", "M"]

        node = app.open_step("s0001")
        node.get_by_role("button", name="Roll back to before").click()
        dialog = app.dialog()
        outside = dialog.locator(".outside-effects")
        expect(outside).to_contain_text("1 outside effect is undone first, in this order")
        expect(outside.locator("ul.compensable")).to_contain_text("record_payment")
        expect(outside.locator("ul.compensable")).to_contain_text("undone by")
        expect(outside.locator("ul.irreversible")).to_contain_text("record_payment_unchecked")
        expect(outside.locator("ul.irreversible")).to_contain_text("not undone: irreversible")
        delete = dialog.get_by_role("button", name="Delete")
        expect(delete).to_be_disabled()  # leaving an effect done is an explicit word
        shot(page, "rollback-outside-effects-preview")
        dialog.get_by_role("checkbox").check()
        expect(delete).to_be_enabled()
        delete.click()

        expect(page.locator(".toast")).to_contain_text("1 outside effect undone, 1 left done")
        # The trace keeps the compensation: what was undone, by what, who asked.
        comp = page.locator('#trace .trace-node[data-type="system_alert"]', has_text="undone:")
        expect(comp).to_have_count(1)
        expect(comp).to_contain_text("record_payment by")
        expect(page.locator("#trace")).to_contain_text("rollback")
        shot(page, "rollback-outside-effects-after")
        assert server.ledger.refs() == ["M"]
    finally:
        server.kill()
