"""Tokens and Origin checks: who may talk to the gateway."""

from __future__ import annotations

import stat
from pathlib import Path

from xclaw.gateway.auth import (
    load_or_create_token,
    origin_allowed,
    token_from_request,
    token_matches,
)
from xclaw.wire.token import read_token, token_path


def test_generated_token_is_stored_0600_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = load_or_create_token(home)
    assert len(first) >= 24
    mode = stat.S_IMODE(token_path(home).stat().st_mode)
    assert mode == 0o600
    assert load_or_create_token(home) == first
    assert read_token(home) == first


def test_configured_token_wins_and_is_not_written(tmp_path: Path) -> None:
    assert load_or_create_token(tmp_path, "from-env-token") == "from-env-token"
    assert not token_path(tmp_path).exists()


def test_two_homes_get_different_tokens(tmp_path: Path) -> None:
    assert load_or_create_token(tmp_path / "a") != load_or_create_token(tmp_path / "b")


def test_token_sources() -> None:
    assert token_from_request({"authorization": "Bearer abc"}, {}) == "abc"
    assert token_from_request({"authorization": "bearer  abc "}, {}) == "abc"
    assert token_from_request({}, {"token": "q"}) == "q"
    assert token_from_request({"authorization": "Basic xyz"}, {}) is None
    assert token_from_request({}, {}) is None


def test_token_matches() -> None:
    assert token_matches("secret-token", "secret-token")
    assert not token_matches("secret-tokeN", "secret-token")
    assert not token_matches(None, "secret-token")
    assert not token_matches("", "secret-token")


def test_origin_rules() -> None:
    host = "127.0.0.1:3000"
    assert origin_allowed(None, host, ())  # not a browser
    assert origin_allowed("http://127.0.0.1:3000", host, ())  # the gateway's own page
    assert not origin_allowed("http://127.0.0.1:3001", host, ())
    assert not origin_allowed("https://127.0.0.1:3000", host, ())  # other scheme
    assert not origin_allowed("http://evil.example", host, ())
    assert not origin_allowed("null", host, ())
    assert origin_allowed("http://evil.example", host, ("http://evil.example",))
    assert origin_allowed("http://localhost", "localhost:80", ())  # default port
    assert origin_allowed("http://anything", host, ("*",))
    assert origin_allowed("https://gw.example", "gw.example", (), secure=True)
