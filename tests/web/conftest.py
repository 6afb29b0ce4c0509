"""Browser fixtures: the machine's Chromium driven by Playwright against real `xclaw serve`
processes (tests/gateway/harness.py) running the scripted model.

Without Chromium the browser tests are skipped with the reason shown, unless
XCLAW_TEST_REQUIRE_BROWSER=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.gateway.harness import Server, write_script

CHROMIUM = Path(os.environ.get("XCLAW_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"
VIEWPORT = {"width": 1280, "height": 800}  # a laptop screen: the width the page must work at


def _no_browser(reason: str) -> None:
    if os.environ.get("XCLAW_TEST_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (XCLAW_TEST_REQUIRE_BROWSER=1 makes this a failure)", pytrace=False)
    pytest.skip(f"{reason}; install it with `apt-get install chromium`, or set XCLAW_TEST_CHROMIUM")


@pytest.fixture(scope="module")  # per module: its event loop must not outlive tests/web
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _no_browser(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("Playwright for Python is not installed")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        except Exception as e:  # noqa: BLE001 - a broken Chromium install says why here
            _no_browser(f"Chromium at {CHROMIUM} did not start: {e}")
        from playwright.sync_api import expect

        # expect() has its own 5 s default, apart from the context's: as generous as actions
        # on a loaded CI machine (it returns as soon as the condition holds).
        expect.set_options(timeout=15_000)
        yield b
        b.close()


# What Chromium itself logs, not the page: a refused token, and a WebSocket that cannot
# connect (the page retries). Any other console error fails the test.
EXPECTED_CONSOLE = (
    "WebSocket connection",
    "the server responded with a status of 401",
)
# What Chromium logs for a request the server never answered: expected only once the test
# has killed its server on purpose (tests/web/test_reconnect.py), a failure otherwise.
SERVER_GONE = (
    "net::ERR_CONNECTION_REFUSED",
    "net::ERR_CONNECTION_RESET",
    "net::ERR_CONNECTION_CLOSED",
    "net::ERR_EMPTY_RESPONSE",
    "net::ERR_INCOMPLETE_CHUNKED_ENCODING",
    "net::ERR_CONTENT_LENGTH_MISMATCH",  # a response the kill cut off mid-body
)


class PageErrors:
    """JavaScript errors of a page: any uncaught exception fails the test."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.server_killed = False  # set by the `serve` fixture's servers when killed

    def watch(self, page: Any) -> None:
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        page.on("console", self._console)

    def _console(self, msg: Any) -> None:
        if msg.type != "error" or any(e in msg.text for e in EXPECTED_CONSOLE):
            return
        if self.server_killed and any(e in msg.text for e in SERVER_GONE):
            return
        self.errors.append(f"console.{msg.type}: {msg.text}")


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


S = TypeVar("S", bound=Server)


def adopted(server: S, page_errors: PageErrors) -> S:
    """`server`, whose kill tells `page_errors` that requests the page makes from then on
    may be cut off (Chromium logs them refused): `serve`'s servers, and one a test built."""
    real_kill = server.kill

    def kill(*args: Any, **kwargs: Any) -> int | None:
        page_errors.server_killed = True
        return real_kill(*args, **kwargs)

    server.kill = kill  # type: ignore[method-assign]
    return server


@pytest.fixture
def adopt(page_errors: PageErrors) -> Callable[[S], S]:
    """adopt(server): a server the test built itself, killed as `serve`'s are."""
    return lambda server: adopted(server, page_errors)


@pytest.fixture
def new_page(browser: Any, page_errors: PageErrors) -> Iterator[Callable[..., Any]]:
    """new_page(color_scheme="light") -> a Playwright page in its own context (own storage)."""
    contexts: list[Any] = []

    def make(color_scheme: str = "light", viewport: dict[str, int] | None = None) -> Any:
        ctx = browser.new_context(viewport=viewport or VIEWPORT, color_scheme=color_scheme)
        ctx.set_default_timeout(15_000)
        contexts.append(ctx)
        page = ctx.new_page()
        page_errors.watch(page)
        return page

    yield make
    for ctx in contexts:
        ctx.close()
    assert not page_errors.errors, "JavaScript errors on the page:\n" + "\n".join(
        page_errors.errors
    )


@pytest.fixture
def serve(tmp_path: Path, page_errors: PageErrors) -> Iterator[Callable[..., Server]]:
    """serve(turns, approval="ask", subagent=None, config_extra="") -> a started `xclaw serve`
    running the scripted model (`subagent`: the turns every sub-agent plays; `config_extra`:
    more of its xclaw.yaml)."""
    servers: list[Server] = []

    def make(
        turns: list[dict[str, Any]],
        *,
        approval: str = "ask",
        name: str = "srv",
        subagent: list[dict[str, Any]] | None = None,
        config_extra: str = "",
    ) -> Server:
        root = tmp_path / name
        root.mkdir()
        script = write_script(root / "script.json", turns)
        if subagent is not None:
            script.write_text(json.dumps({"turns": turns, "subagent": {"turns": subagent}}))
        s = adopted(Server(root=root, script=script, approval=approval), page_errors)
        s.config_extra = config_extra
        servers.append(s)
        return s.start()

    yield make
    for s in servers:
        s.kill()


@pytest.fixture
def shot() -> Callable[[Any, str], Path]:
    """shot(page, "name"): a screenshot in test-artifacts/web/ (look at them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str, *, full_page: bool = False) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.wait_for_timeout(120)  # let CSS transitions settle
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return take
