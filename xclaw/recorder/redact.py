"""Secrets stay out of the record: API keys and configured secret values are replaced before
anything is written to the database, the logs or a client frame.

Everything written or sent passes through here, so it is also where text that cannot be
stored is made valid: a lone surrogate (a hostile model or tool can produce `\\ud800`, legal in
JSON, not encodable as UTF-8) becomes U+FFFD, so the store and the clients see the same text
instead of the write failing after the client was told.

Secrets can be added after construction (`add`): an MCP server's env values, say, are known
only when its configuration is read. Adding is thread-safe (one compiled pattern swapped).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"
# Shorter values would mask ordinary words; a real credential is longer.
MIN_SECRET_LEN = 6
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        # The shortest secret's length: a shorter ASCII string (most keys and many values of
        # a step's data) cannot hold one and skips the regex (every record and frame is
        # redacted: ~10 strings per step).
        self._shortest = 0
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Scrub these values too from now on (values shorter than 6 characters are ignored)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}
        with self._lock:
            if new <= self._values:
                return
            self._values = self._values | new
            # Longest first, so that a secret containing another is masked whole.
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
            self._shortest = len(ordered[-1])

    def __contains__(self, value: str) -> bool:
        return value in self._values

    def text(self, value: str) -> str:
        if len(value) < self._shortest and value.isascii():
            return value  # too short to hold a secret, and no surrogate to replace
        if not value:
            return value
        if not value.isascii():
            value = _LONE_SURROGATE.sub("\ufffd", value)
        pattern = self._pattern
        if pattern is None:
            return value
        return pattern.sub(MASK, value)

    def __call__(self, value: Any) -> Any:
        """Redact strings anywhere inside JSON-like data (keys too); other values pass."""
        kind = type(value)  # exact types first: every record and frame comes through here
        if kind is str or isinstance(value, str):
            return self.text(value)
        if kind is dict or isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): (
                    self.text(v) if type(v) is str else v if v is None else self(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value
