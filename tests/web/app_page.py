"""The web page as the tests see it: what a person would click and read, by role and text
where possible, by the page's own class names where the structure is the point."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.gateway.harness import Server

LOCKED = re.compile(r"\blocked\b")


@dataclass
class App:
    page: Page
    server: Server
    frames: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("websocket", self._watch_socket)

    def _watch_socket(self, ws: Any) -> None:
        def received(payload: str | bytes) -> None:
            with contextlib.suppress(ValueError):
                self.frames.append(json.loads(payload))

        ws.on("framereceived", received)

    # --- navigation ---------------------------------------------------------------------------
    def open(self, token: str | None = None) -> App:
        self.page.goto(f"{self.server.http}/?token={token or self.server.token}")
        self.wait_connected()
        return self

    def reload(self) -> App:
        self.frames.clear()
        self.page.reload()
        self.wait_connected()
        return self

    def wait_connected(self) -> None:
        expect(self.page.locator("#conn")).to_have_attribute("data-state", "open")
        expect(self.page.locator("#session-id")).not_to_be_empty()

    # --- reading ------------------------------------------------------------------------------
    @property
    def messages(self) -> Locator:
        return self.page.locator("#messages")

    @property
    def status(self) -> Locator:
        return self.page.locator("#status-pill")

    def session_id(self) -> str:
        return str(self.page.evaluate("localStorage.getItem('xclaw_session_id')"))

    def answers(self) -> Locator:
        return self.page.locator("#messages .msg.assistant")

    def tool_lines(self) -> Locator:
        return self.page.locator("#messages .tool-line")

    def step(self, step_id: str) -> Locator:
        return self.page.locator(f'#trace .trace-node[data-step="{step_id}"]')

    def step_ids(self) -> list[str]:
        return list(
            self.page.locator("#trace .trace-node").evaluate_all(
                "els => els.map(e => e.dataset.step)"
            )
        )

    def expect_step_ids(self, ids: list[str], timeout: float = 15_000) -> None:
        """The trace shows exactly these steps, waited for: the tree is drawn from its own
        frames, after the chat's messages a test usually waits on."""
        with contextlib.suppress(PlaywrightTimeout):
            self.page.wait_for_function(
                "ids => JSON.stringify([...document.querySelectorAll('#trace .trace-node')]"
                ".map(e => e.dataset.step)) === JSON.stringify(ids)",
                arg=ids,
                timeout=timeout,
            )
        assert self.step_ids() == ids

    def frames_of(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == kind]

    # --- acting -------------------------------------------------------------------------------
    def send(self, text: str) -> None:
        box = self.page.locator("#input")
        box.fill(text)
        box.press("Enter")

    def send_and_wait(self, text: str, answer: str, timeout: float = 15_000) -> None:
        # Enter in a locked composer (a run or a /compact still in flight) sends nothing and
        # keeps the text in the box, as a user sees it: wait for the composer first.
        self.wait_idle()
        before = self.page.locator("#messages .msg.assistant.final").count()
        self.send(text)
        expect(self.page.locator("#messages .msg.assistant.final")).to_have_count(
            before + 1, timeout=timeout
        )
        expect(self.page.locator("#messages .msg.assistant.final").last).to_contain_text(answer)
        self.wait_idle()

    def wait_idle(self) -> None:
        expect(self.page.locator("#composer")).not_to_have_class(LOCKED)
        expect(self.page.locator("#composer .send")).to_be_enabled()

    def open_step(self, step_id: str) -> Locator:
        node = self.step(step_id)
        node.locator(":scope > .trace-row").click()
        expect(node.locator(":scope > .trace-detail")).to_be_visible()
        return node

    def dialog(self) -> Locator:
        return self.page.locator("dialog[open]")
