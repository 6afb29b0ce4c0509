"""A slow gateway, as the page sees it: every WebSocket frame passes through this gate
(Playwright's WebSocket routing, a real connection to the real server behind it), and the
gateway's frames to the page can be held back and let go later, in order. What the page
sends goes on at once, so the gateway acts while the page has not heard its answer yet."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, WebSocketRoute


class FrameGate:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.holding = False
        self.held: list[tuple[WebSocketRoute, str]] = []
        self.sent: list[dict[str, Any]] = []  # every frame the page sent, parsed
        self.received: list[dict[str, Any]] = []  # every frame the gateway sent, parsed
        self.since = 0  # where in `sent` the latest hold began
        page.route_web_socket(re.compile(r"/ws(\?.*)?$"), self._route)

    def _route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            self.sent.append(json.loads(message))
            server.send(message)

        def from_server(message: str | bytes) -> None:
            self.received.append(json.loads(message))
            if self.holding:
                self.held.append((ws, str(message)))
            else:
                ws.send(message)

        ws.on_message(from_page)
        server.on_message(from_server)

    def hold(self) -> None:
        """From now on the gateway's frames wait here."""
        self.holding = True
        self.since = len(self.sent)

    def release(self) -> None:
        """Let every held frame through, in order; later frames pass at once again."""
        # Still holding while flushing: a frame arriving during a send queues behind the rest.
        while self.held:
            self.release_one()
        self.holding = False

    def release_one(self) -> dict[str, Any]:
        """Let the oldest held frame through, still holding the rest; returns it."""
        ws, message = self.held.pop(0)
        ws.send(message)
        return dict(json.loads(message))

    def wait_for(self, what: str, ok: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait (in the page's event loop, so the gate's handlers run) until ok() holds."""
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what}; the page sent {self.sent[-5:]}, "
                    f"the gateway sent {self.received[-5:]}"
                )
            self.page.wait_for_timeout(50)

    def held_frames(self) -> list[dict[str, Any]]:
        return [json.loads(m) for _, m in self.held]

    def sent_messages(self) -> list[dict[str, Any]]:
        """The `message` frames the page sent since the latest hold()."""
        return [f for f in self.sent[self.since :] if f.get("type") == "message"]
