"""[runtime] The write that opens a message's turn: one transaction, one trip to the writer
(docs/storage.md, "A run's writes")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xclaw.people.teams import Actor
from xclaw.runtime.agent_choice import AgentRecord, with_agent
from xclaw.runtime.agreement import RunConfig, with_config
from xclaw.runtime.turn_plan import Turn
from xclaw.store.base import StepWriter
from xclaw.store.leases import Lease
from xclaw.store.queue.sql import QueuedInput
from xclaw.store.steps.model import NewStep, Step, StepType
from xclaw.store.steps.writes import OpenTurn


@dataclass(frozen=True, slots=True)
class Opened:
    """What the write that opens a turn did: the steps it settled, the user's message."""

    interrupted: list[Step]
    message: Step


async def open_turn(
    store: StepWriter,
    session_id: str,
    text: Any,
    *,
    worker_id: str,
    ttl_s: float,
    create: bool,
    title: str | None,
    record: RunConfig | None = None,
    actor: Actor | None = None,
    metadata: Mapping[str, Any] | None = None,
    message_id: str | None = None,
    agent: AgentRecord | None = None,
    queued: QueuedInput | None = None,
) -> tuple[Lease | None, Opened | None]:
    """The session written if it is new (or titled), its lease taken, what the last run left
    unanswered marked as a message marks it (`Turn.MESSAGE.marking`: approvals included, new
    input answers them), and the user's message (`text`, redacted) recorded. Before, these
    were five store calls, each a thread hop or a commit of its own: the start of a run cost
    more than its steps (bench/HISTORY.md). (None, None): another live worker drives it.

    `actor`, a user of a shared server (docs/teams.md): the message records who sent it, and
    a session this write creates is theirs, in the same transaction. A member whose new
    session's id was taken by someone else a moment before is refused as for an id that
    does not exist (unknown_session), never let into it. `agent`: the declared agent the
    session runs from this message on, recorded with it (xclaw/runtime/agent_choice.py).

    `metadata`: keys of the session's metadata set in the same transaction (merged over
    what it holds), so what they say of the message holds exactly when the message does.

    `message_id`, the client's id for the message (docs/protocol.md): recorded with it; one
    the session holds already is refused as MessageRecorded, nothing written.

    `queued`: the waiting message (xclaw/store/queue/sql.py) this turn runs, its id
    `message_id`: recorded as its sender sent it, and taken off the queue in the same
    transaction (a kill leaves it waiting or recorded, never both)."""
    message = NewStep(step_type=StepType.USER_INPUT, name="user", input_data=text)
    marking = Turn.MESSAGE.marking
    # What it runs with is recorded with it (xclaw/runtime/agreement.py, agent_choice.py).
    merged = _merged(metadata, record)
    if agent is not None:
        merged = with_agent(dict(merged or {}), agent)
    opening = OpenTurn(
        session_id=session_id,
        message=message,
        worker_id=worker_id,
        ttl_s=ttl_s,
        create=create,
        title=title,
        metadata=merged,
        keep_approvals=marking.keep_approvals,
        approval_output=marking.approval_output,
        sent_by=queued.sent_by
        if queued is not None
        else None
        if actor is None
        else actor.recorded(),
        owner=None if actor is None else actor.user,
        member=actor is not None and not actor.identity.admin,
        message_id=message_id,
        dequeue=queued is not None,
    )
    lease, interrupted, added = await store.write_stream().put(opening)
    if lease is None:  # another live worker drives it
        return None, None
    return lease, Opened(interrupted, added)


def _merged(given: Mapping[str, Any] | None, record: RunConfig | None) -> Mapping[str, Any] | None:
    """The metadata keys the opening writes: the caller's, and the configuration it runs
    with (xclaw/runtime/agreement.py)."""
    if record is None:
        return None if given is None else dict(given)
    return with_config(dict(given or {}), record)
