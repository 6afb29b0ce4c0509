"""[wire] The access token's file: the gateway writes it to $XCLAW_HOME/token
(xclaw.gateway.auth) and a local client (`xclaw chat`, `xclaw acp`) reads it from there when
none is given. Apart from the frames' models, so an offline command that only redacts the
token from its output does not load them."""

from __future__ import annotations

from pathlib import Path

TOKEN_FILE = "token"


def token_path(home: Path) -> Path:
    return home / TOKEN_FILE


def read_token(home: Path) -> str | None:
    """The stored token, or None when there is none (or it is unreadable/empty)."""
    try:
        text = token_path(home).read_text().strip()
    except OSError:
        return None
    return text or None
