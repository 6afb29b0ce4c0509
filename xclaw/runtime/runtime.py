"""The runtime facade the gateway and the headless CLI drive: one object that owns the
per-session runs, their subscribers and their pending approvals.

Frames emitted to subscribers are the server frames of docs/protocol.md (dicts), each carrying
`sessionId`. Every method is safe to call for an unknown session (SessionNotFound) or a bad
step reference (StepNotFound); none of them can crash the caller's event loop.

What a turn does is the turn plan's (turn_plan.py), carried out by drive.py; how a run ends,
outcomes.py. Here: whether and how a turn starts (its lease, the session's configuration),
the runs in flight, attaching, time travel and shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xclaw.answered_by import AnsweredBy
from xclaw.config import Settings
from xclaw.errors import (
    ConfigError,
    SessionBusy,
    SessionNotFound,
    StepNotFound,
    StoreError,
)
from xclaw.llm import prices
from xclaw.llm.base import Model
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime import approvals
from xclaw.runtime.agreement import RunConfig
from xclaw.runtime.leases import LeaseKeeper
from xclaw.runtime.peers import Peers
from xclaw.runtime.rebuild import Rebuilder
from xclaw.runtime.runs import Runs
from xclaw.runtime.session_configs import SessionConfigs
from xclaw.runtime.session_frames import history_frame, status_frame
from xclaw.runtime.subscribers import FrameSink, Subscribers
from xclaw.runtime.turn_start import TurnStarts
from xclaw.runtime.wiring import Toolbox, default_toolbox
from xclaw.store.base import RollbackResult, StepWriter, Store
from xclaw.store.leases import Lease, new_worker_id
from xclaw.store.model import MAIN_AGENT, Session, Status, Step
from xclaw.store.rows import check_session_id, new_session_id, now_ms
from xclaw.teams import Actor
from xclaw.telemetry.exporter import start_exporter
from xclaw.threads import BlockingCalls
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.runtime")


class Runtime:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        model: Model | None = None,
        toolbox: Toolbox | None = None,
        worker_id: str | None = None,
        redactor: Redactor | None = None,
        model_specs: Sequence[str] | None = None,
    ) -> None:
        """`model_specs`: the provider chain `model` was built from (the server builds it from
        the settings); by default the settings' chain, or the name of a `model` given alone."""
        self.store = store
        self.settings = settings
        self._model = model
        # Every step frame and listing prices llm_calls with the providers' prices + xclaw.yaml.
        prices.configure(settings.prices)
        self.toolbox = toolbox or default_toolbox(settings)
        # Snapshots and restores of the session workspaces (files follow memory).
        self.workspaces = Workspaces.from_settings(store, settings, self.toolbox.workspace_root)
        # What is scrubbed from every record and frame; `self.redact.add(values)` adds more
        # (the server adds the token it generated; tool servers add their env values).
        self.redact = redactor or Redactor(settings.secret_values())
        # Store calls are short, or wait on the one writer: a few threads serve a thousand
        # sessions, and more would only contend for the GIL (bench/HISTORY.md).
        self._threads = BlockingCalls(max_threads=16, name="xclaw-store")
        self.db = StoreCaller(store, self._threads)
        # An agent's messages from its steps, as this worker runs them.
        self.rebuild = Rebuilder(store, self.toolbox)
        self._subs = Subscribers()
        # One driver per session across processes and hosts (one driver): a lease per run.
        self.worker_id = worker_id or new_worker_id()
        self.leases = LeaseKeeper(store, self.db, self.worker_id, settings.lease_ttl_s)
        # xclaw.runtime.cluster.Cluster when serving: frames and failover across workers.
        self.cluster: Peers | None = None
        # OpenTelemetry export of each run's turn (None unless OTEL_*/xclaw.yaml ask for it).
        self.telemetry = start_exporter(store, settings.otel, redact=self.redact.text)
        # What this worker runs sessions with, registered for the others and `xclaw workers`;
        # a session records its own when it starts (xclaw/runtime/agreement.py).
        if model_specs is None:
            model_specs = [p.model for p in settings.providers] if model is None else [model.name]
        self.run_config = RunConfig(tuple(model_specs), settings.approval.mode)
        self.leases.info.update(self.run_config.to_json())
        # `xclaw run --approval MODE`: the user chose this run's mode (it is recorded).
        self.explicit_approval = False
        self.configs = SessionConfigs(self)
        self.runs = Runs(self)
        self._starts = TurnStarts(self)

    # --- model ----------------------------------------------------------------------------
    @property
    def model(self) -> Model:
        """Built on first use, so a server without a configured model still starts."""
        if self._model is None:
            from xclaw.llm.factory import build_model

            self._model = build_model(self.settings)
        return self._model

    def require_model(self) -> None:
        """Raise ConfigError, saying how to configure a model, when there is none."""
        _ = self.model

    def model_name(self) -> str | None:
        try:
            return self.model.name
        except ConfigError:
            return None

    def caller(self, lease: Lease | None) -> StoreCaller[StepWriter]:
        """The writes of a run: with its lease, every one carries the fencing token."""
        return StoreCaller(self.store.driven(lease), self._threads) if lease else self.db

    # --- attaching ----------------------------------------------------------------------------
    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]:
        return self._subs.subscribe(session_id, sink)

    def emit(self, session_id: str, frame: dict[str, Any], *, redacted: bool = False) -> None:
        """A frame to every client of the session, here and on other workers. Redacted whole
        here unless `redacted`: the recorder's events (every value in them redacted where it
        was recorded, xclaw/recorder/recorder.py) and the reply are, and they are most of
        the frames of a run."""
        if not redacted:
            frame = self.redact(frame)
        frame = {**frame, "sessionId": session_id}
        self._subs.deliver(session_id, frame)
        if self.cluster is not None:
            self.cluster.publish(session_id, frame)  # to clients attached to other workers

    def deliver(self, session_id: str, frame: dict[str, Any]) -> None:
        """A frame to the sockets attached to this worker only."""
        self._subs.deliver(session_id, frame)

    def has_subscribers(self, session_id: str) -> bool:
        return self._subs.has(session_id)

    def driven_sessions(self) -> list[str]:
        """Sessions this worker drives right now (under its lease)."""
        return self.runs.driven()

    async def open(self, session_id: str | None) -> tuple[Session, bool]:
        if session_id:
            found = await self.db(self.store.find_session, session_id)
            if found is not None:
                return found, False
        created = await self.db(self.store.create_session, session_id=session_id or None)
        return created, True

    async def peek(self, session_id: str | None) -> tuple[Session, bool]:
        """The session to attach to: (found, False), or (a session not yet written, True)
        under the given id or a fresh one. A session exists from its first message: `send`
        with create=True writes it then, so opening a page or a client leaves nothing behind."""
        if session_id:
            found = await self.db(self.store.find_session, session_id)
            if found is not None:
                return found, False
            check_session_id(session_id)  # ValueError: a malformed id is refused now
        now = now_ms()
        sid = session_id or new_session_id()
        unsaved = Session(
            session_id=sid, title="", status=Status.INIT, created_at=now, updated_at=now
        )
        return unsaved, True

    def history_frame(self, session_id: str) -> dict[str, Any]:
        steps = self.store.steps(session_id, agent=MAIN_AGENT)
        hist = self.rebuild(steps, new_input=True)
        busy = self.is_busy(session_id)
        return history_frame(session_id, steps, hist, busy=busy, redact=self.redact)

    def status_frame(self, session: Session, *, busy: bool | None = None) -> dict[str, Any]:
        """A `status` frame with the session's state in words (xclaw.store.model.session_state)."""
        if busy is None:
            busy = self.is_busy(session.session_id)
        return status_frame(session, busy=busy)

    def is_busy(self, session_id: str) -> bool:
        """A run is in flight here, or (as far as this worker knows) on another worker."""
        return session_id in self.runs or (
            self.cluster is not None and self.cluster.driven_elsewhere(session_id) is not None
        )

    def pending_approval_frames(self, session_id: str) -> list[dict[str, Any]]:
        run = self.runs.get(session_id)
        if run is None:  # driven by another worker: the requests it sent over the bus
            if self.cluster is None:
                return []
            return [
                {**f, "sessionId": session_id}
                for f in self.cluster.remote_approval_frames(session_id)
            ]
        return [
            {**approvals.approval_frame(req, self.redact), "sessionId": session_id}
            for req in approvals.waiting(run)
        ]

    # --- starting a turn (xclaw/runtime/turn_start.py) ---------------------------------------
    async def resume_if_needed(self, session_id: str, *, failed: bool = False) -> bool:
        """Continue interrupted work (Paused, or Running after a crash). With `failed`, an
        explicit request by the user, also a Failed session: the loop picks up where the
        record stops, so the call that failed is made again (an LLM error) and unanswered
        tool calls are settled as after a crash. Never automatic: a client attaching to a
        Failed session does not retry a failing provider behind the user's back."""
        return await self._starts.resume(session_id, failed=failed)

    async def send(
        self, session_id: str, text: str, *, create: bool = False, actor: Actor | None = None
    ) -> None:
        """Start a run with the user's `text`. With `create`, an unknown session is created
        here, at its first message (only once a model is configured). `actor`: who sent it,
        recorded with the message when it is a user of a shared server (docs/teams.md)."""
        await self._starts.message(session_id, text, create=create, actor=actor)

    async def compact(self, session_id: str) -> None:
        """`/compact`: summarise the session's conversation now (one model call, recorded as
        its own step), so later turns start from the summary. Between turns only."""
        await self._starts.compaction(session_id)

    def own_directory(self, given: str | Path) -> Path:
        """A directory a new session may work in instead of its default workspace (an
        editor's project, xclaw/workspace/own_dir.py): resolved, or ConfigError saying why
        it is refused (/, the home directory, xclaw's home, …)."""
        from xclaw.workspace.own_dir import check_own_dir

        s = self.settings
        return check_own_dir(
            given, home=s.home, workspace_root=self.workspaces.root, database=s.database
        )

    def title_of(self, title: str) -> str:
        """A title as it may be stored and shown: redacted (whoever gave it: the first
        message, /title, /new, /fork, the API, xclaw fork --title)."""
        return self.redact.text(title)

    async def rename(self, session_id: str, title: str) -> Session:
        """Set the title and tell every attached client (a `renamed` frame)."""
        title = self.title_of(title)
        session = await self.db(self.store.update_session, session_id, title=title)
        self.emit(session_id, {"type": "renamed", "title": session.title})
        return session

    # --- the runs in flight (xclaw/runtime/runs.py) ------------------------------------------
    def answer_approval(
        self, session_id: str, step_ref: str, approve: bool, by: AnsweredBy | None = None
    ) -> None:
        """`by`: who answered, as the record will say (xclaw/answered_by.py); None: a person
        through a client that did not say which."""
        by = by or AnsweredBy.person(None, "unknown")
        run = self.runs.get(session_id)
        if run is not None:
            if approvals.answer(run, session_id, step_ref, approve, by):
                return
        elif self.cluster is not None and self.cluster.forward_approval(
            session_id, step_ref, approve, by
        ):
            return  # the worker that drives the session asked; it gets the answer
        raise StepNotFound(str(step_ref), session_id)

    def cancel(self, session_id: str) -> bool:
        run = self.runs.get(session_id)
        if run is None:  # perhaps driven by another worker: ask it
            return self.cluster is not None and self.cluster.forward_cancel(session_id)
        run.cancel.set()
        return True

    async def wait_idle(self, session_id: str) -> None:
        await self.runs.wait_idle(session_id)

    # --- time travel and views --------------------------------------------------------------
    def steps(self, session_id: str, n: int = 10) -> list[Step]:
        return self.store.latest_steps(session_id, n)

    async def rollback(self, session_id: str, step_ref: str) -> RollbackResult:
        self._refuse_if_busy(session_id, "roll back")
        run = self.runs.claim(session_id)  # nothing starts here meanwhile
        try:
            lease = await self.leases.acquire(session_id)  # nor on another worker
            try:
                result = await self.db(self.workspaces.rollback, session_id, step_ref)  # files too
            finally:
                await self.leases.release(lease)
        finally:
            self.runs.unclaim(session_id, run)
        self.emit(session_id, self.status_frame(result.session, busy=False))
        return result

    async def fork(self, session_id: str, step_ref: str, title: str | None = None) -> Session:
        title = None if title is None else self.title_of(title)
        return await self.db(self.workspaces.fork, session_id, step_ref, title)  # files too

    async def delete(self, session_id: str) -> None:
        """The session, its steps, snapshots and workspace files. Refused during a run."""
        self._refuse_if_busy(session_id, "delete a session")
        await self.db(self.workspaces.delete, session_id)

    def _refuse_if_busy(self, session_id: str, what: str) -> None:
        if self.is_busy(session_id):
            raise SessionBusy(f"cannot {what} while a run is in flight; cancel it first")

    async def shutdown(self) -> None:
        self.runs.stopping = True
        if self.cluster is not None:
            await self.cluster.stop()
        await self.runs.stop()
        try:
            await self.toolbox.close()  # MCP server processes and connections
        except Exception:
            log.exception("could not stop the MCP servers")
        if self.cluster is None:  # (a serving worker's cluster unregistered it already)
            try:
                await self.leases.unregister()
            except StoreError as e:  # e.g. a full disk: the worker's row is simply stale
                log.warning("could not unregister worker %s: %s", self.worker_id, e.message)
            except Exception:
                log.exception("could not unregister worker %s", self.worker_id)
        self._threads.shutdown(wait=True)
        if self.telemetry is not None:  # flushed before exit, in bounded time
            await asyncio.to_thread(self.telemetry.close, 5.0)


__all__ = ["FrameSink", "Runtime", "SessionNotFound"]
