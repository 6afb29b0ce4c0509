"""The page cannot be framed by another web site (found by the second campaign: `/` came
with no frame protection, so any site could load the owner's page, token in its
localStorage, in an invisible frame and have the owner click "Approve" there). Nor does
it send the address (which holds ?token= on first load) as a Referer, or let a browser
guess content types."""

from __future__ import annotations

from html.parser import HTMLParser

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


def _csp(header: str) -> dict[str, list[str]]:
    policy: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            policy[words[0].lower()] = words[1:]
    return policy


def test_the_page_allows_only_its_own_script_files(server_factory) -> None:  # noqa: F811
    """A Content-Security-Policy that forbids inline and foreign scripts: markup that got
    into the page some other way (a sanitiser bug) still could not run script."""
    server = server_factory([{"text": "hi"}])
    page = httpx.get(f"{server.http}/", timeout=30)
    policy = _csp(page.headers["content-security-policy"])
    assert policy.get("script-src") == ["'self'"], policy
    assert policy.get("object-src") == ["'none'"] and policy.get("base-uri") == ["'none'"]
    assert policy.get("frame-ancestors") == ["'none'"]
    for directive, sources in policy.items():
        for bad in ("'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:"):
            assert bad not in sources, (directive, sources)


class _Scripts(HTMLParser):
    """Every script element and every attribute that would run script, in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts.append(found)
            self._in_script = True
        for name, value in attrs:
            if name.startswith("on"):
                self.inline.append(f"<{tag} {name}=…>")
            if value and value.strip().lower().startswith("javascript:"):
                self.inline.append(f"<{tag} {name}={value}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(f"<script>{data.strip()[:40]}…")


def test_the_page_has_no_inline_script(server_factory) -> None:  # noqa: F811
    """What the policy forbids, the page does not need: its scripts are files of its own."""
    server = server_factory([{"text": "hi"}])
    parser = _Scripts()
    parser.feed(httpx.get(f"{server.http}/", timeout=30).text)
    assert parser.inline == []
    assert parser.scripts and all(
        (s.get("src") or "").startswith("/static/") for s in parser.scripts
    ), parser.scripts
