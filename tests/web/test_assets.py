"""The page's files, without a browser: everything it loads ships in the package, nothing comes
from the internet, and the server hands them out."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

STATIC = Path(__file__).resolve().parents[2] / "xclaw" / "web" / "static"
IMPORT_RE = re.compile(r"""^\s*(?:import|export)\b[^'"]*?from\s+["']([^"']+)["']""", re.MULTILINE)
URL_RE = re.compile(r"""https?://[^\s"'`)<]+""")
# The only absolute URL allowed: the SVG namespace name, which is never fetched.
ALLOWED_URLS = {"http://www.w3.org/2000/svg"}


def test_every_module_import_resolves_to_a_shipped_file() -> None:
    modules = sorted(STATIC.glob("*.js"))
    assert {p.name for p in modules} >= {"app.js", "api.js", "socket.js", "chat.js", "trace.js"}
    for module in modules:
        for target in IMPORT_RE.findall(module.read_text()):
            assert target.startswith("./"), (
                f"{module.name} imports {target!r}: only relative local modules"
            )
            assert (STATIC / target[2:]).is_file(), f"{module.name} imports missing {target}"


VENDOR = STATIC / "vendor"


def test_the_page_loads_nothing_from_the_internet() -> None:
    # The vendored libraries' own text (licences, comments, namespace names) is not scanned:
    # the browser test of Markdown checks that the page requests nothing outside the server.
    for path in sorted(p for p in STATIC.rglob("*") if p.is_file() and VENDOR not in p.parents):
        text = path.read_text()
        for url in URL_RE.findall(text):
            # 127.0.0.1 appears only in the access page's example of the start-up banner.
            assert url in ALLOWED_URLS or url.startswith("http://127.0.0.1"), (
                f"{path.name} refers to {url}"
            )
    html = (STATIC / "index.html").read_text()
    for ref in re.findall(r"""(?:src|href)="(/static/[^"]+)\"""", html):
        assert (STATIC / ref.removeprefix("/static/")).is_file(), ref


def test_server_text_is_never_inserted_as_html() -> None:
    for path in STATIC.glob("*.js"):
        text = path.read_text()
        assert (
            "innerHTML" not in text and "outerHTML" not in text and "insertAdjacentHTML" not in text
        ), path.name


@pytest.mark.slow
def test_the_gateway_serves_the_page_and_its_modules(serve) -> None:
    server = serve([{"text": "hi"}])
    page = httpx.get(f"{server.http}/")
    assert page.status_code == 200
    assert 'src="/static/app.js"' in page.text
    assert page.headers["cache-control"] == "no-store"
    for name in ("app.js", "style.css", "compare.js"):
        r = httpx.get(f"{server.http}/static/{name}")
        assert r.status_code == 200, name
        assert r.text == (STATIC / name).read_text()
        assert r.headers["cache-control"] == "no-cache"  # revalidated: never stale after an upgrade
    assert "javascript" in httpx.get(f"{server.http}/static/app.js").headers["content-type"]


def test_vendored_libraries_are_pinned_with_their_licences() -> None:
    """marked and DOMPurify ship in the package (no CDN, no build step), pinned to
    the versions vendor/README.md names, each with its licence file."""
    readme = (VENDOR / "README.md").read_text()
    marked = (VENDOR / "marked" / "marked.esm.js").read_text()
    purify = (VENDOR / "dompurify" / "purify.es.js").read_text()
    assert "marked v18.2.1" in marked and "| 18.2.1 |" in readme
    assert "DOMPurify 3.5.0" in purify and "| 3.5.0 |" in readme
    assert "Permission is hereby granted" in (VENDOR / "marked" / "LICENSE").read_text()  # MIT
    assert "Apache License" in (VENDOR / "dompurify" / "LICENSE").read_text()
    assert "Mozilla Public License" in (VENDOR / "dompurify" / "LICENSE-MPL").read_text()
    module = (STATIC / "markdown.js").read_text()
    assert 'dompurify: "3.5.0"' in module and 'marked: "18.2.1"' in module
    html = (STATIC / "index.html").read_text()
    for licence in ("marked/LICENSE", "dompurify/LICENSE", "dompurify/LICENSE-MPL"):
        assert f'href="/static/vendor/{licence}"' in html
