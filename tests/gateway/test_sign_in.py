"""Signing in, below the routes (xclaw/gateway/identity.py, forwarded.py): whose headers are
believed, whom failures count against, what the brake on guessing refuses and what it never
does, and what is logged. The routes themselves, through real servers and a real nginx:
tests/gateway/test_teams.py, test_proxy_signon.py, test_balancer.py."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from starlette.datastructures import Headers

from xclaw.gateway.forwarded import Addresses, ForwardedScheme
from xclaw.gateway.identity import MAX_FAILURES, WINDOW_S, Authenticator, Refusal, SignedIn
from xclaw.gateway.settings import TeamSettings
from xclaw.people.teams import UserRole, new_token, token_hash
from xclaw.security.credentials import SERVER_TOKEN_PREFIX, USER_TOKEN_PREFIX, issue_token
from xclaw.store.sqlite.store import SQLiteStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def raw(*pairs: tuple[str, str]) -> Headers:
    """Headers as the ASGI server gives them, a name possibly more than once."""
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


NO_HEADERS = raw()


async def test_guesses_are_braked_a_token_of_the_issued_form_never_locked_out() -> None:
    clock = Clock()
    server = issue_token(SERVER_TOKEN_PREFIX)
    auth = Authenticator(server, None, TeamSettings(), clock=clock)
    for i in range(MAX_FAILURES):
        assert await auth.sign_in(f"guess-{i}", "10.0.0.9", NO_HEADERS, via="http") == (
            Refusal.UNAUTHORIZED
        )
    assert await auth.sign_in("guess-x", "10.0.0.9", NO_HEADERS, via="http") == (
        Refusal.TOO_MANY_ATTEMPTS
    )
    assert await auth.sign_in(None, "10.0.0.9", NO_HEADERS, via="http") == (
        Refusal.TOO_MANY_ATTEMPTS
    )
    # A token of the form xclaw issues is checked: the valid one gets in, a wrong one is
    # refused as wrong (256 bits: no number of tries finds one).
    signed = await auth.sign_in(server, "10.0.0.9", NO_HEADERS, via="websocket")
    assert isinstance(signed, SignedIn) and signed.identity.user is None
    wrong = issue_token(USER_TOKEN_PREFIX)
    assert await auth.sign_in(wrong, "10.0.0.9", NO_HEADERS, via="http") == Refusal.UNAUTHORIZED
    # Another address: its own count.
    assert await auth.sign_in("guess", "10.0.0.8", NO_HEADERS, via="http") == (Refusal.UNAUTHORIZED)
    # The window passes: guesses are checked again.
    clock.now += WINDOW_S + 1
    assert await auth.sign_in("guess", "10.0.0.9", NO_HEADERS, via="http") == (Refusal.UNAUTHORIZED)


async def test_a_configured_token_of_another_form_is_braked_with_the_guesses() -> None:
    """XCLAW_TOKEN set to something guessable: the brake is what protects it, so from a
    blocked address it is refused like any guess until the window has passed."""
    clock = Clock()
    auth = Authenticator("weak-token", None, TeamSettings(), clock=clock)
    for i in range(MAX_FAILURES):
        await auth.sign_in(f"weak-{i}", "10.0.0.9", NO_HEADERS, via="http")
    assert await auth.sign_in("weak-token", "10.0.0.9", NO_HEADERS, via="http") == (
        Refusal.TOO_MANY_ATTEMPTS
    )
    clock.now += WINDOW_S + 1
    assert isinstance(
        await auth.sign_in("weak-token", "10.0.0.9", NO_HEADERS, via="http"), SignedIn
    )


async def test_refusals_are_logged_once_each_and_the_block_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = Authenticator("s" * 32, None, TeamSettings())
    caplog.set_level(logging.WARNING, logger="xclaw.gateway.identity")
    secret = "a-wrong-token-that-must-not-be-logged"
    for _ in range(MAX_FAILURES + 20):
        await auth.sign_in(secret, "10.0.0.9", NO_HEADERS, via="http")
    lines = [r.getMessage() for r in caplog.records]
    assert lines.count("event=refused reason=token given=yes client=10.0.0.9 via=http") == 30
    assert lines.count("event=throttled client=10.0.0.9 via=http failures=30 window_s=60") == 1
    assert len(lines) == 31 and not any(secret in line for line in lines)


def test_the_client_is_named_only_by_the_listed_addresses() -> None:
    settings = TeamSettings(client_address_from=("10.0.0.0/24",), trusted_proxies=("10.0.1.5",))
    auth = Authenticator("s" * 32, None, settings)
    xff = raw(("X-Forwarded-For", "6.6.6.6, 1.2.3.4"))
    assert auth.client_address("10.0.0.7", xff) == "1.2.3.4"  # a balancer: its last address
    assert auth.client_address("10.0.1.5", xff) == "1.2.3.4"  # a trusted proxy too
    assert auth.client_address("127.0.0.1", xff) == "127.0.0.1"  # anyone else: the peer
    # The header sent twice (a proxy that adds its own after the client's): the last counts.
    twice = raw(("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "1.2.3.4"))
    assert auth.client_address("10.0.0.7", twice) == "1.2.3.4"
    # Not an address: the balancer's own, never text from a header in the logs.
    junk = raw(("X-Forwarded-For", "1.2.3.4, evil\x7fname"))
    assert auth.client_address("10.0.0.7", junk) == "10.0.0.7"
    assert auth.client_address("10.0.0.7", NO_HEADERS) == "10.0.0.7"
    # Another header, as configured.
    real_ip = Authenticator(
        "s" * 32,
        None,
        TeamSettings(client_address_from=("10.0.0.7",), client_address_header="X-Real-IP"),
    )
    assert real_ip.client_address("10.0.0.7", raw(("X-Real-IP", "::1"))) == "::1"
    assert real_ip.client_address("10.0.0.7", xff) == "10.0.0.7"


async def test_sign_on_headers_are_believed_from_trusted_proxies_only_and_once(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    try:
        teams = store.teams
        teams.add_user("boss", UserRole.ADMIN, token_hash(new_token()))
        teams.add_user("alice", UserRole.MEMBER, None)
        settings = TeamSettings(client_address_from=("10.0.0.7",), trusted_proxies=("10.0.1.5",))
        auth = Authenticator("s" * 32, store.teams, settings)
        boss = raw(("X-Forwarded-User", "boss"))
        signed = await auth.sign_in(None, "10.0.1.5", boss, via="http")
        assert isinstance(signed, SignedIn) and signed.identity.user == "boss"
        # A balancer names clients, never people; nor does anyone else.
        for peer in ("10.0.0.7", "127.0.0.1"):
            assert await auth.sign_in(None, peer, boss, via="http") == Refusal.UNAUTHORIZED
        # Two sign-on headers (the client's passed through beside the proxy's): nobody.
        two = raw(("X-Forwarded-User", "alice"), ("X-Forwarded-User", "boss"))
        assert await auth.sign_in(None, "10.0.1.5", two, via="http") == Refusal.UNAUTHORIZED
    finally:
        store.close()


async def test_the_scheme_is_taken_from_listed_proxies_and_loopback_only() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["scheme"])

    middleware = ForwardedScheme(app, Addresses(["10.0.0.7"]))
    headers = [(b"x-forwarded-proto", b"https")]
    for kind, peer in (
        ("http", "10.0.0.7"),
        ("websocket", "10.0.0.7"),
        ("http", "127.0.0.1"),
        ("http", "10.9.9.9"),
    ):
        scheme = "ws" if kind == "websocket" else "http"
        scope = {"type": kind, "client": (peer, 1), "headers": headers, "scheme": scheme}
        await middleware(scope, None, None)
        assert scope["client"] == (peer, 1)  # who it is stays the socket's peer
    assert seen == ["https", "wss", "https", "http"]


async def test_a_user_an_older_version_named_against_the_rule_cannot_sign_in(
    tmp_path: Path,
) -> None:
    """`admin` and a newline, made before names were matched whole, shows as the admin: its
    token signs nobody in until the person is added again under a proper name."""
    db = tmp_path / "x.db"
    store = SQLiteStore(db)
    try:
        token, fine = new_token(), new_token()
        with sqlite3.connect(db) as conn:  # as an older version wrote it
            conn.execute(
                "INSERT INTO users (name, role, created_at, token_hash, token_created_at)"
                " VALUES (?, 'admin', 0, ?, 0)",
                ("admin\n", token_hash(token)),
            )
        store.teams.add_user("alice", UserRole.MEMBER, token_hash(fine))
        auth = Authenticator("s" * 32, store.teams, TeamSettings())
        assert await auth.sign_in(token, "10.0.0.9", NO_HEADERS, via="http") == (
            Refusal.UNAUTHORIZED
        )
        signed = await auth.sign_in(fine, "10.0.0.9", NO_HEADERS, via="http")
        assert isinstance(signed, SignedIn) and signed.identity.user == "alice"
    finally:
        store.close()
