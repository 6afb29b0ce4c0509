"""[runtime] This worker among others on one database: failover and frames across workers.

- Presence: the worker registers and heartbeats (`xclaw workers` lists it), so the others can
  tell a dead owner's lease from a live one.
- Failover: a client attached here to a session another worker drives is told so (`busy`),
  receives that worker's frames, and may answer its approvals; when the lease expires (or its
  owner dies) this worker takes it and resumes the session (resume on reconnect,
  Runtime.resume_if_needed).
- Sweep: at start and then periodically, sessions left Running by a worker that is gone, with
  nobody reconnecting within a grace period, are resumed here, so nothing stays stuck.
- Frames: with PostgreSQL, every frame of a local run is published on the database's channel
  (LISTEN/NOTIFY) and frames of other workers' runs are delivered to the local sockets.
- Changes made elsewhere: a rollback or deletion by the command line or another worker reaches
  the clients attached here (xclaw/runtime/changes.py, both backends).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from xclaw.errors import StepNotFound
from xclaw.people.answered_by import AnsweredBy
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime.approvals import approval_frame, recorded_request
from xclaw.runtime.changes import ChangeParts, ChangeWatcher
from xclaw.runtime.leases import LeaseKeeper
from xclaw.runtime.peers import BusStore, FrameBus
from xclaw.runtime.subscribers import Broadcast
from xclaw.store.base import LeaseStore, RecordReader
from xclaw.store.leases import LeaseInfo
from xclaw.store.steps.model import StepStatus, parse_step_ref
from xclaw.wire.build import for_session, state_frame
from xclaw.wire.shapes import ApprovalRequestJson, Frame
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.cluster")


@dataclass
class _Remote:
    """A session another worker drives, as far as this worker knows."""

    owner: str
    approvals: dict[str, Frame] = field(default_factory=dict)  # stepId -> frame


class ClusterStore(Protocol):
    """The roles the cluster takes of the store: workers and leases, and the steps of a
    session it takes over."""

    @property
    def leases(self) -> LeaseStore: ...

    @property
    def record(self) -> RecordReader: ...


class Answering(Protocol):
    """An approval answered on this worker (Runtime.answer_approval): a forwarded one."""

    def __call__(
        self,
        session_id: str,
        step_ref: str,
        approve: bool,
        by: AnsweredBy | None = None,
        *,
        message: str | None = None,
        edited: Mapping[str, Any] | None = None,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterParts:
    """What the cluster works with, wired once by the runtime's assembly: this worker's
    leases and frames, and what it asks of the runs here."""

    store: ClusterStore
    db: StoreCaller[ClusterStore]
    broadcast: Broadcast
    leases: LeaseKeeper
    redact: Redactor
    workspaces: Workspaces  # (the session containers nobody runs are reaped by the sweep)
    worker_id: str
    grace_s: float | None  # settings: sweep_grace_s (None: the lease's TTL)
    sweep_every_s: float | None  # settings: sweep_every_s (None: the lease's TTL)
    # What it asks of the runs of this worker.
    resume: Callable[[str], Awaitable[bool]]  # interrupted work continued here, if any
    answer: Answering  # a forwarded approval
    cancel: Callable[[str], bool]  # a forwarded cancel
    driven: Callable[[], list[str]]  # the sessions driven here
    busy: Callable[[str], bool]  # a run in flight, here or elsewhere
    changes: ChangeParts
    # The messages left waiting in idle sessions (a kill, another worker's queue) started.
    drain_queues: Callable[[], Awaitable[None]] | None = None
    # A message kept in a session's queue by another worker: `True` when this worker
    # drives (or drove, until its run's end) the session, so it starts the message.
    queued_elsewhere: Callable[[str, bool], None] | None = None


class Cluster:
    def __init__(self, parts: ClusterParts, *, info: dict[str, Any] | None = None) -> None:
        self.parts = parts
        self.store: ClusterStore = parts.store
        self.worker_id = parts.worker_id
        ttl = parts.leases.ttl_s
        self.heartbeat_s = ttl / 3
        self.grace_s = ttl if parts.grace_s is None else parts.grace_s
        self.sweep_s = ttl if parts.sweep_every_s is None else parts.sweep_every_s
        self.info = {"host": socket.gethostname(), "pid": os.getpid(), **(info or {})}
        self.bus: FrameBus | None = None
        self.others = False  # is any other worker alive? (else publishing is wasted)
        self._remote: dict[str, _Remote] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.swept: list[str] = []  # sessions this worker resumed in sweeps (for health/tests)
        self.changes = ChangeWatcher(parts.changes)
        self._stopped = False

    # --- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.parts.leases.info.update(self.info)
        await self.parts.leases.register()
        if isinstance(self.store, BusStore):
            # Frames of sessions nobody here watches are dropped undecoded (keyed by session).
            bus = await asyncio.to_thread(
                self.store.open_bus, self._from_bus, self.parts.broadcast.watched
            )
            bus.publish({"w": self.worker_id, "k": "hello"})
            self.bus = bus
        self.parts.broadcast.peers = self  # frames of runs here reach the other workers
        await self._refresh_others()
        await self.changes.start()
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name="xclaw-heartbeat"))
        self._tasks.append(asyncio.create_task(self._sweep_loop(), name="xclaw-sweep"))
        self._tasks.append(asyncio.create_task(self.changes.run(), name="xclaw-changes"))
        log.info(
            "event=cluster_started worker=%s bus=%s grace_s=%s ttl_s=%s",
            self.worker_id,
            "yes" if self.bus else "no",
            self.grace_s,
            self.parts.leases.ttl_s,
        )

    async def stop(self) -> None:
        """Background work stops; the runtime's own shutdown releases the leases."""
        if self._stopped:
            return
        self._stopped = True
        for task in [*self._tasks, *self._watchers.values()]:
            task.cancel()
        for task in [*self._tasks, *self._watchers.values()]:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("event=cluster_task_failed")
        self._tasks.clear()
        self._watchers.clear()
        if self.bus is not None:
            await asyncio.to_thread(self.bus.close)
        try:
            await self.parts.leases.unregister()
        except Exception:
            log.exception("event=unregister_failed worker=%s", self.worker_id)

    # --- frames between workers ---------------------------------------------------------------
    def publish(self, session_id: str, frame: Frame) -> None:
        """A frame of a run this worker drives, for the clients attached elsewhere."""
        if self.bus is not None and self.others:
            message = {"w": self.worker_id, "k": "frame", "s": session_id, "f": frame}
            self.bus.publish(message, key=session_id)

    def _from_bus(self, message: dict[str, Any]) -> None:
        """Called on the bus thread: hand over to the event loop."""
        if message.get("w") != self.worker_id and self._loop is not None:
            self._loop.call_soon_threadsafe(self._dispatch, message)

    def _dispatch(self, m: dict[str, Any]) -> None:
        kind, sid = m.get("k"), m.get("s")
        if kind == "hello":
            self.others = True
        elif kind == "frame" and isinstance(sid, str) and isinstance(m.get("f"), dict):
            self.others = True
            self._track(sid, str(m.get("w")), m["f"])
            self.parts.broadcast.deliver(sid, m["f"])
        elif kind == "queued" and isinstance(sid, str) and self.parts.queued_elsewhere:
            # Every worker learns that messages wait (a run that starts here goes on to
            # them); the one that drives the session starts the first when its run ends.
            self.parts.queued_elsewhere(sid, m.get("to") == self.worker_id)
        elif m.get("to") == self.worker_id and isinstance(sid, str):
            if kind == "approval":
                # Who answered, as the worker the client is attached to saw it.
                by = AnsweredBy.from_json(m.get("by")) or AnsweredBy.person(None, "unknown")
                try:
                    self.parts.answer(
                        sid,
                        str(m.get("step")),
                        bool(m.get("approve")),
                        by,
                        message=m.get("message"),
                        edited=m.get("input"),
                    )
                except StepNotFound:
                    log.info("event=forwarded_approval_stale session=%s", sid)
            elif kind == "cancel":
                self.parts.cancel(sid)

    def _track(self, sid: str, owner: str, frame: Frame) -> None:
        kind = frame.get("type")
        status = frame.get("status")
        if kind == "reply" or (kind == "status" and status in ("Success", "Failed")):
            self._remote.pop(sid, None)
            return
        remote = self._remote.get(sid)
        if remote is None:
            if kind not in ("status", "approval_request", "tool", "delta", "step"):
                return  # notices and errors do not say who drives
            if sid in self.parts.driven():
                return  # driven here (a late frame of the worker that lost it)
            remote = self._remote[sid] = _Remote(owner)
        remote.owner = owner
        if kind == "approval_request" and frame.get("stepId"):
            remote.approvals[str(frame["stepId"])] = frame
        elif kind == "step":
            step = frame.get("step") or {}
            if step.get("status") != "running":
                remote.approvals.pop(str(step.get("id")), None)

    def driven_elsewhere(self, session_id: str) -> str | None:
        """Who drives it, as told by its frames; known only while a client here watches."""
        remote = self._remote.get(session_id)
        if remote is not None and not self.parts.broadcast.watched(session_id):
            del self._remote[session_id]  # its frames are not listened to any more
            return None
        return remote.owner if remote else None

    def remote_approval_frames(self, session_id: str) -> list[Frame]:
        remote = self._remote.get(session_id)
        return list(remote.approvals.values()) if remote else []

    def forward_approval(
        self,
        session_id: str,
        step_ref: str,
        approve: bool,
        by: AnsweredBy,
        *,
        message: str | None = None,
        edited: dict[str, Any] | None = None,
    ) -> bool:
        remote = self._remote.get(session_id)
        if remote is None or self.bus is None:
            return False
        try:
            key = f"s{parse_step_ref(step_ref, session_id):04d}"
        except StepNotFound:
            return False
        if key not in remote.approvals:
            return False
        self.bus.publish(
            {
                "w": self.worker_id,
                "k": "approval",
                "to": remote.owner,
                "s": session_id,
                "step": key,
                "approve": approve,
                "by": by.to_json(),
                **({"message": message} if message is not None else {}),
                **({"input": edited} if edited is not None else {}),
            }
        )
        return True

    async def announce_queued(self, session_id: str) -> None:
        """A message was kept in the session's queue here: the worker that drives the
        session (its lease's owner, if not this one) learns of it at once, so its run's end
        starts it — or, if the run ended meanwhile, it starts it now — instead of the next
        sweep; the other workers note that messages wait."""
        if self.bus is None or not self.others:
            return
        info = await self.parts.db(self.store.leases.lease_info, session_id)
        owner = info.owner if info.owner and info.owner != self.worker_id else None
        message: dict[str, Any] = {"w": self.worker_id, "k": "queued", "s": session_id}
        if owner is not None:
            message["to"] = owner
        self.bus.publish(message)

    def forward_cancel(self, session_id: str) -> bool:
        remote = self._remote.get(session_id)
        if remote is None or self.bus is None:
            return False
        self.bus.publish({"w": self.worker_id, "k": "cancel", "to": remote.owner, "s": session_id})
        return True

    # --- failover -----------------------------------------------------------------------------
    async def observe(self, info: LeaseInfo) -> None:
        """Another worker drives the session a client attached to here: remember who, send
        the approvals it waits for (from the record), and take over if its lease lapses."""
        sid = info.session_id
        known = sid in self._remote
        remote = self._remote.setdefault(sid, _Remote(str(info.owner)))
        remote.owner = str(info.owner)
        if not known and self.bus is not None:  # answers travel over the bus only
            for frame in await self._recorded_approvals(sid):
                if frame["stepId"] not in remote.approvals:
                    remote.approvals[frame["stepId"]] = frame
                    self.parts.broadcast.deliver(sid, frame)
        self._watch(sid, info.expires_in_s)

    def forget(self, session_id: str) -> None:
        self._remote.pop(session_id, None)

    async def _recorded_approvals(self, sid: str) -> list[ApprovalRequestJson]:
        db = self.parts.db
        steps = await db(self.store.record.steps, sid, agent=None, statuses=[StepStatus.RUNNING])
        requests = (recorded_request(s) for s in steps)
        return [
            for_session(approval_frame(r, self.parts.redact), sid)
            for r in requests
            if r is not None
        ]

    def _watch(self, sid: str, wait_s: float) -> None:
        old = self._watchers.get(sid)
        if old is not None and not old.done():
            return

        async def watch() -> None:
            delay, idle = wait_s, 0
            while self.parts.broadcast.watched(sid):
                await asyncio.sleep(delay + 0.05)
                try:
                    if await self.parts.resume(sid):
                        return  # taken over: this worker drives it now
                    info = await self.parts.db(self.store.leases.lease_info, sid)
                except Exception as e:  # noqa: BLE001 - the database is away: try later
                    log.warning("event=watch_failed session=%s error=%r", sid, str(e)[:200])
                    delay = 1.0
                    continue
                if info.live:
                    delay, idle = info.expires_in_s, 0
                    continue
                idle += 1  # nobody drives it, and it needs no resume: nothing to watch
                if idle >= 2:
                    self.forget(sid)
                    await self._tell_idle(sid)
                    return
                delay = 0.2

        task = asyncio.create_task(watch(), name=f"xclaw-watch-{sid}")
        self._watchers[sid] = task
        task.add_done_callback(
            lambda t: self._watchers.pop(sid, None) if self._watchers.get(sid) is t else None
        )

    async def _tell_idle(self, sid: str) -> None:
        """The clients here were told `busy` while another worker drove the session; that
        worker is gone and nobody drives it now (this one declined it, or it was left at
        rest): say so, or their input stays locked on a run that no longer exists."""
        if self.parts.busy(sid) or not self.parts.broadcast.watched(sid):
            return
        session = await self.parts.db(self.store.record.get_session, sid)
        if not self.parts.busy(sid):
            self.parts.broadcast.deliver(sid, for_session(state_frame(session, busy=False), sid))

    # --- presence and the sweep -----------------------------------------------------------------
    async def _refresh_others(self) -> None:
        workers = await self.parts.db(self.store.leases.workers)
        self.others = any(w.worker_id != self.worker_id and w.alive is not False for w in workers)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.parts.db(self.store.leases.heartbeat, self.worker_id)
                await self._refresh_others()
            except Exception as e:  # noqa: BLE001 - the database is away: try later
                log.warning(
                    "event=heartbeat_failed worker=%s error=%r", self.worker_id, str(e)[:200]
                )

    async def _sweep_loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("event=sweep_failed worker=%s", self.worker_id)
            await asyncio.sleep(self.sweep_s)

    async def sweep(self) -> list[str]:
        """Resume sessions left Running by a worker that is gone (lease expired for longer
        than the grace period, or its owner dead as long); forget dead workers' rows."""
        resumed: list[str] = []
        # Asked of the store in SQL: the sessions at rest (thousands, waiting for their next
        # instruction) are never loaded, so a sweep costs the same on a server a year old.
        due = await self.parts.db(self.store.leases.sweep_targets, round(self.grace_s * 1000))
        for info in due.sessions:
            if not self.parts.broadcast.watched(info.session_id) and await self.parts.resume(
                info.session_id
            ):
                log.info(
                    "event=swept session=%s from=%s worker=%s",
                    info.session_id,
                    info.owner,
                    self.worker_id,
                )
                resumed.append(info.session_id)
        if self.parts.drain_queues is not None:  # what waits with no run to wait for
            await self.parts.drain_queues()
        # A dead worker's row goes once none of its leases can still be taken early.
        for owner in due.dead_workers:
            await self.parts.db(self.store.leases.forget_worker, owner)
        self.swept.extend(resumed)
        spaces = self.parts.workspaces
        if spaces.containers is not None:  # the session containers nobody runs
            for reaped in await self.parts.db(spaces.reap_containers):
                log.info(
                    "event=container_%s session=%s why=%r worker=%s",
                    reaped.action,
                    reaped.session_id,
                    reaped.why,
                    self.worker_id,
                )
        return resumed
