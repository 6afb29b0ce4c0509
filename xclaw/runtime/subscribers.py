"""The clients attached to each session on this worker: where its frames go."""

from __future__ import annotations

import logging
from collections.abc import Callable

from xclaw.wire.shapes import Frame

log = logging.getLogger("xclaw.runtime")

FrameSink = Callable[[Frame], None]


class Subscribers:
    def __init__(self) -> None:
        self._sinks: dict[str, list[FrameSink]] = {}

    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]:
        """Frames of `session_id` go to `sink` until the returned function is called."""
        sinks = self._sinks.setdefault(session_id, [])
        sinks.append(sink)

        def unsubscribe() -> None:
            if sink in sinks:
                sinks.remove(sink)
            if not sinks:
                self._sinks.pop(session_id, None)

        return unsubscribe

    def deliver(self, session_id: str, frame: Frame) -> None:
        for sink in list(self._sinks.get(session_id, ())):
            try:
                sink(frame)
            except Exception:  # one broken client must not stop the run or the others
                log.exception("frame sink failed")

    def has(self, session_id: str) -> bool:
        return bool(self._sinks.get(session_id))
