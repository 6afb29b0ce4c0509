"""[gateway] Who is asking: the server's token (the admin), a user's token, or a person a trusted
reverse proxy has signed in (docs/teams.md) — and the brake on guessing.

A user's token is checked against the database on every request and every WebSocket frame,
through a cache that holds an answer for at most `CACHE_S` (one second): removing a user or
issuing them a new token takes effect on every worker sharing the database within it (their
open sockets are closed by `Gateway.watch`). Only the SHA-256 of a token is ever looked up
or held; the server's own token is compared in constant time and never leaves this process.

Where a request comes from is the socket's peer; a proxy's headers are believed only from the
addresses the deployment lists (xclaw/gateway/forwarded.py). Failed sign-ins are counted per
client (`client_address`): past `MAX_FAILURES` in `WINDOW_S`, an attempt from that client is
refused unchecked (`too_many_attempts`) until the window has passed — unless its token has
the form of one xclaw issues: no number of tries finds 256 random bits, so such a token is
always checked, and a valid one is never locked out by failures from its address, whoever
made them. Every sign-in is refused and logged here, for HTTP and WebSocket alike.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xclaw.gateway.auth import token_matches
from xclaw.gateway.forwarded import Addresses, header_values, last_address
from xclaw.gateway.settings import TeamSettings
from xclaw.people.teams import (
    SERVER_TOKEN,
    Identity,
    TeamError,
    UserRole,
    hashes_match,
    token_hash,
    user_name_problem,
)
from xclaw.security.credentials import has_issued_form
from xclaw.store.base import TeamStore

log = logging.getLogger("xclaw.gateway.identity")

CACHE_S = 1.0
MAX_FAILURES = 30
WINDOW_S = 60.0
_MAX_TRACKED = 10_000  # addresses remembered (the oldest go first)


class Refusal(enum.StrEnum):
    """Why a sign-in was refused: the error code each route answers with."""

    UNAUTHORIZED = "unauthorized"
    TOO_MANY_ATTEMPTS = "too_many_attempts"


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

    def failed(self, address: str) -> bool:
        """Count a failure; True when it is the one that blocks the address. Failures while
        blocked are not counted (at most MAX_FAILURES are held per address)."""
        seen = self._recent(address)
        if seen is None:
            if len(self._failures) >= _MAX_TRACKED:
                self._failures.pop(next(iter(self._failures)))
            seen = self._failures[address] = deque()
        if len(seen) >= MAX_FAILURES:
            return False
        seen.append(self._clock())
        return len(seen) == MAX_FAILURES

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
        self._proxies = Addresses(settings.trusted_proxies)
        # Whose client-address header is believed: the balancers', and the trusted proxies'.
        self._forwarders = Addresses(settings.client_address_from) | self._proxies
        self.throttle = Throttle(clock)

    # --- where a request comes from ------------------------------------------------------
    def from_proxy(self, peer: str | None) -> bool:
        """Whether the socket's peer is a trusted proxy (whose sign-on header is believed)."""
        return self._proxies.holds(peer)

    def client_address(self, peer: str | None, headers: Mapping[str, str]) -> str:
        """The client failures are counted against: the socket's peer, or behind a listed
        balancer or proxy the client it names last in its client-address header."""
        if self._forwarders.holds(peer):
            named = last_address(header_values(headers, self._settings.client_address_header))
            if named is not None:
                return named
        return peer or "?"

    def proxy_names(self, peer: str | None, headers: Mapping[str, str]) -> list[str]:
        """The names a trusted proxy's sign-on header gives (none from anyone else)."""
        if not self.from_proxy(peer):
            return []
        return [n for n in header_values(headers, self._settings.proxy_user_header) if n]

    # --- who it is -------------------------------------------------------------------------
    async def sign_in(
        self, token: str | None, peer: str | None, headers: Mapping[str, str], *, via: str
    ) -> SignedIn | Refusal:
        """Who a request or socket (`via`: http, websocket) signs in as, or why it is
        refused, with the brake on guessing applied and the refusal logged (never the token:
        whether one was given, and the client)."""
        client = self.client_address(peer, headers)
        named = self.proxy_names(peer, headers)
        if not named and not has_issued_form(token) and self.throttle.blocked(client):
            return Refusal.TOO_MANY_ATTEMPTS  # logged once, when the client was blocked
        signed = await self.identify(token, peer, headers)
        if signed is not None:
            return signed
        if named:  # the proxy vouched for someone who is no user (or for two people)
            log.warning("event=refused reason=proxy_user client=%s via=%s", client, via)
            return Refusal.UNAUTHORIZED
        if self.throttle.blocked(client):
            return Refusal.UNAUTHORIZED  # a token of the issued form, wrong: the block was said
        given = "yes" if token else "no"
        log.warning("event=refused reason=token given=%s client=%s via=%s", given, client, via)
        if self.throttle.failed(client):
            log.warning(
                "event=throttled client=%s via=%s failures=%d window_s=%g",
                client,
                via,
                MAX_FAILURES,
                WINDOW_S,
            )
        return Refusal.UNAUTHORIZED

    async def identify(
        self, token: str | None, peer: str | None, headers: Mapping[str, str]
    ) -> SignedIn | None:
        """The identity the request proves, or None. A trusted proxy's header wins over a
        token (two such headers name nobody); without one, the server's token, else a
        user's."""
        names = self.proxy_names(peer, headers)
        if names:
            who = await self._by_proxy(names[0]) if len(names) == 1 else None
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
            # A name an older version let in against the rule (`admin` and a newline) would
            # show as someone it is not: no sign-in until it is given again properly.
            and user_name_problem(user.name) is None
        ):
            who = Identity(user.name, user.role)
        self._remember(self._by_hash, digest, who, now)
        return who

    async def _by_proxy(self, name: str, *, add: bool = True) -> Identity | None:
        if self._teams is None or user_name_problem(name) is not None:
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
