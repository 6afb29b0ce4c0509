"""[runtime] One run in flight on this worker: the single driver of its session (one driver)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from xclaw.agent.hooks import ApprovalRequest
from xclaw.agent.loop import Policy
from xclaw.llm.base import Model
from xclaw.people.answered_by import Answer
from xclaw.runtime.agent_choice import AgentChoice
from xclaw.runtime.agreement import Agreement
from xclaw.store.leases import Lease


@dataclass
class Run:
    """One run in flight: the single driver of its session."""

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
    # The declared agent the run runs (xclaw/runtime/agent_choice.py); None: xclaw's own.
    agent: AgentChoice | None = None
    # display step id -> (request, future answered by answer_approval)
    approvals: dict[str, tuple[ApprovalRequest, asyncio.Future[Answer]]] = field(
        default_factory=dict
    )
