"""[gateway] What the gateway needs from the runtime: the one seam between the two layers.

xclaw.runtime.Runtime satisfies it (mypy checks this where the server wires them); the gateway
imports only this Protocol, so it never reaches into the runtime's internals and a test may
hand it any object with these members."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from xclaw.agents.catalog import AgentCatalog
    from xclaw.agents.definition import AgentDefinition
    from xclaw.config.settings import Settings
    from xclaw.llm.prices import PriceTable
    from xclaw.people.answered_by import AnsweredBy
    from xclaw.people.teams import Actor
    from xclaw.recorder.redact import Redactor
    from xclaw.runtime.inputs import Submitted
    from xclaw.runtime.rollbacks import Outcome, Preview
    from xclaw.runtime.wiring import Toolbox
    from xclaw.sandbox.container.listing import SessionProcesses
    from xclaw.store.queue.sql import QueuedInput
    from xclaw.store.steps.model import Session, Step
    from xclaw.wire.busy import BusyPolicy

from xclaw.wire.shapes import Frame, HistoryJson, QueueJson, StatusJson

FrameSink = Callable[[Frame], None]


class GatewayRuntime(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def toolbox(self) -> Toolbox: ...
    @property
    def worker_id(self) -> str: ...
    @property
    def prices(self) -> PriceTable: ...
    @property
    def redact(self) -> Redactor:
        """What every frame and API answer passes before it leaves (docs/security.md)."""
        ...

    # --- model and health
    def require_model(self) -> None: ...
    def model_name(self) -> str | None: ...
    def driven_sessions(self) -> list[str]: ...

    # --- budgets (docs/budgets.md)
    async def budget(self, target: str) -> dict[str, Any]: ...
    async def set_budget(
        self,
        target: str,
        caps: Mapping[str, float | None] | None = None,
        *,
        grant_tokens: int = 0,
        grant_usd: float = 0.0,
    ) -> dict[str, Any]: ...

    # --- attaching and watching
    def subscribe(self, session_id: str, sink: FrameSink) -> Callable[[], None]: ...
    async def peek(self, session_id: str | None) -> tuple[Session, bool]: ...
    def history_frame(self, session_id: str) -> HistoryJson: ...
    def status_frame(self, session: Session, *, busy: bool | None = None) -> StatusJson: ...
    def pending_approval_frames(self, session_id: str) -> list[Frame]: ...
    def is_busy(self, session_id: str) -> bool: ...
    async def resume_if_needed(self, session_id: str, *, failed: bool = False) -> bool: ...
    async def wait_idle(self, session_id: str) -> None:
        """Until the run this worker drives ends (at once when it drives none)."""
        ...

    # --- driving
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
    ) -> tuple[Step, bool]: ...
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
        """`send`, and what the message does while the run is busy (xclaw/wire/busy.py)."""
        ...

    async def queued(self, session_id: str) -> list[QueuedInput]: ...
    async def unqueue(self, session_id: str, entry_id: str) -> QueuedInput | None: ...
    async def set_busy_policy(self, session_id: str, policy: BusyPolicy | None) -> Session: ...
    async def queue_on_attach(self, session_id: str) -> QueueJson | None:
        """The session's queue for a client attaching (None: empty); what waits with no
        run to wait for starts."""
        ...

    def answer_approval(
        self,
        session_id: str,
        step_ref: str,
        approve: bool,
        by: AnsweredBy | None = None,
        *,
        message: str | None = None,
        edited: Mapping[str, Any] | None = None,
    ) -> None: ...

    # --- declared agents (docs/agents.md)
    @property
    def agents(self) -> AgentCatalog: ...
    def agent_named(self, name: str) -> AgentDefinition: ...
    async def choose_agent(self, session_id: str, name: str) -> Session: ...
    def cancel(self, session_id: str) -> bool: ...
    async def compact(self, session_id: str) -> None: ...

    # --- sessions and time travel
    def steps(self, session_id: str, n: int = 10) -> list[Step]: ...
    def title_of(self, title: str) -> str: ...
    async def rename(self, session_id: str, title: str) -> Session: ...
    async def rollback(
        self,
        session_id: str,
        step_ref: str,
        *,
        accept_irreversible: bool = False,
        retry: bool = False,
        by: AnsweredBy | None = None,
    ) -> Outcome: ...
    async def rollback_preview(self, session_id: str, step_ref: str) -> Preview: ...
    async def processes(self, session_id: str) -> SessionProcesses:
        """What the session's commands left running between steps (docs/containers.md)."""
        ...

    async def abandon_rollback(self, session_id: str, by: AnsweredBy | None = None) -> Step: ...
    async def fork(
        self,
        session_id: str,
        step_ref: str,
        title: str | None = None,
        *,
        new_session_id: str | None = None,
    ) -> Session: ...
    async def delete(self, session_id: str) -> None: ...
    async def shutdown(self) -> None: ...
