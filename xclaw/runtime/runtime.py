"""[runtime] The runtime's assembly and its facade: the one place the runtime's parts are wired
together, and the object the gateway, the CLI and the Python API drive.

Each part receives the few things it uses as a small frozen value (`DriveParts`,
`RunsParts`, `StartParts`, `ConfigParts`, `ClusterParts`, `ChangeParts`), built here; no
other module of the runtime imports this one (tests/test_layering.py).

Frames emitted to subscribers are the server frames of docs/protocol.md (dicts), each carrying
`sessionId`. Every method is safe to call for an unknown session (SessionNotFound) or a bad
step reference (StepNotFound); none of them can crash the caller's event loop.

What a turn does is the turn plan's (turn_plan.py), carried out by drive.py; how a run ends,
outcomes.py; whether and how it starts, turn_start.py; the runs in flight, runs.py. Here:
attaching, time travel, shutdown, and the facade over the parts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from xclaw.agents.catalog import AgentCatalog, declared_agents
from xclaw.agents.definition import AgentDefinition
from xclaw.config.settings import Settings
from xclaw.errors import (
    BadRequest,
    ConfigError,
    MessageRecorded,
    SessionBusy,
    SessionNotFound,
    StepNotFound,
    StoreError,
    UnknownAgent,
)
from xclaw.llm.base import Model
from xclaw.llm.prices import PriceTable
from xclaw.people.answered_by import AnsweredBy
from xclaw.people.teams import Actor
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime import approvals
from xclaw.runtime.agent_choice import AgentRecord, with_agent
from xclaw.runtime.agent_setup import AgentSetups
from xclaw.runtime.agreement import RunConfig
from xclaw.runtime.budgets import Budgets, check_caps, parse_target
from xclaw.runtime.budgets import report as budget_report
from xclaw.runtime.changes import ChangeParts
from xclaw.runtime.cluster import Cluster, ClusterParts
from xclaw.runtime.drive import DriveParts, agent_config, drive_with
from xclaw.runtime.inputs import InputParts, Inputs, Submitted
from xclaw.runtime.leases import LeaseKeeper
from xclaw.runtime.peers import Peers
from xclaw.runtime.rebuild import Rebuilder
from xclaw.runtime.rollbacks import Outcome, Preview, Rollbacks
from xclaw.runtime.run import Run
from xclaw.runtime.runs import Runs, RunsParts
from xclaw.runtime.session_configs import ConfigParts, SessionConfigs
from xclaw.runtime.session_frames import session_history
from xclaw.runtime.subscribers import Broadcast, FrameSink
from xclaw.runtime.turn_start import StartParts, TurnStarts, resumable
from xclaw.runtime.wiring import Toolbox, default_toolbox
from xclaw.sandbox.container.listing import SessionProcesses, session_processes
from xclaw.store.base import StepWriter, Store
from xclaw.store.leases import Lease, new_worker_id
from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import MAIN_AGENT, Session, Status, Step, display_id
from xclaw.store.steps.rows import check_session_id, new_session_id, now_ms
from xclaw.store.steps.writes import BudgetStop, SetBudget
from xclaw.telemetry.exporter import start_exporter
from xclaw.threads import BlockingCalls
from xclaw.tools.base import Tool
from xclaw.wire.build import (
    for_session,
    notice_frame,
    queue_frame,
    renamed_frame,
    rolledback_frame,
    state_frame,
    step_frame,
)
from xclaw.wire.busy import SESSION_KEY as BUSY_KEY
from xclaw.wire.busy import BusyPolicy, check_policy, policy_for
from xclaw.wire.shapes import Frame, FrameJson, HistoryJson, QueueJson, StatusJson
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.runtime")

T = TypeVar("T")


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
        # What every step frame and listing of this runtime prices llm_calls with: the
        # providers' prices, then xclaw.yaml's.
        self.prices = PriceTable.with_overrides(settings.prices)
        # The caps on model spend and this worker's running totals (docs/budgets.md).
        self.budgets = Budgets(settings.budgets.caps(), self.prices)
        if self.budgets.caps_shared():  # their counters may be older than these caps
            store.budgets.drop_budget_counters()
        self.toolbox = toolbox or default_toolbox(settings)
        # Snapshots and restores of the session workspaces (files follow memory).
        self.workspaces = Workspaces.from_settings(
            store, settings.sandbox_setup(), self.toolbox.workspace_root
        )
        # What is scrubbed from every record and frame; `self.redact.add(values)` adds more
        # (the server adds the token it generated; tool servers add their env values).
        self.redact = redactor or Redactor(settings.secret_values())
        # Store calls are short, or wait on the one writer: a few threads serve a thousand
        # sessions, and more would only contend for the GIL (bench/HISTORY.md).
        self._threads = BlockingCalls(max_threads=16, name="xclaw-store")
        self.db = StoreCaller(store, self._threads)
        # The record's calls, for the parts that take that role alone.
        self.record = StoreCaller(store.record, self._threads)
        # An agent's messages from its steps, as this worker runs them.
        self.rebuild = Rebuilder(store.snapshots, self.toolbox)
        # Every session's frames: to its clients here, and (when serving among other
        # workers) to theirs: the cluster puts itself in `peers` as it starts.
        self.broadcast = Broadcast(self.redact)
        # One driver per session across processes and hosts (one driver): a lease per run.
        self.worker_id = worker_id or new_worker_id()
        self.leases = LeaseKeeper(
            store, StoreCaller(store.leases, self._threads), self.worker_id, settings.lease_ttl_s
        )
        # OpenTelemetry export of each run's turn (None unless OTEL_*/xclaw.yaml ask for it).
        self.telemetry = start_exporter(store.record, settings.otel, redact=self.redact.text)
        # What this worker runs sessions with, registered for the others and `xclaw workers`;
        # a session records its own when it starts (xclaw/runtime/agreement.py).
        if model_specs is None:
            model_specs = [p.model for p in settings.providers] if model is None else [model.name]
        self.run_config = RunConfig(tuple(model_specs), settings.approval.mode)
        self.leases.info.update(self.run_config.to_json())
        self._assemble()

    def _assemble(self) -> None:
        """The parts wired: each receives what it uses, nothing of the facade."""
        # The declared agents (xclaw.yaml's `agents:`, and a program's: xclaw.open) and how
        # each runs here (docs/agents.md); `deps`: a program's own object for their tools.
        self.agents = AgentCatalog(declared_agents(self.settings.agents))
        self.agent_setups = AgentSetups(self.settings, self.toolbox)
        self.deps: Any = None
        self.configs = SessionConfigs(
            ConfigParts(
                db=self.db,
                run_config=self.run_config,
                settings=self.settings,
                leases=self.leases,
                broadcast=self.broadcast,
                prices=self.prices,
                worker_id=self.worker_id,
            )
        )
        drive = drive_with(
            DriveParts(
                reader=self.record,
                budget_reader=self.db,
                writer=self.caller,
                broadcast=self.broadcast,
                toolbox=self.toolbox,
                workspaces=self.workspaces,
                rebuild=self.rebuild,
                redact=self.redact,
                prices=self.prices,
                model=lambda: self.model,
                agent_config=agent_config(self.settings),
                configs=self.configs,
                lose_lease=self._lose_lease,
                worker_id=self.worker_id,
                agent_setups=self.agent_setups,
                deps=lambda: self.deps,
                budgets=self.budgets,
                steers=lambda sid: self.inputs.inbox(sid),
            )
        )
        self.runs = Runs(
            RunsParts(
                drive=drive,
                leases=self.leases,
                broadcast=self.broadcast,
                writer=self.caller,
                write_stream=self.store.record.write_stream,
                telemetry=self.telemetry,
                worker_id=self.worker_id,
            )
        )
        # Rollback that undoes outside effects: a durable process of its own (rollbacks.py).
        self.rollbacks = Rollbacks(
            self.store,
            self._tools_now,
            self.workspaces,
            self.redact,
            told=lambda sid, step: self.broadcast.emit(sid, step_frame(step, self.prices)),
            workspace_of=self.toolbox.workspace,
        )
        self._starts = TurnStarts(
            StartParts(
                runs=self.runs,
                reader=self.db,
                writer=self.store.record,
                leases=self.leases,
                configs=self.configs,
                broadcast=self.broadcast,
                redact=self.redact,
                require_model=self.require_model,
                worker_id=self.worker_id,
                rollbacks=self.rollbacks,
                finish_rollback=self.finish_rollback,
                agents=self.agents,
            )
        )
        # Messages that arrive while a run is busy (xclaw/runtime/inputs.py): the queue in
        # the record, and the hand-over from each run to the next waiting message.
        self.inputs = Inputs(
            InputParts(
                record=self.store.record,
                db=self.record,
                runs=self.runs,
                starts=self._starts,
                broadcast=self.broadcast,
                redact=self.redact,
                busy=self.is_busy,
                cancel=self.cancel,
                resume=self.resume_if_needed,
                announce=self._announce_queued,
            )
        )
        self.runs.after_run = self.inputs.after_run

    def _lose_lease(self, session_id: str, run: Run, why: str) -> None:
        self.runs.lose_lease(session_id, run, why)

    def new_cluster(self, info: dict[str, Any] | None = None) -> Cluster:
        """This worker among others on its database (xclaw/runtime/cluster.py): started by
        the server (`await cluster.start()`), it failovers, sweeps, and carries frames."""
        parts = ClusterParts(
            store=self.store,
            db=self.db,
            broadcast=self.broadcast,
            leases=self.leases,
            redact=self.redact,
            workspaces=self.workspaces,
            worker_id=self.worker_id,
            grace_s=self.settings.sweep_grace_s,
            sweep_every_s=self.settings.sweep_every_s,
            resume=self.resume_if_needed,
            answer=self.answer_approval,
            cancel=self.cancel,
            driven=self.driven_sessions,
            busy=self.is_busy,
            drain_queues=self.drain_queues,
            queued_elsewhere=self.inputs.queued_elsewhere,
            changes=ChangeParts(
                db=self.db,
                broadcast=self.broadcast,
                history=self.history_frame,
                status=self.status_frame,
            ),
        )
        return Cluster(parts, info=info)

    @property
    def cluster(self) -> Peers | None:
        """The other workers, once this one serves among them (its cluster started)."""
        return self.broadcast.peers

    @property
    def explicit_approval(self) -> bool:
        """`xclaw run --approval MODE`: the user chose this run's mode (it is recorded)."""
        return self.configs.explicit_approval

    @explicit_approval.setter
    def explicit_approval(self, chosen: bool) -> None:
        self.configs.explicit_approval = chosen

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
        return StoreCaller(self.store.leases.driven(lease), self._threads) if lease else self.record

    # --- attaching ----------------------------------------------------------------------------
    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]:
        return self.broadcast.subscribers.subscribe(session_id, sink)

    def emit(self, session_id: str, frame: FrameJson, *, redacted: bool = False) -> None:
        """A frame to every client of the session, here and on other workers. Redacted whole
        here unless `redacted`: the recorder's events (every value in them redacted where it
        was recorded, xclaw/recorder/recorder.py) and the reply are, and they are most of
        the frames of a run."""
        self.broadcast.emit(session_id, frame, redacted=redacted)

    def deliver(self, session_id: str, frame: Frame) -> None:
        """A frame to the sockets attached to this worker only."""
        self.broadcast.deliver(session_id, frame)

    def has_subscribers(self, session_id: str) -> bool:
        return self.broadcast.watched(session_id)

    def driven_sessions(self) -> list[str]:
        """Sessions this worker drives right now (under its lease)."""
        return self.runs.driven()

    async def open(self, session_id: str | None) -> tuple[Session, bool]:
        if session_id:
            found = await self.db(self.store.record.find_session, session_id)
            if found is not None:
                return found, False
        created = await self.db(self.store.record.create_session, session_id=session_id or None)
        return created, True

    async def peek(self, session_id: str | None) -> tuple[Session, bool]:
        """The session to attach to: (found, False), or (a session not yet written, True)
        under the given id or a fresh one. A session exists from its first message: `send`
        with create=True writes it then, so opening a page or a client leaves nothing behind."""
        if session_id:
            found = await self.db(self.store.record.find_session, session_id)
            if found is not None:
                return found, False
            check_session_id(session_id)  # ValueError: a malformed id is refused now
        now = now_ms()
        sid = session_id or new_session_id()
        unsaved = Session(
            session_id=sid, title="", status=Status.INIT, created_at=now, updated_at=now
        )
        return unsaved, True

    def history_frame(self, session_id: str) -> HistoryJson:
        steps = self.store.record.steps(session_id, agent=MAIN_AGENT)
        hist = self.rebuild(steps, new_input=True)
        busy = self.is_busy(session_id)
        return session_history(session_id, steps, hist, busy=busy, redact=self.redact)

    def status_frame(self, session: Session, *, busy: bool | None = None) -> StatusJson:
        """A `status` frame with the session's state in words (xclaw.store.steps.model.session_state)."""
        if busy is None:
            busy = self.is_busy(session.session_id)
        return state_frame(session, busy=busy)

    def is_busy(self, session_id: str) -> bool:
        """A run is in flight here (or hands over to the session's next queued message), or
        (as far as this worker knows) on another worker."""
        return (
            session_id in self.runs
            or session_id in self.runs.handing_over
            or (self.cluster is not None and self.cluster.driven_elsewhere(session_id) is not None)
        )

    def pending_approval_frames(self, session_id: str) -> list[Frame]:
        run = self.runs.get(session_id)
        if run is None:  # driven by another worker: the requests it sent over the bus
            if self.cluster is None:
                return []
            return [
                {**f, "sessionId": session_id}
                for f in self.cluster.remote_approval_frames(session_id)
            ]
        return [
            for_session(approvals.approval_frame(req, self.redact), session_id)
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
        self,
        session_id: str,
        text: str,
        *,
        create: bool = False,
        actor: Actor | None = None,
        metadata: Mapping[str, Any] | None = None,
        message_id: str | None = None,
        agent: str | None = None,
    ) -> tuple[Step, bool]:
        """Start a run with the user's `text`. With `create`, an unknown session is created
        here, at its first message (only once a model is configured). `actor`: who sent it,
        recorded with the message when it is a user of a shared server (docs/teams.md).
        `metadata`: keys of the session's metadata written in the same transaction as the
        message. `message_id`: the client's id for it (docs/protocol.md), recorded with it.
        `agent`: the declared agent to run it with (recorded as the session's from then on;
        None: the one it recorded, xclaw's own if none: docs/agents.md).

        Returns the message's step once it is recorded, and whether it was recorded before:
        a resend of a `message_id` the session holds already starts nothing (never run
        twice)."""
        return await self._starts.message(
            session_id,
            text,
            create=create,
            actor=actor,
            metadata=metadata,
            message_id=message_id,
            agent=agent,
        )

    async def budget(self, target: str) -> dict[str, Any]:
        """A budget target's caps, spend and what is left (docs/budgets.md): `session:<id>`
        (or a bare session id), `user:<name>`, `total`."""
        try:
            target = parse_target(target)
        except ValueError as e:
            raise BadRequest(str(e)) from e
        if target.startswith("session:"):
            session = await self.db(
                self.store.record.resolve_session, target.removeprefix("session:")
            )
            target = f"session:{session.session_id}"
        configured = self.budgets.configured
        return await self.db(budget_report, self.store, configured, target, time.time())

    async def set_budget(
        self,
        target: str,
        caps: Mapping[str, float | None] | None = None,
        *,
        grant_tokens: int = 0,
        grant_usd: float = 0.0,
    ) -> dict[str, Any]:
        """An admin's caps for a target (each key set; None: no cap), or a grant to a
        session; durable, then every session it let go on that waits for a budget resumes
        where it stopped (its run checks the caps again before each call)."""
        try:
            target = parse_target(target)
            check_caps(target, caps or {})
        except ValueError as e:
            raise BadRequest(str(e)) from e
        if (grant_tokens or grant_usd) and not target.startswith("session:"):
            raise BadRequest("a grant goes to a session (session:<id>)")
        if grant_tokens < 0 or grant_usd < 0:
            raise BadRequest("a grant is 0 or more")
        sessions: list[Session]
        if target.startswith("session:"):
            session = await self.db(
                self.store.record.resolve_session, target.removeprefix("session:")
            )
            target, sessions = f"session:{session.session_id}", [session]
        else:
            sessions = await self.db(self.store.record.list_sessions)
        write = SetBudget(
            target=target, caps=dict(caps or {}), grant_tokens=grant_tokens, grant_usd=grant_usd
        )
        await self.db(self.store.record.write, write)
        self.budgets.forget_rows()
        for s in sessions:
            if s.state_key != "budget" or s.session_id in self.runs:
                continue
            # Goes on: not awaiting input (another worker's sweep may take it too).
            go_on = BudgetStop(session_id=s.session_id, detail=None)
            if await self.db(self.store.record.write, go_on):
                await self.resume_if_needed(s.session_id)
        return await self.budget(target)

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        busy: BusyPolicy | None = None,
        create: bool = False,
        actor: Actor | None = None,
        message_id: str | None = None,
        agent: str | None = None,
    ) -> Submitted:
        """A message as `send` takes it, and what it does when the session's run is busy
        (xclaw/wire/busy.py): `busy`, the message's own policy; else the session's, else the
        deployment's (xclaw.yaml `input.busy`). `reject` raises SessionBusy as `send` does;
        `queue`, `steer` and `interrupt` keep it in the session's queue (durably, before
        this returns) — `Submitted.queued` — to run after the run, to be given to the model
        at its next tool boundary, or to run once the run is stopped."""
        if session_id in self.runs.queued:  # messages wait: a new one goes behind them
            policy = await self._busy_policy(session_id, busy)
            if policy not in (None, "reject"):
                return await self._keep(session_id, text, policy, message_id, actor, agent)
        try:
            step, again = await self._starts.message(
                session_id, text, create=create, actor=actor, message_id=message_id, agent=agent
            )
            return Submitted(step=step, duplicate=again)
        except SessionBusy:
            policy = await self._busy_policy(session_id, busy)
            if policy in (None, "reject"):
                raise
        return await self._keep(session_id, text, policy, message_id, actor, agent)

    async def _busy_policy(self, session_id: str, busy: BusyPolicy | None) -> BusyPolicy | None:
        """The policy a message to the session follows (None: no such session)."""
        session = await self.db(self.store.record.find_session, session_id)
        if session is None:
            return None
        return policy_for(busy, session.metadata, self.settings.input.busy)

    async def _keep(
        self,
        session_id: str,
        text: str,
        policy: BusyPolicy | None,
        message_id: str | None,
        actor: Actor | None,
        agent: str | None,
    ) -> Submitted:
        assert policy is not None
        if agent is not None:
            self.agent_named(agent)  # UnknownAgent now, not when its turn comes
        try:
            entry, added = await self.inputs.keep(
                session_id, text, policy, message_id=message_id, actor=actor, agent=agent
            )
        except MessageRecorded as e:  # its id ran already: a resend
            step = await self.db(self.store.record.get_step, session_id, e.seq)
            return Submitted(step=step, duplicate=True)
        return Submitted(queued=entry, duplicate=not added)

    async def _announce_queued(self, session_id: str) -> None:
        """A message kept here: the worker that drives the session hears of it at once."""
        if self.cluster is not None:
            await self.cluster.announce_queued(session_id)

    async def queued(self, session_id: str) -> list[QueuedInput]:
        """The session's waiting messages, in the order they run."""
        return await self.inputs.waiting(session_id)

    async def unqueue(self, session_id: str, entry_id: str) -> QueuedInput | None:
        """A waiting message cancelled (None: it was not waiting: it ran, or was
        cancelled already); every client is told."""
        return await self.inputs.drop(session_id, entry_id)

    async def drain_queues(self) -> None:
        """Each idle session with messages waiting starts the first (the sweep asks: a kill
        between a run's end and the next start, a message queued on another worker). One
        left with interrupted work is the sweep's to resume; its run's end hands over."""
        for sid in await self.db(self.store.record.queued_sessions):
            self.runs.queued.add(sid)
            if self.is_busy(sid):
                continue
            session = await self.db(self.store.record.find_session, sid)
            if session is not None and not resumable(session):
                await self.inputs.kick(sid)

    async def queue_on_attach(self, session_id: str) -> QueueJson | None:
        """The session's queue for a client attaching (None: empty). What waits with no run
        to wait for (a kill between a run's end and the next start) starts now."""
        entries = await self.inputs.waiting(session_id)
        if not entries:
            return None
        self.runs.queued.add(session_id)
        if not self.is_busy(session_id):
            await self.inputs.kick(session_id)
            entries = await self.inputs.waiting(session_id)
        return for_session(queue_frame([e.to_json() for e in entries]), session_id)

    async def set_busy_policy(self, session_id: str, policy: BusyPolicy | None) -> Session:
        """The session's own busy policy (None: the deployment's), kept in its metadata."""
        session = await self.db(self.store.record.get_session, session_id)
        meta = dict(session.metadata or {})
        if policy is None:
            meta.pop(BUSY_KEY, None)
        else:
            meta[BUSY_KEY] = check_policy(policy)
        return await self.db(self.store.record.update_session, session_id, metadata=meta)

    async def compact(self, session_id: str) -> None:
        """`/compact`: summarise the session's conversation now (one model call, recorded as
        its own step), so later turns start from the summary. Between turns only."""
        await self._starts.compaction(session_id)

    # --- declared agents (docs/agents.md) -------------------------------------------------
    def agent_named(self, name: str) -> AgentDefinition:
        """The declared agent `name`; UnknownAgent, listing those declared, otherwise."""
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(d.name for d in self.agents.named()) or "none"
            raise UnknownAgent(f"no agent named {name!r} is declared here (declared: {known})")
        return found

    async def choose_agent(self, session_id: str, name: str) -> Session:
        """Record that a new session runs the declared agent `name` (`/new --agent`, a titled
        session of the Python API or the HTTP API): its first message runs it."""
        found = self.agent_named(name)
        session = await self.db(self.store.record.get_session, session_id)
        meta = with_agent(session.metadata, AgentRecord.of(found))
        return await self.db(self.store.record.update_session, session_id, metadata=meta)

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
        session = await self.db(self.store.record.update_session, session_id, title=title)
        self.emit(session_id, renamed_frame(session.title))
        return session

    # --- the runs in flight (xclaw/runtime/runs.py) ------------------------------------------
    def answer_approval(
        self,
        session_id: str,
        step_ref: str,
        approve: bool,
        by: AnsweredBy | None = None,
        *,
        message: str | None = None,
        edited: Mapping[str, Any] | None = None,
    ) -> None:
        """`by`: who answered, as the record will say (xclaw/people/answered_by.py); None: a person
        through a client that did not say which. `message`: what the model is told with the
        answer; `edited`: the input the call runs with instead of the model's (refused
        unless xclaw.yaml's approval.allow_edits: docs/approval.md)."""
        by = by or AnsweredBy.person(None, "unknown")
        message, edit = approvals.checked_extras(
            message, edited, self.settings.approval.allow_edits
        )
        run = self.runs.get(session_id)
        if run is not None:
            if approvals.answer(run, session_id, step_ref, approve, by, message, edit):
                return
        elif self.cluster is not None and self.cluster.forward_approval(
            session_id, step_ref, approve, by, message=message, edited=edit
        ):
            return  # the worker that drives the session asked; it gets the answer
        raise StepNotFound(str(step_ref), session_id)

    def cancel(self, session_id: str) -> bool:
        run = self.runs.get(session_id)
        if run is None:  # perhaps driven by another worker: ask it
            return self.cluster is not None and self.cluster.forward_cancel(session_id)
        run.cancel.set()
        return True

    async def wait_idle(self, session_id: str, *, following: bool = True) -> None:
        """Until no run of the session is in flight here; with `following`, nor the runs of
        its queued messages that follow (a cancel waits for the run it stopped only)."""
        await self.runs.wait_idle(session_id, following=following)

    # --- time travel and views --------------------------------------------------------------
    def steps(self, session_id: str, n: int = 10) -> list[Step]:
        return self.store.record.latest_steps(session_id, n)

    async def _tools_now(self) -> Mapping[str, Tool]:
        """The tools compensations run with: an MCP server's join once it has started."""
        await self.toolbox.prepare()
        return self.toolbox.tools

    async def processes(self, session_id: str) -> SessionProcesses:
        """What the session's commands left running in its container on this host, each
        with the step that started it; an empty list with the reason for a session without
        one (docs/containers.md). SessionNotFound for an unknown id."""
        await self.db(self.store.record.get_session, session_id)
        return await self.db(
            session_processes,
            self.workspaces.containers,
            session_id,
            self.settings.sandbox.isolation,
        )

    async def rollback_preview(self, session_id: str, step_ref: str) -> Preview:
        """What rolling back to `step_ref` would undo outside the workspace, and what not."""
        return await self.rollbacks.preview(session_id, step_ref)

    async def rollback(
        self,
        session_id: str,
        step_ref: str,
        *,
        accept_irreversible: bool = False,
        retry: bool = False,
        by: AnsweredBy | None = None,
    ) -> Outcome:
        """Undo the outside effects after `step_ref` (their compensations, in reverse order),
        then rewind memory and files to just before it (xclaw/runtime/rollbacks.py).
        IrreversibleEffects unless effects nothing undoes are accepted; CompensationFailed
        when a compensation fails (the rollback then waits: retry, accept, or abandon)."""
        who = (by or AnsweredBy.person(None, "unknown")).to_json()
        return await self._undoing(
            session_id,
            "roll back",
            lambda lease: self.rollbacks.rollback(
                session_id,
                step_ref,
                lease=lease,
                by=who,
                accept_irreversible=accept_irreversible,
                retry=retry,
            ),
        )

    async def abandon_rollback(self, session_id: str, by: AnsweredBy | None = None) -> Step:
        """Stop a rollback that stopped half-way: nothing more is undone, nothing rewound."""
        who = (by or AnsweredBy.person(None, "unknown")).to_json()
        return await self._undoing(
            session_id,
            "abandon a rollback",
            lambda lease: self.rollbacks.abandon(session_id, lease, who),
        )

    async def finish_rollback(self, session_id: str) -> Outcome | None:
        """A rollback a crash cut short, carried on (at the next start: a reconnect, a
        resume, a message); its clients are told as after any rollback. None: none
        pending. CompensationFailed when it stops for a person."""
        outcome = await self._undoing(
            session_id,
            "finish a rollback",
            lambda lease: self.rollbacks.finish_pending(session_id, lease),
        )
        if outcome is not None:
            target = display_id(outcome.result.target_seq)
            text = f"[rollback] a rollback cut short by a crash is finished: session reset to before {target}"
            if outcome.text():
                text += "\n" + outcome.text()
            self.emit(session_id, notice_frame(text))
            self.emit(session_id, rolledback_frame(target, outcome.result.deleted))
            self.emit(session_id, await self.db(self.history_frame, session_id))
        return outcome

    async def _undoing(self, session_id: str, what: str, act: Callable[[Lease], Awaitable[T]]) -> T:
        """`act` under the session's lease (kept alive: compensations may take a while) and
        its place on this worker: nothing starts here or elsewhere meanwhile (one driver)."""
        self._refuse_if_busy(session_id, what)
        run = self.runs.claim(session_id)
        try:
            lease = await self.leases.acquire(session_id)
            holder = [lease]
            renewer = self.leases.keep_alive(
                lambda: holder[0], lambda renewed: holder.__setitem__(0, renewed), lambda _why: None
            )
            try:
                return await act(lease)
            finally:
                renewer.cancel()
                await self.leases.release(holder[0])
        finally:
            self.runs.unclaim(session_id, run)
            try:
                session = await self.db(self.store.record.get_session, session_id)
                self.emit(session_id, self.status_frame(session, busy=False))
            except SessionNotFound:
                pass
            # The session's container (docs/containers.md): its processes are not restored.
            if (note := self.workspaces.env_notes.pop(session_id, None)) is not None:
                self.emit(session_id, notice_frame(f"[rollback] {note}"))

    async def fork(
        self,
        session_id: str,
        step_ref: str,
        title: str | None = None,
        *,
        new_session_id: str | None = None,
    ) -> Session:
        """A new session from `session_id` up to `step_ref`, files too; `new_session_id`: its
        id (a schedule's fork, derived so that a retried fire finds it), else a random one."""
        title = None if title is None else self.title_of(title)
        return await self.db(
            partial(self.workspaces.fork, new_session_id=new_session_id),
            session_id,
            step_ref,
            title,
        )

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
