"""Who is asking: the server's token (the admin), a user's token, or a person a trusted reverse
proxy has signed in (docs/teams.md) — and the brake on guessing.

A user's token is checked against the database on every request and every WebSocket frame,
through a cache that holds an answer for at most `CACHE_S` (one second): removing a user or
issuing them a new token takes effect on every worker sharing the database within it (their
open sockets are closed by `Gateway.watch`). Only the SHA-256 of a token is ever looked up
or held; the server's own token is compared in constant time and never leaves this process.
Failed sign-ins are counted per client address: past `MAX_FAILURES` in `WINDOW_S`, every
attempt from that address is refused (`too_many_attempts`) until the window has passed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xclaw.gateway.auth import token_matches
from xclaw.gateway.settings import TeamSettings
from xclaw.store.base import TeamStore
from xclaw.teams import (
    ADMIN_WORD,
    SERVER_TOKEN,
    USER_NAME_RE,
    Identity,
    TeamError,
    UserRole,
    hashes_match,
    token_hash,
)

CACHE_S = 1.0
MAX_FAILURES = 30
WINDOW_S = 60.0
_MAX_TRACKED = 10_000  # addresses remembered (the oldest go first)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """An identity and what proves it still: the hash of the user's token (None for the
    server's token and for proxy sign-on, proved by the request itself)."""

    identity: Identity
    proof: str | None = None


class Throttle:
    """Failed sign-ins per client address, in a sliding window."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    def blocked(self, address: str) -> bool:
        seen = self._recent(address)
        return seen is not None and len(seen) >= MAX_FAILURES

    def failed(self, address: str) -> None:
        seen = self._recent(address)
        if seen is None:
            if len(self._failures) >= _MAX_TRACKED:
                self._failures.pop(next(iter(self._failures)))
            seen = self._failures[address] = deque()
        seen.append(self._clock())

    def _recent(self, address: str) -> deque[float] | None:
        seen = self._failures.get(address)
        if seen is None:
            return None
        edge = self._clock() - WINDOW_S
        while seen and seen[0] < edge:
            seen.popleft()
        if not seen:
            del self._failures[address]
            return None
        return seen


class Authenticator:
    """Decides who a request or socket comes from."""

    def __init__(
        self,
        server_token: str,
        teams: TeamStore | None,
        settings: TeamSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._server_token = server_token
        self._teams = teams
        self._settings = settings
        self._clock = clock
        self._by_hash: dict[str, tuple[float, Identity | None]] = {}
        self._by_name: dict[str, tuple[float, Identity | None]] = {}
        self._proxies = tuple(
            ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies
        )
        self.throttle = Throttle(clock)

    # --- where a request comes from ------------------------------------------------------
    def from_proxy(self, peer: str | None) -> bool:
        if peer is None or not self._proxies:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in net for net in self._proxies)

    def client_address(self, peer: str | None, headers: Mapping[str, str]) -> str:
        """The address failures are counted against: the peer, or behind a trusted proxy the
        client it names last in X-Forwarded-For."""
        if self.from_proxy(peer):
            forwarded = headers.get("x-forwarded-for", "")
            last = forwarded.split(",")[-1].strip()
            if last:
                return last
        return peer or "?"

    # --- who it is -------------------------------------------------------------------------
    async def identify(
        self, token: str | None, peer: str | None, headers: Mapping[str, str]
    ) -> SignedIn | None:
        """The identity the request proves, or None. A trusted proxy's header wins over a
        token; without one, the server's token, else a user's."""
        if self.from_proxy(peer):
            name = headers.get(self._settings.proxy_user_header.lower(), "").strip()
            if name:
                who = await self._by_proxy(name)
                return None if who is None else SignedIn(who)
        if not token:
            return None
        if token_matches(token, self._server_token):
            return SignedIn(SERVER_TOKEN)
        if self._teams is None:
            return None
        digest = token_hash(token)
        who = await self._by_token_hash(digest)
        return None if who is None else SignedIn(who, digest)

    async def still(self, signed: SignedIn) -> bool:
        """Whether what signed this socket in still holds (the user and their token are
        still there), asked on each frame: at most CACHE_S late."""
        if signed.identity.user is None:
            return True
        if signed.proof is None:
            return await self._by_proxy(signed.identity.user, add=False) == signed.identity
        return await self._by_token_hash(signed.proof) == signed.identity

    def forget(self) -> None:
        """Drop every cached answer (this process changed users)."""
        self._by_hash.clear()
        self._by_name.clear()

    async def _by_token_hash(self, digest: str) -> Identity | None:
        now = self._clock()
        hit = self._by_hash.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        assert self._teams is not None
        user = await asyncio.to_thread(self._teams.user_by_token_hash, digest)
        who = None
        if (
            user is not None
            and user.token_hash is not None
            and hashes_match(digest, user.token_hash)
        ):
            who = Identity(user.name, user.role)
        self._remember(self._by_hash, digest, who, now)
        return who

    async def _by_proxy(self, name: str, *, add: bool = True) -> Identity | None:
        if self._teams is None or not USER_NAME_RE.match(name) or name == ADMIN_WORD:
            return None
        now = self._clock()
        hit = self._by_name.get(name)
        if hit is not None and hit[0] > now:
            return hit[1]
        user = await asyncio.to_thread(self._teams.get_user, name)
        if user is None and add and self._settings.proxy_adds_users:
            try:
                user = await asyncio.to_thread(self._teams.add_user, name, UserRole.MEMBER, None)
            except TeamError:  # another worker added them a moment ago
                user = await asyncio.to_thread(self._teams.get_user, name)
        who = None if user is None else Identity(user.name, user.role)
        self._remember(self._by_name, name, who, now)
        return who

    @staticmethod
    def _remember(
        cache: dict[str, tuple[float, Identity | None]], key: str, who: Identity | None, now: float
    ) -> None:
        if len(cache) >= _MAX_TRACKED:
            cache.clear()
        cache[key] = (now + CACHE_S, who)
