"""The page cannot be framed by another web site (found by the second campaign: `/` came
with no frame protection, so any site could load the owner's page, token in its
localStorage, in an invisible frame and have the owner click "Approve" there). Nor does
it send the address (which holds ?token= on first load) as a Referer, or let a browser
guess content types."""

from __future__ import annotations

import httpx

from tests.security.conftest import server_factory  # noqa: F401  (fixture)


def test_the_page_refuses_frames_and_referrers(server_factory) -> None:  # noqa: F811
    server = server_factory([{"text": "hi"}])
    page = httpx.get(f"{server.http}/?token={server.token}", timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
