"""[schedules] A schedule or a webhook as a person asks for it, checked before anything is written
(the command line, the HTTP API, the Python API): the same rules whichever way it comes
(docs/schedules.md). `add_schedule`, `change_schedule`, `add_hook` and `remove_hook` are the
whole of it for a caller holding the store (the command line, `xclaw.open`); the HTTP API
resolves and checks sessions with the gateway's access rules, then makes the rows here."""

from __future__ import annotations

import re
import secrets
from typing import Protocol

from xclaw.errors import SessionNotFound, XclawError
from xclaw.people.teams import Identity, Need, allows
from xclaw.schedules.spec import CatchUp, Kind, ScheduleError, When, no_step_to_fork
from xclaw.store.base import RecordReader, ScheduleStore, TeamStore
from xclaw.store.schedules.sql import Hook, Schedule
from xclaw.store.steps.writes import AddHook, AddSchedule, ChangeSchedule, RemoveHook

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


class ScheduleRoles(Protocol):
    """The roles making a schedule or a webhook takes: the schedules, the record (the session
    it fires into), the teams (who may)."""

    @property
    def schedules(self) -> ScheduleStore: ...

    @property
    def record(self) -> RecordReader: ...

    @property
    def teams(self) -> TeamStore: ...


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


def kind_of(cron: str | None, every: str | None, at: str | None) -> tuple[Kind, str]:
    """Which of the three ways a schedule's times were given (exactly one)."""
    given = [(k, v) for k, v in ((Kind.CRON, cron), (Kind.EVERY, every), (Kind.AT, at)) if v]
    if len(given) != 1:
        raise ScheduleError("give one of cron, every, at")
    return given[0]


def _resolve(store: ScheduleRoles, ref: str) -> str:
    """The session `ref` names (an id or a unique prefix). One not found says why a session
    just opened may not be there yet: a session is written by its first message or its
    name, and the Python API's `add_schedule` / `add_hook` write a new one themselves."""
    try:
        return store.record.resolve_session(ref).session_id
    except SessionNotFound as e:
        said = SessionNotFound(e.session_id)
        said.message = (
            f"{e.message}: a session is written when it is first sent a message or named "
            "(/title, /new TITLE), so one just opened is not there yet — name it, or add the "
            "schedule from the client that opened it (session.add_schedule writes it)"
        )
        said.args = (said.message,)
        raise said from None


def _teams(store: ScheduleRoles) -> TeamStore | None:
    return store.teams


def add_schedule(
    store: ScheduleRoles,
    who: Identity,
    *,
    kind: Kind,
    when: str,
    tz: str,
    session: str | None,
    fork_of: str | None,
    message: str,
    catch_up: str,
    now_ms: int,
) -> Schedule:
    """A schedule made and written: the session resolved (an id or a unique prefix), `who`'s
    rights on it checked as each fire will check them (collaborator to send to it, reader to
    fork it), a template's step to fork from there."""
    if (session is None) == (fork_of is None):
        raise ScheduleError("a schedule sends to one session (--session) or forks one (--fork-of)")
    target = _resolve(store, session or fork_of or "")
    may(_teams(store), who, target, Need.ACT if session is not None else Need.READ)
    if fork_of is not None and not store.record.latest_steps(target, 1):
        raise ScheduleError(no_step_to_fork(target))
    made = new_schedule(
        kind=kind,
        when=when,
        tz=tz,
        session_id=target if session is not None else None,
        fork_of=target if fork_of is not None else None,
        message=message,
        catch_up=catch_up,
        created_by=who.user,
        now_ms=now_ms,
    )
    written: Schedule = store.schedules.write(AddSchedule(schedule=made))
    return written


def change_schedule(
    store: ScheduleRoles, who: Identity, schedule_id: str, *, paused: bool | None = None
) -> Schedule | None:
    """Pause (`paused=True`), resume (`False`) or remove (None) a schedule: its creator's or an
    admin's to do. The schedule as it is now; None once removed. UnknownSchedule."""
    st = store.schedules
    found = st.get_schedule(schedule_id)
    if not may_change(who, found.created_by):
        raise XclawError(f"only {found.created_by or 'an admin'} or an admin may change it")
    if paused is None:
        st.write(ChangeSchedule(schedule_id=schedule_id, remove=True))
        return None
    st.write(ChangeSchedule(schedule_id=schedule_id, paused=paused))
    return st.get_schedule(schedule_id)


def add_hook(
    store: ScheduleRoles, who: Identity, *, name: str, session: str, template: str, now_ms: int
) -> Hook:
    """A webhook made and written, its secret fresh (shown once by whoever asked): the
    session resolved, `who` a collaborator (or owner) of it."""
    target = _resolve(store, session)
    may(_teams(store), who, target, Need.ACT)
    hook = new_hook(
        name=name, session_id=target, template=template, created_by=who.user, now_ms=now_ms
    )
    made: Hook = store.schedules.write(AddHook(hook=hook))
    return made


def remove_hook(store: ScheduleRoles, who: Identity, name: str) -> None:
    """A webhook removed (its URL answers 401 from then on): its creator's or an admin's."""
    from xclaw.errors import UnknownSchedule

    st = store.schedules
    found = st.get_hook(name)
    if found is None or not may_change(who, found.created_by):
        raise UnknownSchedule(f"no webhook {name!r} of yours")
    st.write(RemoveHook(name=name))
