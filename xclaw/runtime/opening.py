"""The write that opens a message's turn: one transaction, one trip to the writer
(docs/storage.md, "A run's writes")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xclaw.errors import SessionNotFound, StoreError
from xclaw.runtime.agreement import RunConfig, with_config
from xclaw.runtime.turn_plan import Turn
from xclaw.store.base import Store, teams_of
from xclaw.store.leases import Lease
from xclaw.store.model import NewStep, Step, StepType
from xclaw.teams import Actor, Need, allows


@dataclass(frozen=True, slots=True)
class Opened:
    """What the write that opens a turn did: the steps it settled, the user's message."""

    interrupted: list[Step]
    message: Step


async def open_turn(
    store: Store,
    session_id: str,
    text: Any,
    *,
    worker_id: str,
    ttl_s: float,
    create: bool,
    title: str | None,
    record: RunConfig | None = None,
    actor: Actor | None = None,
) -> tuple[Lease | None, Opened | None]:
    """The session written if it is new (or titled), its lease taken, what the last run left
    unanswered marked as a message marks it (`Turn.MESSAGE.marking`: approvals included, new
    input answers them), and the user's message (`text`, redacted) recorded. Before, these
    were five store calls, each a thread hop or a commit of its own: the start of a run cost
    more than its steps (bench/HISTORY.md). (None, None): another live worker drives it.

    `actor`, a user of a shared server (docs/teams.md): the message records who sent it, and
    a session this write creates is theirs, in the same transaction. A member whose new
    session's id was taken by someone else a moment before is refused as for an id that
    does not exist (unknown_session), never let into it."""
    message = NewStep(step_type=StepType.USER_INPUT, name="user", input_data=text)
    marking = Turn.MESSAGE.marking
    owner = None if actor is None else actor.user
    sent_by = None if actor is None else actor.recorded()

    def unit() -> tuple[Lease | None, Opened | None]:
        created = False
        if create:
            try:
                # What it runs with is recorded with it (xclaw/runtime/agreement.py).
                meta = {} if record is None else with_config({}, record)
                store.create_session(session_id=session_id, title=title or "", metadata=meta)
                created = True
                if owner is not None:
                    teams_of(store).claim_session(session_id, owner)
            except StoreError:  # another socket created it a moment ago
                if actor is not None and not actor.identity.admin:
                    role = teams_of(store).session_role(session_id, owner or "")
                    if role is None or not allows(role, Need.ACT):
                        raise SessionNotFound(session_id) from None
                if title is not None:
                    store.update_session(session_id, title=title)
        elif title is not None:
            store.update_session(session_id, title=title)
        lease = store.acquire_lease(session_id, worker_id, ttl_s)
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
                session_id,
                keep_approvals=marking.keep_approvals,
                approval_output=marking.approval_output,
                lease=lease,
            )
        )
        said = store.add_step(session_id, message, output_data=sent_by, lease=lease)
        return lease, Opened(interrupted, said)

    return await store.write_stream().put(unit, durable=True)
