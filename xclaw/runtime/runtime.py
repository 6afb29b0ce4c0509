"""The runtime facade the gateway and the headless CLI drive: one object that owns the
per-session runs, their subscribers and their pending approvals.

Frames emitted to subscribers are the server frames of PROTOCOL.md (dicts), each carrying
`sessionId`. Every method is safe to call for an unknown session (SessionNotFound) or a bad
step reference (StepNotFound); none of them can crash the caller's event loop.
"""

from __future__ import annotations

from typing import Any, Callable

from xclaw.config import Settings
from xclaw.llm.base import Model
from xclaw.store.base import RollbackResult, Store
from xclaw.store.model import Session, Step

FrameSink = Callable[[dict[str, Any]], None]


class Runtime:
    def __init__(self, store: Store, settings: Settings, *, model: Model | None = None) -> None:
        raise NotImplementedError

    # --- attaching ----------------------------------------------------------------------
    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]:
        """Deliver every frame of the session to `sink` (called on the event loop, must not
        block); returns the unsubscribe function."""
        raise NotImplementedError

    async def open(self, session_id: str | None) -> tuple[Session, bool]:
        """R6: a known id → (session, False); None or unknown → a new session (with that id
        when it is a valid id) → (session, True). Raises ValueError for a malformed id."""
        raise NotImplementedError

    def history_frame(self, session_id: str) -> dict[str, Any]:
        """The `history` frame: `content` (the seed's JSON string of {role, content}) and
        `messages` (structured, with tool calls/results and step ids)."""
        raise NotImplementedError

    async def resume_if_needed(self, session_id: str) -> bool:
        """R6-R9 on reconnect: Running (not awaiting input) with no run in flight → resume in
        the background; Paused with no run in flight → resume, which asks the pending
        approval again; otherwise nothing. True when a run was started."""
        raise NotImplementedError

    def pending_approval_frames(self, session_id: str) -> list[dict[str, Any]]:
        """`approval_request` frames for approvals waiting in a run in flight (to send to a
        socket that just attached)."""
        raise NotImplementedError

    def is_busy(self, session_id: str) -> bool:
        raise NotImplementedError

    # --- driving --------------------------------------------------------------------------
    async def send(self, session_id: str, text: str) -> None:
        """Start a turn with user input in the background. Raises SessionBusy when a run is
        in flight (one driver per session)."""
        raise NotImplementedError

    def answer_approval(self, session_id: str, step_ref: str, approve: bool) -> None:
        """Resolve a pending approval. Raises StepNotFound when no such approval waits."""
        raise NotImplementedError

    def cancel(self, session_id: str) -> bool:
        """Stop the run after the step in flight. False when nothing was running."""
        raise NotImplementedError

    async def wait_idle(self, session_id: str) -> None:
        raise NotImplementedError

    # --- time travel and views (refuse while a run is in flight: SessionBusy) --------------
    def steps(self, session_id: str, n: int = 10) -> list[Step]:
        raise NotImplementedError

    async def rollback(self, session_id: str, step_ref: str) -> RollbackResult:
        raise NotImplementedError

    async def fork(self, session_id: str, step_ref: str, title: str | None = None) -> Session:
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Stop every run; steps in flight end as interrupted, never half-written."""
        raise NotImplementedError
