"""[runtime] What each session's runs drive with on this worker, acted on: the agreement of
xclaw/runtime/agreement.py (pure) asked with what the store knows, the run given the
session's model chain and approval policy, a session this worker cannot drive declined, and
the configuration said once per session (docs/postgres.md, "What a session runs with")."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Protocol

from xclaw.agent.loop import Policy
from xclaw.config.settings import Settings
from xclaw.llm.base import Model
from xclaw.llm.prices import PriceTable
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.recorder import Recorder
from xclaw.runtime.agreement import ALERT, Agreement, RunConfig, agree, recorded_config, with_config
from xclaw.runtime.leases import LeaseKeeper
from xclaw.runtime.run import Run
from xclaw.runtime.sandbox_pin import recorded_policy, refusal, with_policy
from xclaw.runtime.subscribers import Broadcast
from xclaw.sandbox.container.policy import SandboxPolicy
from xclaw.store.base import LeaseStore, Record
from xclaw.store.leases import Lease
from xclaw.store.steps.model import NewStep, Session, StepType
from xclaw.store.steps.writes import AddStep
from xclaw.wire.build import notice_frame, step_frame

log = logging.getLogger("xclaw.runtime")


class ConfigStore(Protocol):
    """The roles the configurations take: sessions' metadata read and written, an alert
    under a lease taken, the live workers."""

    @property
    def record(self) -> Record: ...

    @property
    def leases(self) -> LeaseStore: ...


@dataclass(frozen=True, slots=True)
class ConfigParts:
    """What the session configurations work with, wired once by the runtime's assembly."""

    db: StoreCaller[ConfigStore]
    run_config: RunConfig  # what this worker runs sessions with
    # The settings a session's own model chain and approval rules are built from.
    settings: Settings
    leases: LeaseKeeper
    broadcast: Broadcast
    prices: PriceTable
    worker_id: str


class SessionConfigs:
    def __init__(self, parts: ConfigParts) -> None:
        self.parts = parts
        # `xclaw run --approval MODE`: the user chose this run's mode (it is recorded).
        self.explicit_approval = False
        self._chains: dict[tuple[str, ...], Model] = {}
        self._policies: dict[str, Policy] = {}
        self._refused: dict[str, RunConfig] = {}  # session -> the configuration refused (said)
        self._said: dict[str, dict[str, Any]] = {}  # session -> the session_config said last

    async def agreement(self, session: Session | None, *, explicit: bool) -> Agreement:
        """What a run of `session` drives with here; `explicit`: asked by the user (a message,
        `xclaw run --session`), not a takeover."""
        p = self.parts
        recorded = None if session is None else recorded_config(session.metadata)
        mine = p.run_config
        live: list[tuple[str, RunConfig]] = []
        if recorded is not None and not set(recorded.models) <= set(mine.models):
            live = await p.db(self._live_configs)  # who else could run it
        return agree(
            recorded,
            mine,
            available=mine.models,
            explicit=explicit,
            explicit_approval=self.explicit_approval,
            live=live,
            worker=p.worker_id,
        )

    def _live_configs(self) -> list[tuple[str, RunConfig]]:
        """The other live workers on this database and what they run with."""
        out = []
        for w in self.parts.db.store.leases.workers():
            config = RunConfig.from_json(w.info)
            if w.alive and w.worker_id != self.parts.worker_id and config is not None:
                out.append((w.worker_id, config))
        return out

    def declined_before(self, sid: str, agreement: Agreement) -> bool:
        """This worker declined the session already, for the same configuration."""
        return agreement.refused and self._refused.get(sid) == agreement.session

    async def equip(
        self, sid: str, run: Run, agreement: Agreement, lease: Lease | None = None
    ) -> None:
        """Give the run the session's model chain and approval policy where they are not this
        worker's, and record the configuration when it is new (with `lease`: the write of a
        resume; a message records it in the write that opens its turn)."""
        p = self.parts
        use = agreement.use
        assert use is not None
        run.agreement = agreement
        if use.models != p.run_config.models:
            run.model = self._chain(use.models)
        if use.approval != p.settings.approval.mode:
            run.policy = self._policy(use.approval)
        if lease is not None and agreement.record is not None:
            session = await p.db(p.db.store.record.get_session, sid)
            await p.db(
                p.db.store.record.update_session,
                sid,
                metadata=with_config(session.metadata, agreement.record),
            )

    def _chain(self, models: tuple[str, ...]) -> Model:
        """A model chain of this worker's providers, in the session's order (cached)."""
        chain = self._chains.get(models)
        if chain is None:
            from xclaw.llm.factory import build_model

            settings = self.parts.settings
            by_spec = {p.model: p for p in settings.providers}
            providers = tuple(by_spec[m] for m in models)
            chain = self._chains[models] = build_model(
                settings.model_copy(update={"providers": providers})
            )
        return chain

    def _policy(self, mode: str) -> Policy:
        """This worker's approval rules under another mode (cached)."""
        policy = self._policies.get(mode)
        if policy is None:
            from xclaw.tools.approval import ApprovalPolicy

            setup = self.parts.settings.tool_setup()
            approval = setup.approval.model_copy(update={"mode": mode})
            policy = ApprovalPolicy.from_settings(replace(setup, approval=approval))
            self._policies[mode] = policy
        return policy

    async def decline(self, sid: str, lease: Lease, agreement: Agreement) -> None:
        """This worker does not drive the session: it says so (a notice, a session_config
        alert written under the lease it took) and lets the lease go at once, so the worker
        that has the session's model takes it (its sweep, or a client's reconnect)."""
        p = self.parts
        details = agreement.alert()
        try:
            if details is not None:
                step = NewStep(step_type=StepType.SYSTEM_ALERT, name=ALERT, input_data=details)
                added = await p.db(
                    p.db.store.record.write, AddStep(session_id=sid, step=step), lease
                )
                p.broadcast.emit(sid, step_frame(added, p.prices))
        finally:
            await p.leases.release(lease)
        if agreement.session is not None:
            self._refused[sid] = agreement.session
        log.warning(
            "event=config_mismatch session=%s worker=%s session_models=%s worker_models=%s",
            sid,
            p.worker_id,
            ",".join(agreement.session.models if agreement.session else ()),
            ",".join(p.run_config.models),
        )
        if (words := agreement.notice()) is not None:
            p.broadcast.emit(sid, notice_frame(words))

    # --- the session's pinned sandbox policy (xclaw/runtime/sandbox_pin.py) -------------------
    def sandbox_refusal(self, session: Session) -> str | None:
        """Why this worker may not run `session` under its recorded sandbox policy; None: it
        may."""
        return refusal(recorded_policy(session.metadata), self.sandbox, self.parts.worker_id)

    @property
    def sandbox(self) -> SandboxPolicy:
        return SandboxPolicy.from_settings(self.parts.settings.sandbox)

    async def pin_sandbox(self, sid: str) -> None:
        """Record this worker's container policy as the session's when it has none yet (its
        first run here: the check before the run let it through). A host policy is not
        written: nothing recorded reads as one, and the default path costs no write."""
        p = self.parts
        if self.sandbox.kind != "container":
            return
        session = await p.db(p.db.store.record.get_session, sid)
        if recorded_policy(session.metadata) is None:
            await p.db(
                p.db.store.record.update_session,
                sid,
                metadata=with_policy(session.metadata, self.sandbox),
            )

    async def decline_sandbox(self, sid: str, lease: Lease, why: str) -> None:
        """A takeover this worker may not drive (the session's sandbox policy is not its
        own): said, and the lease let go at once for a worker that has the policy."""
        try:
            step = NewStep(
                step_type=StepType.SYSTEM_ALERT,
                name=ALERT,
                input_data={"decision": "refused", "sandbox": why, "worker": self.parts.worker_id},
            )
            db = self.parts.db
            added = await db(db.store.record.write, AddStep(session_id=sid, step=step), lease)
            self.parts.broadcast.emit(sid, step_frame(added, self.parts.prices))
        finally:
            await self.parts.leases.release(lease)
        log.warning("event=sandbox_mismatch session=%s worker=%s", sid, self.parts.worker_id)
        self.parts.broadcast.emit(sid, notice_frame(why))

    async def announce(self, sid: str, run: Run, recorder: Recorder) -> None:
        """Driven with the session's configuration, not this worker's (or changed by the
        user's message): said to the clients and in the record, as the run starts. Once per
        session and worker: a session driven here run after run with its own configuration
        does not gather an alert per turn."""
        agreed = run.agreement
        said = None if agreed is None else agreed.alert()
        if agreed is None or said is None or self._said.get(sid) == said:
            return
        if (words := agreed.notice()) is not None:
            self.parts.broadcast.emit(sid, notice_frame(words))
        await recorder.alert(ALERT, said)
        self._said[sid] = said
