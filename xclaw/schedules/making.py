"""[schedules] A schedule or a webhook as a person asks for it, checked before anything is written
(the command line, the HTTP API): the same rules whichever way it comes (docs/schedules.md)."""

from __future__ import annotations

import re
import secrets

from xclaw.errors import SessionNotFound, XclawError
from xclaw.people.teams import Identity, Need, allows
from xclaw.schedules.spec import CatchUp, Kind, ScheduleError, When
from xclaw.store.base import TeamStore
from xclaw.store.schedules.sql import Hook, Schedule

HOOK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_MESSAGE = 100_000


def new_schedule(
    *,
    kind: Kind,
    when: str,
    tz: str,
    session_id: str | None,
    fork_of: str | None,
    message: str,
    catch_up: str,
    created_by: str | None,
    now_ms: int,
) -> Schedule:
    """The row of a new schedule: its first tick computed, a fresh id and secret seed."""
    if (session_id is None) == (fork_of is None):
        raise ScheduleError("a schedule sends to one session (--session) or forks one (--fork-of)")
    if not message.strip():
        raise ScheduleError("a schedule needs a message")
    if len(message) > MAX_MESSAGE:
        raise ScheduleError(f"the message is longer than {MAX_MESSAGE} characters")
    try:
        policy = CatchUp(catch_up)
    except ValueError:
        raise ScheduleError(f"{catch_up!r}: the catch-up policy is skip, once or all") from None
    spec = When.make(kind, when, tz, now_ms)
    first = spec.first()
    if first is None:
        raise ScheduleError(f"{when!r} never fires")
    if kind is Kind.AT:
        first = max(first, now_ms)  # a moment already past: fires at once (on time, now)
    return Schedule(
        schedule_id="sch" + secrets.token_hex(6),
        kind=kind.value,
        spec=spec.spec,
        tz=tz,
        anchor=spec.anchor,
        session_id=session_id,
        fork_of=fork_of,
        message=message,
        catch_up=policy.value,
        paused=False,
        created_by=created_by,
        created_at=now_ms,
        updated_at=now_ms,
        next_fire=first,
        last_fire=None,
        fired=0,
        skipped=0,
        seed=secrets.token_hex(16),
    )


def new_hook(
    *, name: str, session_id: str, template: str, created_by: str | None, now_ms: int
) -> Hook:
    """The row of a new webhook with a fresh secret (shown once to whoever made it)."""
    if not HOOK_NAME.match(name):
        raise ScheduleError(
            f"{name!r}: a webhook's name is 1-64 of a-z 0-9 _ -, starting with a letter or digit"
        )
    if not template.strip():
        raise ScheduleError("a webhook needs a template (the message it sends)")
    return Hook(name, session_id, template, "whsec_" + secrets.token_hex(24), created_by, now_ms)


def may(teams: TeamStore | None, who: Identity, session_id: str, need: Need) -> None:
    """SessionNotFound when `who` has no part in the session, XclawError when too small."""
    if who.admin:
        return
    role = None if teams is None or who.user is None else teams.session_role(session_id, who.user)
    if role is None:
        raise SessionNotFound(session_id)
    if not allows(role, need):
        raise XclawError(
            f"{who.user} is a {role.value} of session {session_id}: a schedule or webhook needs "
            f"{'read' if need is Need.READ else 'collaborator'} rights on it"
        )


def may_change(who: Identity, created_by: str | None) -> bool:
    """Who may pause, resume or remove a schedule or webhook: its creator, or an admin."""
    return who.admin or (who.user is not None and who.user == created_by)
