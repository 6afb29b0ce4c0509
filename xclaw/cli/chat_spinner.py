"""[cli] The "working" line of `xclaw chat`: a spinner with how long the step in flight (a model
call, a tool) has run, while a run is in flight and nothing streams, on a terminal only (a
pipe gets plain transcript lines). Each step counts from its own start, so a command started
after a slow model call or a long approval wait starts at 0 s.

It draws on its own line with carriage returns and erases itself before anything else is
printed (the client calls `clear` before every frame it shows), so it never ends up inside
the transcript.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import IO

from xclaw.terminal.text import printable

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Spinner:
    def __init__(
        self, stream: IO[str], *, enabled: bool, columns: Callable[[], int] | None = None
    ) -> None:
        self.stream = stream
        self.enabled = enabled
        # The terminal's width, asked at every draw (it may be resized).
        self.columns = columns or (lambda: shutil.get_terminal_size((80, 24)).columns)
        self.started: float | None = None
        self.label = "thinking"
        self.step_id: str | None = None
        self.shown = False
        self._tick = 0

    def start(self, label: str = "thinking") -> None:
        """A run began (or the client attached to one in flight): count from now."""
        self.started = time.monotonic()
        self.label = label
        self.step_id = None

    def step(self, label: str, step_id: str | None) -> None:
        """A step began (several frames may announce one step: counted from the first)."""
        if self.started is None:
            return  # no run in flight: nothing to time
        if step_id is None or step_id != self.step_id:
            self.started = time.monotonic()
        self.label = label
        self.step_id = step_id

    def stop(self) -> None:
        self.clear()
        self.started = None

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False

    def text(self) -> str | None:
        """The working line as it reads now (None: no run in flight), fitted to one row:
        drawn here, or by the prompt shown while a run is in flight (xclaw/cli/chat.py)."""
        if self.started is None:
            return None
        self._tick += 1
        elapsed = time.monotonic() - self.started
        frame = FRAMES[self._tick % len(FRAMES)]
        label = printable(self.label)  # holds a tool name the model chose
        text = f"{frame} {label} · {elapsed:.0f}s  (Ctrl+C stops)"
        room = max(10, self.columns() - 1)  # one line, or "\r" could not erase it
        if len(text) > room:
            text = text[: room - 1] + "…"
        return text

    def draw(self) -> None:
        if not self.enabled or self.started is None:
            return
        text = self.text()
        self.stream.write(f"\r\x1b[2K\x1b[2m{text}\x1b[0m")
        self.stream.flush()
        self.shown = True
