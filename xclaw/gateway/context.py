"""[gateway] What every gateway endpoint shares: settings, store, runtime, the access token, who is
asking and what they may see (docs/teams.md), and the hub of sockets attached to each
session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from xclaw.config.settings import Settings
from xclaw.gateway.access import SessionAccess
from xclaw.gateway.commands import CommandRunner
from xclaw.gateway.identity import Authenticator, SignedIn, Throttle
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.people.teams import hashes_match
from xclaw.schedules.firing import Scheduler
from xclaw.store.base import Store, TeamStore
from xclaw.wire.shapes import Frame

log = logging.getLogger("xclaw.gateway")

Sink = Callable[[Frame], None]
# How often open sockets of users are checked against the database (a user removed, a
# token replaced, a share taken away): what "at once" means across workers.
WATCH_EVERY_S = 1.0


class Hub:
    """Sockets attached per session, so frames the gateway itself produces (a rollback's new
    history, made by a slash command or the HTTP API) reach every client of that session.
    The runtime's own frames travel through Runtime.subscribe instead."""

    def __init__(self) -> None:
        self._sinks: dict[str, set[Sink]] = {}

    def add(self, session_id: str, sink: Sink) -> None:
        self._sinks.setdefault(session_id, set()).add(sink)

    def remove(self, session_id: str, sink: Sink) -> None:
        sinks = self._sinks.get(session_id)
        if sinks is None:
            return
        sinks.discard(sink)
        if not sinks:
            del self._sinks[session_id]

    def broadcast(self, session_id: str, frame: Frame) -> None:
        for sink in list(self._sinks.get(session_id, ())):
            sink(frame)

    def sockets(self) -> int:
        return sum(len(s) for s in self._sinks.values())


class Watched(Protocol):
    """An open socket of a user, as the watch sees it (xclaw/gateway/ws.py Connection)."""

    signed: SignedIn
    session_id: str | None

    @property
    def pending(self) -> bool:
        """Attached to a new session nobody has written yet."""
        ...

    def sign_out(self) -> None:
        """The user or their token is gone: close the socket (4401)."""
        ...

    def lose_session(self) -> None:
        """Their part in the attached session is gone: detach, as from an unknown id."""
        ...

    def keep_session(self) -> None:
        """The new session it waited on was written as theirs (by another socket of theirs)."""
        ...


@dataclass
class Gateway:
    settings: Settings
    store: Store
    runtime: GatewayRuntime
    token: str
    teams: TeamStore | None = None
    hub: Hub = field(default_factory=Hub)
    commands: CommandRunner = field(init=False)
    auth: Authenticator = field(init=False)
    access: SessionAccess = field(init=False)
    # Sockets signed in as a user (not the server's token), checked by `watch`.
    users_online: set[Watched] = field(default_factory=set)
    # Schedules and webhooks (docs/schedules.md); None on a store that keeps none.
    scheduler: Scheduler | None = field(init=False, default=None)
    # Webhook requests refused (bad signature, unknown name, stale timestamp) per client:
    # counted apart from sign-ins, so a flood of them brakes no person's sign-in.
    hook_throttle: Throttle = field(default_factory=Throttle)

    def __post_init__(self) -> None:
        s = self.settings.schedules
        self.scheduler = Scheduler(
            self.store,  # its schedules, and the record's reads
            self.teams,
            self.runtime,
            self.runtime.worker_id,
            grace_ms=int(s.grace_s * 1000),
            poll_s=s.poll_s,
        )
        self.auth = Authenticator(self.token, self.teams, self.settings.teams)
        self.access = SessionAccess(self.store.record, self.teams)
        self.commands = CommandRunner(self.runtime, self.store.record, self.access, self.teams)

    async def watch(self) -> None:
        """Close the sockets of users removed (or given a new token), and detach those whose
        part in their session was taken away, within WATCH_EVERY_S, whichever worker (or
        `xclaw users remove`) made the change. Two queries a tick, however many sockets."""
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            try:
                await self.watch_once()
            except Exception:  # a database hiccup must not end the watch
                log.exception("event=watch_failed")

    async def watch_once(self) -> None:
        # What each socket is attached to, taken before any await: a socket may write its
        # new session (and own it) while the queries below run.
        seen = [(c, c.session_id, c.pending) for c in self.users_online]
        if not seen or self.teams is None:
            return
        teams = self.teams
        users = {u.name: u for u in await asyncio.to_thread(teams.users)}
        sids = sorted({sid for _, sid, pending in seen if sid is not None and not pending})
        parts = await asyncio.to_thread(teams.session_roles, sids)
        roles = {(sid, user): role for sid, user, role in parts}
        for conn, sid, pending in seen:
            who = conn.signed.identity
            user = users.get(who.user or "")
            proof = conn.signed.proof
            if (
                user is None
                or user.role is not who.role
                or (
                    proof is not None
                    and (user.token_hash is None or not hashes_match(proof, user.token_hash))
                )
            ):
                # What this process remembers of who signed in is stale too: the HTTP API
                # refuses the gone token from now on, not up to CACHE_S later.
                self.auth.forget()
                conn.sign_out()
                continue
            if who.admin or sid is None:
                continue
            if pending:
                # Nobody's until written (its frames are held back meanwhile: ws.py); then
                # only its writer's: kept if that is them, lost to it if someone else.
                exists, role = await self.access.lookup(who, sid, fresh=True)
                if not exists:
                    continue
            elif (sid, user.name) in roles:
                self.access.remember(who, sid, roles[(sid, user.name)])
                continue
            else:
                # Asked once more before acting: a share given since the query above.
                role = await self.access.role(who, sid)
            if conn.session_id != sid or conn.pending != pending:
                continue  # it moved on meanwhile (its own frame decided it)
            if role is None:
                conn.lose_session()
            elif conn.pending:
                conn.keep_session()

    @contextlib.asynccontextmanager
    async def watching(self) -> Any:
        task = asyncio.create_task(self.watch())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
