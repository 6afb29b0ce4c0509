"""[gateway] What each person may do to each session (docs/teams.md): the one place the gateway
asks.

An admin (the server's token, or a user with the admin role) may do everything to every
session. A member may do to a session what their part in it allows (xclaw/people/teams.py `Need`):
its owner everything, a viewer only read it, … A session they have no part in answers exactly
as an id that does not exist — `SessionNotFound`, `unknown_session` on the WebSocket, 404 on
the HTTP API — so ids reveal nothing; a part too small answers `Forbidden` (`forbidden`).

A member's part in a session is read from the database and kept for at most `CACHE_S`: a
share taken away stops working on every worker within a second (open sockets are detached
by `Gateway.watch`). Only a part found is kept; "none" is asked again every time, so a
session a member has just created is theirs at once.

Where existence matters too (a WebSocket frame naming a session, a socket's new session that
someone may have written since), `lookup` answers both in one query: another's session and an
id nobody has take the same path and the same time, so the answer's timing says nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from xclaw.errors import AmbiguousSession, Forbidden, SessionNotFound
from xclaw.people.teams import NEED_WORDS, Identity, Need, ShareRole, allows
from xclaw.store.base import RecordReader, TeamStore
from xclaw.store.steps.model import Session

CACHE_S = 1.0
_MAX_CACHED = 50_000


class SessionAccess:
    def __init__(
        self,
        store: RecordReader,
        teams: TeamStore | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._teams = teams
        self._clock = clock
        self._roles: dict[tuple[str, str], tuple[float, ShareRole]] = {}

    async def role(self, who: Identity, session_id: str) -> ShareRole | None:
        """The person's part in the session (an admin: owner of every one); None: no part."""
        if who.admin:
            return ShareRole.OWNER
        if self._teams is None or who.user is None:
            return None
        key = (session_id, who.user)
        now = self._clock()
        hit = self._roles.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        role = await asyncio.to_thread(self._teams.session_role, session_id, who.user)
        if role is None:
            self._roles.pop(key, None)
        else:
            if len(self._roles) >= _MAX_CACHED:
                self._roles.clear()
            self._roles[key] = (now + CACHE_S, role)
        return role

    async def lookup(
        self, who: Identity, session_id: str, *, fresh: bool = False
    ) -> tuple[bool, ShareRole | None]:
        """Whether the session exists and the person's part in it (an admin: owner of every
        one that exists), in one lookup; `fresh`: from the database, not the cache (what a
        socket's new session is decided by, at the moment it acts)."""
        user = who.user
        if not fresh and not who.admin and user is not None:
            hit = self._roles.get((session_id, user))
            if hit is not None and hit[0] > self._clock():
                return True, hit[1]
        if self._teams is None:
            found = await asyncio.to_thread(self._store.find_session, session_id)
            return found is not None, ShareRole.OWNER if found and who.admin else None
        exists, role = await asyncio.to_thread(self._teams.session_part, session_id, user or "")
        if who.admin:
            return exists, ShareRole.OWNER if exists else None
        if user is not None:
            if role is None:
                self._roles.pop((session_id, user), None)
            else:
                self.remember(who, session_id, role)
        return exists, role

    def remember(self, who: Identity, session_id: str, role: ShareRole) -> None:
        """A part just read by someone else (the watch's one query for every socket)."""
        if who.user is not None and not who.admin:
            if len(self._roles) >= _MAX_CACHED:
                self._roles.clear()
            self._roles[(session_id, who.user)] = (self._clock() + CACHE_S, role)

    async def require(self, who: Identity, session_id: str, need: Need) -> ShareRole:
        """SessionNotFound without a part in it (as for an id nobody has), Forbidden with a
        part too small for `need`."""
        role = await self.role(who, session_id)
        if role is None:
            raise SessionNotFound(session_id)
        if not allows(role, need):
            raise Forbidden(
                f"you are {'an' if role.value[0] in 'aeiou' else 'a'} {role.value} of session "
                f"{session_id}: you may not "
                f"{NEED_WORDS[need]} (ask its owner to share it with you as "
                f"{need.value.value if need is not Need.OWN else 'its owner'})"
            )
        return role

    def forget(self, session_id: str | None = None) -> None:
        """This process changed who may see a session (a share): ask the database again."""
        if session_id is None:
            self._roles.clear()
            return
        for key in [k for k in self._roles if k[0] == session_id]:
            del self._roles[key]

    async def sessions(self, who: Identity, *, limit: int | None = None) -> list[Session]:
        """What the person may see, most recently updated first."""
        if who.admin:
            return await asyncio.to_thread(self._store.list_sessions, limit=limit)
        if self._teams is None or who.user is None:
            return []
        return await asyncio.to_thread(self._teams.sessions_of, who.user, limit=limit)

    async def resolve(self, who: Identity, ref: str) -> Session:
        """A full id or a unique prefix, among the sessions the person may see only: another's
        session neither matches nor makes a prefix ambiguous."""
        if who.admin:
            return await asyncio.to_thread(self._store.resolve_session, ref)
        ref = ref.strip()
        mine = await self.sessions(who)
        exact = [s for s in mine if s.session_id == ref]
        if exact:
            return exact[0]
        matches = [s for s in mine if ref and s.session_id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousSession(ref, [s.session_id for s in matches])
        raise SessionNotFound(ref)

    async def visible(self, who: Identity, session_ids: list[str]) -> list[str]:
        """The ones of these the person may see (e.g. the sessions a worker drives)."""
        if who.admin:
            return session_ids
        return [sid for sid in session_ids if await self.role(who, sid) is not None]
