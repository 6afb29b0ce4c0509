"""[gateway] Who may talk to the gateway: the access token and the browser Origin check.

The token is what keeps other local users and web pages from driving an agent that can run
shell commands; the Origin check keeps a foreign web page from even trying with a stolen
token in a victim's browser (the gateway's own page, and configured origins, pass).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from xclaw.security.credentials import SERVER_TOKEN_PREFIX, issue_token
from xclaw.security.private_files import private_dir, private_file
from xclaw.wire.token import read_token, token_path


def load_or_create_token(home: Path, configured: str | None = None) -> str:
    """XCLAW_TOKEN when set; else the token stored in $XCLAW_HOME/token; else a new one
    (`xcs_` and 256 random bits: a form the redactor and the throttle know, xclaw/security/credentials.py)
    written there with mode 0600 so the next start (and `xclaw chat`) reuses it."""
    if configured:
        return configured
    path = token_path(home)
    existing = read_token(home)
    if existing:
        private_file(path)  # a token file left readable by an older version
        return existing
    private_dir(home)
    token = issue_token(SERVER_TOKEN_PREFIX)
    # O_EXCL: two servers starting at once must not overwrite each other's token.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        again = read_token(home)
        if again:
            return again
        raise
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so the token cannot be guessed byte by byte."""
    if not given:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def token_from_request(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer TOKEN` or `?token=TOKEN` (docs/protocol.md, Access)."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    token = query.get("token")
    return token or None


def _origin_key(url: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    default = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(scheme)
    return scheme.replace("ws", "http", 1), parts.hostname.lower(), port or default


def origin_allowed(
    origin: str | None, host: str | None, allowed: tuple[str, ...], *, secure: bool = False
) -> bool:
    """No Origin header (not a browser: CLI, scripts) passes; a browser page must come from
    the gateway itself (same scheme, host and port as the Host it connected to) or from an
    origin listed in settings.allowed_origins ("*" allows any)."""
    if origin is None:
        return True
    if "*" in allowed:
        return True
    key = _origin_key(origin)
    if key is None:  # "null" (sandboxed iframes, file://) and garbage
        return False
    if host:
        own = _origin_key(("https://" if secure else "http://") + host)
        if own is not None and own == key:
            return True
    return any(_origin_key(a) == key for a in allowed)
