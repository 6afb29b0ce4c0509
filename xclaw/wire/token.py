"""[wire] The access token's file: the gateway writes it to $XCLAW_HOME/token
(xclaw.gateway.auth) and a local client (`xclaw chat`, `xclaw acp`) reads it from there when
none is given. A file on disk, no part of the frames' contract: apart from their models
(wire/protocol.py re-exports these names, where they were first defined)."""

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
