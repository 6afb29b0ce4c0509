"""The runtime facade the gateway and the headless CLI drive: one object that owns the
per-session runs, their subscribers and their pending approvals.

Frames emitted to subscribers are the server frames of docs/protocol.md (dicts), each carrying
`sessionId`. Every method is safe to call for an unknown session (SessionNotFound) or a bad
step reference (StepNotFound); none of them can crash the caller's event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xclaw.agent.hooks import ApprovalRequest
from xclaw.agent.loop import Agent, AgentConfig, Policy
from xclaw.answered_by import CANCEL, NEW_INPUT, RUN_ENDED, Answer, AnsweredBy, answer_output
from xclaw.config import Settings
from xclaw.errors import (
    Cancelled,
    ConfigError,
    ConfigMismatch,
    LeaseLost,
    LimitsExceeded,
    LLMError,
    MissingBlobs,
    SessionBusy,
    SessionNotFound,
    StepNotFound,
    StoreError,
)
from xclaw.llm import prices
from xclaw.llm.base import Model
from xclaw.llm.context import SUMMARY_PREFIX
from xclaw.messages import AssistantMessage, message_to_json
from xclaw.protocol import error_frame, notice_frame, step_json
from xclaw.recorder.history import History, build_history, seed_history, with_image_bytes
from xclaw.recorder.recorder import Recorder, StoreCaller
from xclaw.recorder.redact import Redactor
from xclaw.runtime.agreement import (
    ALERT,
    Agreement,
    RunConfig,
    agree,
    recorded_config,
    with_config,
)
from xclaw.runtime.frames import event_frame
from xclaw.runtime.leases import LeaseKeeper, busy_message
from xclaw.runtime.peers import Peers
from xclaw.runtime.settle import settle_by_workspace
from xclaw.runtime.wiring import Toolbox, default_toolbox
from xclaw.store.base import RollbackResult, Store
from xclaw.store.leases import Lease, new_worker_id
from xclaw.store.model import (
    MAIN_AGENT,
    NewStep,
    Session,
    Status,
    Step,
    StepStatus,
    StepType,
    parse_step_ref,
    session_state,
)
from xclaw.store.rows import check_session_id, new_session_id, now_ms
from xclaw.telemetry.exporter import start_exporter
from xclaw.threads import BlockingCalls
from xclaw.tools.base import ToolContext
from xclaw.views import title_from_message
from xclaw.workspace.timetravel import Workspaces

log = logging.getLogger("xclaw.runtime")

FrameSink = Callable[[dict[str, Any]], None]

RESUME_NOTICE = "[resume] detected interrupted tool_call, retrying..."
# What an approval still waiting records when something other than an answer ends the wait.
_SUPERSEDED = answer_output(False, AnsweredBy(NEW_INPUT))
_CANCELLED = answer_output(False, AnsweredBy(CANCEL))
_ENDED = answer_output(False, AnsweredBy(RUN_ENDED))
CANCEL_NOTICE = "[cancel] run stopped; the session waits for your next instruction"


def unsafe_retry_notice(name: str, step: str) -> str:
    """The line after RESUME_NOTICE for a call that may or may not have run (no blind
    repeat): how it is retried — by the model, with the user's approval — in words that read
    on from "retrying...", not against it."""
    return (
        f"[resume] {name} {step} may or may not have run, so the model decides whether to "
        "retry it, and a retry waits for your approval"
    )


@dataclass
class _Run:
    """One run in flight: the single driver of its session (one driver)."""

    task: asyncio.Task[None] | None = None
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    # The session's lease while this worker drives it, renewed in the background; `lost`
    # says why once another worker took it (the run then stops without writing).
    lease: Lease | None = None
    renewer: asyncio.Task[None] | None = None
    lost: str | None = None
    # What this run drives with, when the session's configuration is not this worker's
    # (xclaw/runtime/agreement.py): said in a notice and a session_config alert as it starts.
    agreement: Agreement | None = None
    model: Model | None = None
    policy: Policy | None = None
    # display step id -> (request, future answered by answer_approval)
    approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[Answer]]] = field(
        default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class _Opened:
    """What the write that opens a turn did: the steps it settled, the user's message."""

    interrupted: list[Step]
    message: Step


class _WireApprover:
    """Asks every attached client; any of them may answer (answer_approval)."""

    def __init__(self, runtime: Runtime, session_id: str, run: _Run) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.run = run

    async def decide(self, request: ApprovalRequest) -> Answer:
        key = request.step_id or request.call.id
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.run.approvals[key] = (request, future)
        self.runtime._emit(self.session_id, self.runtime._approval_frame(request))
        try:
            return await future
        finally:
            self.run.approvals.pop(key, None)


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
        # Every step frame and listing prices llm_calls with the built-in table + xclaw.yaml.
        prices.configure(settings.prices)
        self.toolbox = toolbox or default_toolbox(settings)
        # Snapshots and restores of the session workspaces (files follow memory).
        self.workspaces = Workspaces.from_settings(store, settings, self.toolbox.workspace_root)
        # What is scrubbed from every record and frame; `self.redact.add(values)` adds more
        # (the server adds the token it generated; tool servers add their env values).
        self.redact = redactor or Redactor(settings.secret_values())
        # Store calls are short, or wait on the one writer: a few threads serve a thousand
        # sessions, and more would only contend for the GIL (bench/README.md).
        self._threads = BlockingCalls(max_threads=16, name="xclaw-store")
        self.db = StoreCaller(store, self._threads)
        self._subs: dict[str, list[FrameSink]] = {}
        self._runs: dict[str, _Run] = {}
        # One driver per session across processes and hosts (one driver): a lease per run.
        self.worker_id = worker_id or new_worker_id()
        self.leases = LeaseKeeper(store, self.db, self.worker_id, settings.lease_ttl_s)
        # xclaw.runtime.cluster.Cluster when serving: frames and failover across workers.
        self.cluster: Peers | None = None
        self._stopping = False
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
        self._chains: dict[tuple[str, ...], Model] = {}
        self._policies: dict[str, Policy] = {}
        self._refused: dict[str, RunConfig] = {}  # session -> the configuration refused (said)
        self._resuming: set[str] = set()  # sessions whose resume is being decided
        self._said: dict[str, dict[str, Any]] = {}  # session -> the session_config said last

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

    # --- what a session runs with (xclaw/runtime/agreement.py) --------------------------------
    async def _agreement(self, session: Session | None, *, explicit: bool) -> Agreement:
        """What a run of `session` drives with here; `explicit`: asked by the user (a message,
        `xclaw run --session`), not a takeover."""
        recorded = None if session is None else recorded_config(session.metadata)
        mine = self.run_config
        live: list[tuple[str, RunConfig]] = []
        if recorded is not None and not set(recorded.models) <= set(mine.models):
            live = await self.db(self._live_configs)  # who else could run it
        return agree(
            recorded,
            mine,
            available=mine.models,
            explicit=explicit,
            explicit_approval=self.explicit_approval,
            live=live,
            worker=self.worker_id,
        )

    def _live_configs(self) -> list[tuple[str, RunConfig]]:
        """The other live workers on this database and what they run with."""
        out = []
        for w in self.store.workers():
            config = RunConfig.from_json(w.info)
            if w.alive and w.worker_id != self.worker_id and config is not None:
                out.append((w.worker_id, config))
        return out

    async def _equip(
        self, sid: str, run: _Run, agreement: Agreement, lease: Lease | None = None
    ) -> None:
        """Give the run the session's model chain and approval policy where they are not this
        worker's, and record the configuration when it is new (with `lease`: the write of a
        resume; a message records it in the write that opens its turn)."""
        use = agreement.use
        assert use is not None
        run.agreement = agreement
        if use.models != self.run_config.models:
            run.model = self._chain(use.models)
        if use.approval != self.settings.approval.mode:
            run.policy = self._policy(use.approval)
        if lease is not None and agreement.record is not None:
            session = await self.db(self.store.get_session, sid)
            await self.db(
                self.store.update_session,
                sid,
                metadata=with_config(session.metadata, agreement.record),
            )

    def _chain(self, models: tuple[str, ...]) -> Model:
        """A model chain of this worker's providers, in the session's order (cached)."""
        chain = self._chains.get(models)
        if chain is None:
            from xclaw.llm.factory import build_model

            by_spec = {p.model: p for p in self.settings.providers}
            providers = tuple(by_spec[m] for m in models)
            chain = self._chains[models] = build_model(
                self.settings.model_copy(update={"providers": providers})
            )
        return chain

    def _policy(self, mode: str) -> Policy:
        """This worker's approval rules under another mode (cached)."""
        policy = self._policies.get(mode)
        if policy is None:
            from xclaw.tools.approval import ApprovalPolicy

            approval = self.settings.approval.model_copy(update={"mode": mode})
            settings = self.settings.model_copy(update={"approval": approval})
            policy = self._policies[mode] = ApprovalPolicy.from_settings(settings)
        return policy

    async def _decline(self, sid: str, lease: Lease, agreement: Agreement) -> None:
        """This worker does not drive the session: it says so (a notice, a session_config
        alert written under the lease it took) and lets the lease go at once, so the worker
        that has the session's model takes it (its sweep, or a client's reconnect)."""
        details = agreement.alert()
        try:
            if details is not None:
                step = NewStep(step_type=StepType.SYSTEM_ALERT, name=ALERT, input_data=details)
                added = await self.db(self.store.add_step, sid, step, lease=lease)
                self._emit(sid, {"type": "step", "step": step_json(added)})
        finally:
            await self.leases.release(lease)
        if agreement.session is not None:
            self._refused[sid] = agreement.session
        log.warning(
            "event=config_mismatch session=%s worker=%s session_models=%s worker_models=%s",
            sid,
            self.worker_id,
            ",".join(agreement.session.models if agreement.session else ()),
            ",".join(self.run_config.models),
        )
        if (words := agreement.notice()) is not None:
            self._emit(sid, notice_frame(words))

    # --- attaching ----------------------------------------------------------------------------
    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]:
        sinks = self._subs.setdefault(session_id, [])
        sinks.append(sink)

        def unsubscribe() -> None:
            if sink in sinks:
                sinks.remove(sink)
            if not sinks:
                self._subs.pop(session_id, None)

        return unsubscribe

    def _emit(self, session_id: str, frame: dict[str, Any], *, redacted: bool = False) -> None:
        """A frame to every client of the session, here and on other workers. Redacted whole
        here unless `redacted`: the recorder's events (every value in them redacted where it
        was recorded, xclaw/recorder/recorder.py) and the reply are, and they are most of
        the frames of a run."""
        if not redacted:
            frame = self.redact(frame)
        frame = {**frame, "sessionId": session_id}
        self.deliver(session_id, frame)
        if self.cluster is not None:
            self.cluster.publish(session_id, frame)  # to clients attached to other workers

    def has_subscribers(self, session_id: str) -> bool:
        return bool(self._subs.get(session_id))

    def driven_sessions(self) -> list[str]:
        """Sessions this worker drives right now (under its lease)."""
        return sorted(sid for sid, run in self._runs.items() if run.lease is not None)

    def deliver(self, session_id: str, frame: dict[str, Any]) -> None:
        """A frame to the sockets attached to this worker only."""
        for sink in list(self._subs.get(session_id, ())):
            try:
                sink(frame)
            except Exception:  # one broken client must not stop the run or the others
                log.exception("frame sink failed")

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
        return Session(session_id or new_session_id(), "", Status.INIT, now, now), True

    def _rebuild(self, steps: Iterable[Step], *, new_input: bool = False) -> History:
        """An agent's messages from its steps, with this toolbox's tool kinds; images a tool
        returned get their bytes back from the blob store."""
        hist = build_history(
            steps,
            read_only=self.toolbox.is_retry_safe,
            resumable=self.toolbox.is_resumable,
            new_input=new_input,
        )
        hist.messages = with_image_bytes(hist.messages, self._image_blobs)
        return hist

    def _image_blobs(self, hashes: list[str]) -> dict[str, bytes]:
        """The blobs that are still stored (a missing one becomes a note, not a failure)."""
        try:
            return self.store.get_blobs(hashes)
        except MissingBlobs as e:
            rest = [h for h in hashes if h not in e.hashes]
            return self.store.get_blobs(rest) if rest else {}

    def history_frame(self, session_id: str) -> dict[str, Any]:
        steps = self.store.steps(session_id, agent=MAIN_AGENT)
        hist = self._rebuild(steps, new_input=True)
        structured = []
        by_call = {s.call_id: s for s in steps if s.call_id and s.step_type.value == "tool_call"}
        busy = self.is_busy(session_id)
        # The calls of the turn in flight: those without a step yet wait for an approval (or
        # for their turn), not "never executed".
        last_calls = next(
            (
                {c.id for c in m.tool_calls}
                for m in reversed(hist.messages)
                if isinstance(m, AssistantMessage)
            ),
            set(),
        )
        for m in hist.messages:
            item = message_to_json(m)
            if item["kind"] == "user" and str(item.get("text", "")).startswith(SUMMARY_PREFIX):
                # What compaction put in place of the older turns: not something the user typed.
                item = {"kind": "summary", "text": item["text"][len(SUMMARY_PREFIX) :].strip()}
            if item["kind"] == "tool_result":
                call = by_call.get(item["tool_call_id"])
                if call is not None:
                    item["stepId"] = call.display_id
                pending = (
                    call.status is StepStatus.RUNNING
                    if call
                    else item["tool_call_id"] in last_calls
                )
                if busy and pending:
                    # Still running or waiting (a refresh is not a crash): no result yet.
                    item.update(running=True, content="", is_error=False)
            structured.append(item)

        return {
            "type": "history",
            "sessionId": session_id,
            # Redacted before it is JSON text (a secret with `"` in it is escaped there).
            "content": json.dumps(self.redact(seed_history(hist.messages)), ensure_ascii=False),
            "messages": self.redact(structured),
        }

    def is_busy(self, session_id: str) -> bool:
        """A run is in flight here, or (as far as this worker knows) on another worker."""
        return session_id in self._runs or (
            self.cluster is not None and self.cluster.driven_elsewhere(session_id) is not None
        )

    def pending_approval_frames(self, session_id: str) -> list[dict[str, Any]]:
        run = self._runs.get(session_id)
        if run is None:  # driven by another worker: the requests it sent over the bus
            if self.cluster is None:
                return []
            return [
                {**f, "sessionId": session_id}
                for f in self.cluster.remote_approval_frames(session_id)
            ]
        return [
            {**self._approval_frame(req), "sessionId": session_id}
            for req, fut in run.approvals.values()
            if not fut.done()
        ]

    def _approval_frame(self, req: ApprovalRequest) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "type": "approval_request",
            "stepId": req.step_id,
            "name": req.call.name,
            "input": req.call.input,
            "reason": req.reason,
            "maybeRepeated": req.maybe_repeated,
        }
        if req.agent != MAIN_AGENT:
            frame["agent"] = req.agent
        clean: dict[str, Any] = self.redact(frame)  # the model's tool name, input, a reason
        return clean

    async def resume_if_needed(self, session_id: str, *, failed: bool = False) -> bool:
        """Continue interrupted work (Paused, or Running after a crash). With `failed`, an
        explicit request by the user, also a Failed session: the loop picks up where the
        record stops, so the call that failed is made again (an LLM error) and unanswered
        tool calls are settled as after a crash. Never automatic: a client attaching to a
        Failed session does not retry a failing provider behind the user's back."""
        if session_id in self._runs or session_id in self._resuming or self._stopping:
            return False
        # One decision at a time per session (the sweep, a watcher and an attaching client
        # may ask at once): a second would take the lease again and fence the first out.
        self._resuming.add(session_id)
        try:
            return await self._resume(session_id, failed=failed)
        finally:
            self._resuming.discard(session_id)

    async def _resume(self, session_id: str, *, failed: bool) -> bool:
        session = await self.db(self.store.get_session, session_id)
        if not (_resumable(session) or (failed and session.status is Status.FAILED)):
            return False
        try:
            self.require_model()
        except ConfigError as e:
            self._emit(session_id, error_frame(e.message, e.code))
            return False
        # A session this worker already declined (its model chain is not this worker's):
        # said again to whoever attaches, without taking its lease again (the sweep asks
        # every round).
        agreement = await self._agreement(session, explicit=failed)
        if agreement.refused and self._refused.get(session_id) == agreement.session:
            if (words := agreement.notice()) is not None:
                self.deliver(session_id, {**notice_frame(words), "sessionId": session_id})
            return False
        run = self._claim(session_id)
        try:
            lease, holder = await self.leases.try_acquire(session_id)
            if lease is not None:
                now = await self.db(self.store.get_session, session_id)
                if not (_resumable(now) or (failed and now.status is Status.FAILED)):
                    await self.leases.release(lease)  # its driver finished it meanwhile
                    lease = holder = None
                else:
                    agreement = await self._agreement(now, explicit=failed)
                    if agreement.refused:
                        await self._decline(session_id, lease, agreement)
                        lease = holder = None
                    else:
                        await self._equip(session_id, run, agreement, lease)
        except BaseException:
            self._unclaim(session_id, run)
            raise
        if lease is None:
            # Another live worker drives it: observe, and take over if its lease lapses.
            self._unclaim(session_id, run)
            if holder is not None and self.cluster is not None:
                await self.cluster.observe(holder)
            return False
        self._launch(session_id, run, lease, resume=True)
        return True

    # --- driving ------------------------------------------------------------------------------
    async def send(self, session_id: str, text: str, *, create: bool = False) -> None:
        """Start a run with the user's `text`. With `create`, an unknown session is created
        here, at its first message (only once a model is configured)."""
        if session_id in self._runs or session_id in self._resuming:
            raise SessionBusy(
                "a run is in flight for this session; wait for its reply or cancel it"
            )
        if self._stopping:
            raise SessionBusy("this server is shutting down; send it again in a moment")
        found = await self.db(self.store.find_session, session_id)
        if found is None and not create:
            raise SessionNotFound(session_id)
        self.require_model()  # before recording anything: say how to configure one
        # Another worker's session: with its model chain and approval mode, or refused.
        agreement = await self._agreement(found, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        # A session is titled after its first message, in the write that opens the turn.
        title = None
        if found is None or (not found.title and not await self._has_user_input(session_id)):
            title = self.title_of(title_from_message(self.redact.text(text)))
        run = self._claim(session_id)
        try:
            await self._equip(session_id, run, agreement)
            await self.leases.register()
            lease, opened = await self._open_turn(
                session_id, text, create=found is None, title=title, record=agreement.record
            )
        except BaseException:
            self._unclaim(session_id, run)
            raise
        if title is not None:
            self._emit(session_id, {"type": "renamed", "title": title})
        if lease is None:
            self._unclaim(session_id, run)
            raise SessionBusy(busy_message(await self.db(self.store.lease_info, session_id)))
        self.leases.acquired(lease)
        self._launch(session_id, run, lease, resume=False, opened=opened)

    async def _open_turn(
        self,
        session_id: str,
        text: str,
        *,
        create: bool,
        title: str | None,
        record: RunConfig | None = None,
    ) -> tuple[Lease | None, _Opened | None]:
        """One transaction, one trip to the writer: the session written if it is new (or
        titled), its lease taken, what the last run left unanswered settled (approvals
        included: new input answers them), and the user's message recorded. Before, these
        were five store calls, each a thread hop or a commit of its own: the start of a run
        cost more than its steps (bench/README.md)."""
        store = self.store
        message = NewStep(step_type=StepType.USER_INPUT, name="user", input_data=self.redact(text))

        def unit() -> tuple[Lease | None, _Opened | None]:
            created = False
            if create:
                try:
                    # What it runs with is recorded with it (xclaw/runtime/agreement.py).
                    meta = {} if record is None else with_config({}, record)
                    store.create_session(session_id=session_id, title=title or "", metadata=meta)
                    created = True
                except StoreError:  # another socket created it a moment ago
                    if title is not None:
                        store.update_session(session_id, title=title)
            elif title is not None:
                store.update_session(session_id, title=title)
            lease = store.acquire_lease(session_id, self.worker_id, self.leases.ttl_s)
            if lease is None:  # another live worker drives it
                return None, None
            if record is not None and not created:
                meta = store.get_session(session_id).metadata
                store.update_session(session_id, metadata=with_config(meta, record))
            # A session this very transaction created has no step to settle (three statements
            # fewer for every new session's first message).
            interrupted = (
                []
                if created
                else store.mark_interrupted(
                    session_id, keep_approvals=False, approval_output=_SUPERSEDED, lease=lease
                )
            )
            return lease, _Opened(interrupted, store.add_step(session_id, message, lease=lease))

        return await store.write_stream().put(unit, durable=True)

    async def compact(self, session_id: str) -> None:
        """`/compact`: summarise the session's conversation now (one model call, recorded as
        its own step), so later turns start from the summary. Between turns only."""
        if session_id in self._runs:
            raise SessionBusy("a run is in flight for this session; compact after its reply")
        if self._stopping:
            raise SessionBusy("this server is shutting down; try again in a moment")
        session = await self.db(self.store.get_session, session_id)
        if _resumable(session):
            raise SessionBusy(
                "this session has interrupted work: resume it (or send a message) first"
            )
        self.require_model()
        agreement = await self._agreement(session, explicit=True)
        if agreement.refused:
            raise ConfigMismatch(agreement.notice() or "this worker cannot drive this session")
        run = self._claim(session_id)
        try:
            lease = await self.leases.acquire(session_id)
            await self._equip(session_id, run, agreement, lease)
        except BaseException:
            self._unclaim(session_id, run)
            raise
        self._launch(session_id, run, lease, resume=False, compact=True)

    async def _has_user_input(self, session_id: str) -> bool:
        steps = await self.db(self.store.steps, session_id, agent=MAIN_AGENT)
        return any(st.step_type is StepType.USER_INPUT for st in steps)

    def title_of(self, title: str) -> str:
        """A title as it may be stored and shown: redacted (whoever gave it: the first
        message, /title, /new, /fork, the API, xclaw fork --title)."""
        return self.redact.text(title)

    async def rename(self, session_id: str, title: str) -> Session:
        """Set the title and tell every attached client (a `renamed` frame)."""
        title = self.title_of(title)
        session = await self.db(self.store.update_session, session_id, title=title)
        self._emit(session_id, {"type": "renamed", "title": session.title})
        return session

    def _claim(self, session_id: str) -> _Run:
        run = _Run()
        self._runs[session_id] = run  # claimed synchronously: no second driver can slip in
        return run

    def _unclaim(self, session_id: str, run: _Run) -> None:
        if self._runs.get(session_id) is run:
            del self._runs[session_id]

    def _launch(
        self,
        session_id: str,
        run: _Run,
        lease: Lease,
        *,
        resume: bool,
        compact: bool = False,
        opened: _Opened | None = None,
    ) -> None:
        run.lease = lease
        if self.cluster is not None:
            self.cluster.forget(session_id)  # driven here now
        run.renewer = self.leases.keep_alive(
            lambda: run.lease,  # type: ignore[arg-type,return-value]
            lambda renewed: setattr(run, "lease", renewed),
            lambda why: self._lease_lost(session_id, run, why),
        )
        run.task = asyncio.create_task(
            self._drive(session_id, run, resume, compact=compact, opened=opened)
        )

    def _lease_lost(self, sid: str, run: _Run, why: str) -> None:
        """Another worker took the session: stop at once; every later write is refused."""
        if run.lost is None:
            run.lost = why
            log.warning("event=lease_lost session=%s worker=%s reason=%r", sid, self.worker_id, why)
            self.deliver(
                sid,
                notice_frame(
                    "[lease] another worker took over this session; this one stopped driving it"
                ),
            )
        task = run.task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()  # the renewer noticed: stop the run where it waits

    def answer_approval(
        self, session_id: str, step_ref: str, approve: bool, by: AnsweredBy | None = None
    ) -> None:
        """`by`: who answered, as the record will say (xclaw/answered_by.py); None: a person
        through a client that did not say which."""
        by = by or AnsweredBy.person(None, "unknown")
        run = self._runs.get(session_id)
        if run is not None:
            try:
                key = f"s{parse_step_ref(step_ref, session_id):04d}"
            except StepNotFound:
                key = step_ref
            entry = run.approvals.get(key)
            if entry is not None and not entry[1].done():
                entry[1].set_result(Answer(bool(approve), by))
                return
        elif self.cluster is not None and self.cluster.forward_approval(
            session_id, step_ref, approve, by
        ):
            return  # the worker that drives the session asked; it gets the answer
        raise StepNotFound(str(step_ref), session_id)

    def cancel(self, session_id: str) -> bool:
        run = self._runs.get(session_id)
        if run is None:  # perhaps driven by another worker: ask it
            return self.cluster is not None and self.cluster.forward_cancel(session_id)
        run.cancel.set()
        return True

    async def wait_idle(self, session_id: str) -> None:
        run = self._runs.get(session_id)
        if run is not None and run.task is not None:
            await asyncio.shield(run.task)

    async def _drive(
        self,
        sid: str,
        run: _Run,
        resume: bool,
        *,
        compact: bool = False,
        opened: _Opened | None = None,
    ) -> None:
        """The run. `opened`: what the turn's opening write did (send: the steps it settled,
        the user's message); None: a resume or a compaction, which settle here."""

        def emit(frame: dict[str, Any]) -> None:
            self._emit(sid, frame)

        # Every write of this run carries the lease's fencing token (one driver).
        db = StoreCaller(self.store.driven(run.lease), self._threads) if run.lease else self.db
        started = now_ms()
        try:
            if opened is not None:
                # Told at once: the turn is open, the message recorded.
                for step in opened.interrupted:  # the dangling steps marked (nothing lost)
                    emit({"type": "step", "step": step_json(step)})
                emit({"type": "status", "status": Status.RUNNING.value})
                emit({"type": "step", "step": step_json(opened.message)})
            else:
                # A restore cut short by a crash is completed before anything touches the files.
                await self.db(self.workspaces.recover, sid)
            # MCP servers start on first use; one that cannot start is named, the rest work.
            for server, why in (await self.toolbox.prepare()).items():
                log.warning("event=mcp_unavailable server=%s reason=%r", server, why)
                emit(notice_frame(f"[tools] {why}; its tools are unavailable in this run"))
            for why in self.toolbox.policy_warnings():
                log.warning("event=tool_policy_unmatched reason=%r", why)
                emit(notice_frame(f"[tools] {why}"))
            # Continued on the user's explicit request after an error (resume_if_needed).
            was_failed = resume and (
                (await self.db(self.store.get_session, sid)).status is Status.FAILED
            )
            if opened is not None:
                # Read in one trip: the steps to continue from (the message is the last) and
                # the workspace (made 0700), a restore cut short by a crash completed first.
                steps, workspace = await self.db(self._read_turn, sid, recover=True)
            else:
                if resume:
                    interrupted = await db(db.store.mark_interrupted, sid)
                else:
                    # New input settles anything left unanswered, approvals included.
                    interrupted = await db(
                        db.store.mark_interrupted,
                        sid,
                        keep_approvals=False,
                        approval_output=_SUPERSEDED,
                    )
                for step in interrupted:  # live views see the dangling steps marked
                    emit({"type": "step", "step": step_json(step)})
                steps, workspace = await self.db(self._read_turn, sid, recover=False)
            hist = self._rebuild(steps)
            context = ToolContext(workspace=workspace, session_id=sid)
            settled: list[Step] = []
            if resume and hist.interrupted_unsafe:
                # A file tool whose effect is visible is settled by looking, not by asking.
                settled = await settle_by_workspace(
                    db,
                    sid,
                    steps,
                    hist.interrupted_unsafe,
                    self.toolbox.tools,
                    context,
                    self.redact.text,
                )
                if settled:
                    steps = await self.db(self.store.steps, sid, agent=MAIN_AGENT)
                    hist = self._rebuild(steps, new_input=False)
            if resume:
                if hist.interrupted_retry or hist.interrupted_unsafe:
                    emit(notice_frame(RESUME_NOTICE))
                names = {s.display_id: s.name for s in steps}
                for ref in hist.interrupted_unsafe:
                    # Goes on from RESUME_NOTICE (how this call is retried), never against it.
                    emit(notice_frame(unsafe_retry_notice(names.get(ref, "tool"), ref)))
            recorder = Recorder(
                db=db,
                session_id=sid,
                emit=lambda event: self._emit(sid, event_frame(event), redacted=True),
                redact=self.redact,
                call_parents=hist.call_parents,
                pending_approvals=hist.pending_approvals,
                turn_root=hist.last_user_step,
                before_side_effect=lambda step: self.db(self.workspaces.snapshot, sid, step),
                resumable_calls=hist.resumable_calls,
                rebuild=self._rebuild,
            )
            # Driven with the session's configuration, not this worker's (or changed by the
            # user's message): said to the clients and in the record, as the run starts.
            # Once per session and worker: a session driven here run after run with its own
            # configuration does not gather an alert per turn.
            agreed = run.agreement
            said = None if agreed is None else agreed.alert()
            if agreed is not None and said is not None and self._said.get(sid) != said:
                if (words := agreed.notice()) is not None:
                    emit(notice_frame(words))
                await recorder.alert(ALERT, said)
                self._said[sid] = said
            if resume and (interrupted or hist.pending_approvals or was_failed or settled):
                details: dict[str, Any] = {"after": Status.FAILED.value} if was_failed else {}
                details |= {
                    "interrupted": [s.display_id for s in interrupted],
                    "retrying": hist.interrupted_retry,
                    "mayHaveRun": hist.interrupted_unsafe,
                    "settledByWorkspace": [s.display_id for s in settled],
                }
                await recorder.alert("resume", details)
            # Told only now: the resume alert's durable commit carries the settled steps too.
            for step in settled:
                emit({"type": "step", "step": step_json(step)})
                emit(
                    notice_frame(
                        f"[resume] {step.name} {step.call_id} was interrupted; the workspace "
                        f"shows it ran, recorded as {step.display_id}"
                    )
                )
            agent = Agent(
                model=run.model or self.model,
                tools=self.toolbox.tools,
                policy=run.policy or self.toolbox.policy,
                approver=_WireApprover(self, sid, run),
                observer=recorder,
                context=context,
                config=self._agent_config(),
                cancel_event=run.cancel,
            )
            if compact:
                await self._compact_now(db, sid, emit, agent, recorder, hist.messages)
                return
            if opened is None:
                emit({"type": "status", "status": Status.RUNNING.value})
            try:
                answer = await agent.run(hist.messages, resume=hist.resume_state(with_note=resume))
            finally:
                # Queued writes reach the disk before the outcome is decided and written.
                await recorder.settle()
            if not recorder.answered:  # else Success was committed with the final answer
                await self._settle(db, sid, Status.SUCCESS)
            self._emit(sid, {"type": "reply", "content": self.redact.text(answer)}, redacted=True)
        except Cancelled:
            await self._stopped_by_user(db, sid, emit)
        except LimitsExceeded as e:
            await self._fail(db, sid, emit, "max_iterations", e.message)
        except LLMError as e:
            await self._fail(db, sid, emit, "llm_error", f"LLM call failed: {e.message}")
        except LeaseLost as e:  # a write was refused: another worker drives the session now
            self._lease_lost(sid, run, e.message)
        except StoreError as e:  # e.g. the disk is full: the record refused a write, whole
            log.error("event=store_error session=%s error=%r", sid, e.message)
            await self._fail(db, sid, emit, e.code, e.message)
        except asyncio.CancelledError:
            if run.lost is not None:
                return  # stopped because the lease was lost: nothing more to write
            # Shutdown: whatever was running stays `running` and is marked interrupted below.
            raise
        except Exception as e:
            log.exception("run of session %s crashed", sid)
            await self._fail(
                db, sid, emit, "internal_error", f"internal error: {type(e).__name__}: {e}"
            )
        finally:
            if self.telemetry is not None:  # spans from what this run committed (never blocks)
                self.telemetry.run_ended(sid, started)
            if run.renewer is not None:
                # Cancelled, and let go: the renewer's frame holds this run (a cycle through
                # its CancelledError's traceback would otherwise wait for a full collection).
                run.renewer.cancel()
                run.renewer = None
            if self._runs.get(sid) is run:
                del self._runs[sid]
            if run.lease is not None and run.lost is None and not self._stopping:
                # The next run may start at once, here or anywhere. (One that starts here
                # first takes a newer token, and this release of the old one is a no-op.)
                await self.leases.release(run.lease, self.store.write_stream())

    def _read_turn(self, sid: str, *, recover: bool) -> tuple[list[Step], Path]:
        """On a worker thread, in one hop: (with `recover`) a restore cut short by a crash
        completed, then the main agent's steps and the session's workspace directory (made
        0700: a new directory is a few hundred µs of disk work)."""
        if recover:
            self.workspaces.recover(sid)
        return self.store.steps(sid, agent=MAIN_AGENT), self.toolbox.workspace(sid)

    async def _compact_now(
        self,
        db: StoreCaller,
        sid: str,
        emit: FrameSink,
        agent: Agent,
        recorder: Recorder,
        messages: list[Any],
    ) -> None:
        before = (await db(db.store.get_session, sid)).status
        emit({"type": "status", "status": Status.RUNNING.value})
        try:
            done = await agent.compact(messages)
        finally:
            await recorder.settle()
        if before is not Status.RUNNING:
            # The summary step ran the session for a moment; it ends as it was.
            await self._settle(db, sid, before if before is not Status.INIT else Status.SUCCESS)
        status = (await db(db.store.get_session, sid)).status
        emit({"type": "status", "status": status.value})
        if not done:
            emit(
                notice_frame(
                    "[compact] nothing was summarised: the conversation is empty, has open tool "
                    "calls, or the model call failed (see /steps)"
                )
            )

    async def _settle(self, db: StoreCaller, sid: str, target: Status) -> None:
        session = await db(db.store.get_session, sid)
        if session.status is not target:
            await db(db.store.transition, sid, target)

    async def _stopped_by_user(self, db: StoreCaller, sid: str, emit: FrameSink) -> None:
        """A cancelled run: the session waits for the next instruction (not Failed)."""
        try:
            await db(
                db.store.mark_interrupted, sid, keep_approvals=False, approval_output=_CANCELLED
            )
            session = await db(db.store.transition, sid, Status.RUNNING, awaiting_input=True)
        except LeaseLost as e:
            log.warning(
                "event=lease_lost session=%s worker=%s reason=%r", sid, self.worker_id, e.message
            )
            return
        emit(self.status_frame(session, busy=False))
        emit(notice_frame(CANCEL_NOTICE))

    def status_frame(self, session: Session, *, busy: bool | None = None) -> dict[str, Any]:
        """A `status` frame with the session's state in words (xclaw.store.model.session_state)."""
        if busy is None:
            busy = self.is_busy(session.session_id)
        state = session_state(session, busy=busy)
        return {
            "type": "status",
            "status": session.status.value,
            "awaitingInput": session.awaiting_input,
            "busy": busy,
            "state": state.key,
            "stateText": state.text,
        }

    async def _fail(
        self,
        db: StoreCaller,
        sid: str,
        emit: FrameSink,
        code: str,
        message: str,
        notice: str | None = None,
    ) -> None:
        try:
            await db(db.store.mark_interrupted, sid, keep_approvals=False, approval_output=_ENDED)
            session = await db(db.store.get_session, sid)
            if session.status is not Status.FAILED:
                await db(db.store.transition, sid, Status.FAILED)
        except LeaseLost as e:
            log.warning(
                "event=lease_lost session=%s worker=%s reason=%r", sid, self.worker_id, e.message
            )
            return
        except StoreError as e:  # still cannot write (a full disk): it resumes once it can
            log.error("could not mark session %s failed: %s", sid, e.message)
        except Exception:
            log.exception("could not mark session %s failed", sid)
        emit({"type": "status", "status": Status.FAILED.value})
        if notice:
            emit(notice_frame(notice))
        else:
            emit(error_frame(self.redact.text(message), code))

    def _agent_config(self) -> AgentConfig:
        s = self.settings
        return AgentConfig(
            max_iterations=s.max_iterations,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            approval_timeout_s=s.approval.timeout_s,
            context_window_tokens=s.context_window_tokens,
            compact_at=s.compact_at,
            parallel_side_effects=s.sandbox.parallel_side_effects,
        )

    # --- time travel and views --------------------------------------------------------------
    def steps(self, session_id: str, n: int = 10) -> list[Step]:
        return self.store.latest_steps(session_id, n)

    async def rollback(self, session_id: str, step_ref: str) -> RollbackResult:
        self._refuse_if_busy(session_id, "roll back")
        run = self._claim(session_id)  # nothing starts here meanwhile
        try:
            lease = await self.leases.acquire(session_id)  # nor on another worker
            try:
                result = await self.db(self.workspaces.rollback, session_id, step_ref)  # files too
            finally:
                await self.leases.release(lease)
        finally:
            self._unclaim(session_id, run)
        self._emit(session_id, self.status_frame(result.session, busy=False))
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
        self._stopping = True
        if self.cluster is not None:
            await self.cluster.stop()
        runs = list(self._runs.items())
        for _, run in runs:
            if run.task is not None:
                run.task.cancel()
        for sid, run in runs:
            if run.task is not None:
                try:
                    await run.task
                except (asyncio.CancelledError, Exception):
                    log.debug("run of %s ended while shutting down", sid, exc_info=True)
            try:
                # Nothing lost: in-flight steps end as interrupted (kept, not deleted); a
                # pending approval stays pending so it is asked again after restart.
                if run.lost is None:
                    await self.db(self.store.mark_interrupted, sid, lease=run.lease)
            except LeaseLost:
                log.warning("event=lease_lost session=%s worker=%s", sid, self.worker_id)
            except StoreError as e:  # the next start marks them (nothing lost holds on resume)
                log.warning("could not mark steps of %s interrupted: %s", sid, e.message)
            except Exception:
                log.exception("could not mark steps of %s interrupted", sid)
            if run.renewer is not None:
                run.renewer.cancel()
            if run.lease is not None and run.lost is None:
                await self.leases.release(run.lease)  # another worker may resume it at once
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


def _resumable(session: Session) -> bool:
    """Interrupted work to continue (resume on reconnect): Paused, or Running and not waiting
    for input."""
    return session.status is Status.PAUSED or (
        session.status is Status.RUNNING and not session.awaiting_input
    )


__all__ = ["FrameSink", "Runtime", "SessionNotFound"]
