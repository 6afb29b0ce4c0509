"""[runtime] Where a session's frames go: the clients attached to it on this worker (`Subscribers`),
and, when this worker serves among others, theirs (`Broadcast.peers`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from xclaw.recorder.redact import Redactor
from xclaw.runtime.peers import Peers
from xclaw.wire.build import for_session
from xclaw.wire.shapes import Frame, FrameJson

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


class Broadcast:
    """Frames to every client of a session, redacted. The cluster, when it starts, puts
    itself in `peers`: frames of runs driven here then reach the clients attached to the
    other workers too (xclaw/runtime/cluster.py)."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.subscribers = Subscribers()
        self.peers: Peers | None = None

    def emit(self, session_id: str, frame: FrameJson, *, redacted: bool = False) -> None:
        """A frame to every client of the session, here and on other workers. Redacted whole
        here unless `redacted`: the recorder's events (every value in them redacted where it
        was recorded, xclaw/recorder/recorder.py) and the reply are, and they are most of
        the frames of a run."""
        if not redacted:
            frame = self.redact(frame)
        sent = for_session(frame, session_id)
        self.subscribers.deliver(session_id, sent)
        if self.peers is not None:
            self.peers.publish(session_id, sent)  # to clients attached to other workers

    def deliver(self, session_id: str, frame: Frame) -> None:
        """A frame to the sockets attached to this worker only."""
        self.subscribers.deliver(session_id, frame)

    def watched(self, session_id: str) -> bool:
        """Is any client attached to the session here?"""
        return self.subscribers.has(session_id)
