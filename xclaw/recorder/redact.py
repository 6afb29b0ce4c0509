"""Secrets stay out of the record: API keys and configured secret values are replaced before
anything is written to the database, the logs or a client frame.

Everything written or sent passes through here, so it is also where text that cannot be
stored is made valid: a lone surrogate (a hostile model or tool can produce `\\ud800`, legal in
JSON, not encodable as UTF-8) becomes U+FFFD, so the store and the clients see the same text
instead of the write failing after the client was told.

A secret is also masked as JSON and `repr()` write it inside a string (`"` and `\\` escaped):
text that quotes JSON (a tool printing a config file, a log line with `%r`) holds it in that
form.

Streamed text is redacted as a stream (`stream()`): a secret split across two deltas would
otherwise reach a client whole once it joins them (docs/security.md).

Secrets can be added after construction (`add`): an MCP server's env values, say, are known
only when its configuration is read. Adding is thread-safe (one compiled snapshot swapped).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets as _random
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from xclaw.store.model import Session, Step

MASK = "[REDACTED]"
# Shorter values would mask ordinary words; a real credential is longer.
MIN_SECRET_LEN = 6
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def written_forms(secret: str) -> set[str]:
    """The secret, and the forms JSON (both ways) and repr() give it inside a string."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
    }


class _Prefixes:
    """An Aho-Corasick automaton over the secrets, asked two things of a text: where, at its
    end, begins the longest tail that is a *proper* prefix of a secret (text that a later
    delta may complete into one), and whether it holds a whole secret at all. Cost: one dict
    lookup per character inside a partial match; between them a C regex jumps to the next
    place a secret can start — so it hardly grows with the number of secrets, where a regex
    of all of them tries each at every position."""

    __slots__ = ("_ends", "_fail", "_goto", "_open", "_pairs", "longest")

    def __init__(self, words: Iterable[str]) -> None:
        goto: list[dict[str, int]] = [{}]
        depth = [0]
        terminal = {0: False}
        for w in words:
            s = 0
            for ch in w:
                nxt = goto[s].get(ch)
                if nxt is None:
                    nxt = len(goto)
                    goto.append({})
                    depth.append(depth[s] + 1)
                    goto[s][ch] = nxt
                s = nxt
            terminal[s] = True
        fail = [0] * len(goto)
        # Per state: a whole secret ends here (itself, or a shorter one on its failure chain).
        ends = [terminal.get(s, False) for s in range(len(goto))]
        # Per state, the depth of the deepest state on its failure chain (itself included)
        # that has children: the longest tail of the text that a secret may still continue.
        open_depth = [0] * len(goto)
        queue = deque(goto[0].values())
        for s in queue:
            open_depth[s] = depth[s] if goto[s] else 0
        while queue:
            s = queue.popleft()
            for ch, t in goto[s].items():
                f = fail[s]
                while f and ch not in goto[f]:
                    f = fail[f]
                fail[t] = goto[f].get(ch, 0)
                open_depth[t] = depth[t] if goto[t] else open_depth[fail[t]]
                ends[t] = ends[t] or ends[fail[t]]
                queue.append(t)
        self._goto = goto
        self._fail = fail
        self._open = open_depth
        self._ends = ends
        self.longest = max(depth)
        # Where the automaton need look at all: two characters that begin a secret (ordinary
        # text rarely has any, so most deltas cost this one search), or the very last
        # character, when it begins one.
        pairs = [
            re.escape(c) + "[" + re.escape("".join(sorted(goto[t]))) + "]"
            for c, t in sorted(goto[0].items())
            if goto[t]
        ]
        self._pairs = re.compile("|".join(pairs)) if pairs else None

    def scan(self, text: str, start: int) -> tuple[int, bool]:
        """(the earliest i >= start such that text[i:] is a proper prefix of a secret, or
        len(text); whether text[start:] holds a whole secret)."""
        n = len(text)
        pairs = self._pairs
        if pairs is None:
            return n, False
        goto, fail, root, ends = self._goto, self._fail, self._goto[0], self._ends
        whole = False
        i, s = start, 0
        while i < n:
            if not s:
                m = pairs.search(text, i)
                if m is None:
                    # No secret's first two characters from i on: only the last character
                    # alone may begin one.
                    s = root.get(text[n - 1], 0)
                    break
                i = m.start()
                s = root[text[i]]
                i += 1
                continue
            ch = text[i]
            nxt = goto[s].get(ch)
            while nxt is None and s:
                s = fail[s]
                nxt = goto[s].get(ch)
            s = nxt or 0
            whole = whole or ends[s]
            i += 1
        return n - self._open[s], whole


@dataclass(frozen=True, slots=True)
class _Compiled:
    """Everything derived from one set of secrets, swapped whole when secrets are added."""

    values: tuple[str, ...]  # longest first, written forms included
    pattern: re.Pattern[str] | None
    shortest: int
    prefixes: _Prefixes | None

    def present(self, text: str) -> bool:
        # Beyond a couple of values, one C substring search per value: on ordinary text
        # 2-8x faster than the regex of them all, which tries every value at every position
        # (bench/README.md, Redaction); with one or two, the regex's own literal search is.
        if self.pattern is None or len(text) < self.shortest:
            return False
        if len(self.values) <= 2:
            return self.pattern.search(text) is not None
        return any(map(text.__contains__, self.values))


_EMPTY = _Compiled((), None, 0, None)


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._c = _EMPTY
        # Keys the stand-ins of ids that held a secret (`ident`): unguessable, so an id's
        # stand-in says nothing about the secret, however short.
        self._key = _random.token_bytes(16)
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Scrub these values too from now on (values shorter than 6 characters are ignored)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}
        with self._lock:
            if new <= self._secrets:
                return
            self._secrets = self._secrets | new
            forms = {f for s in self._secrets for f in written_forms(s)}
            # Longest first, so that a secret containing another is masked whole.
            ordered = tuple(sorted(forms, key=len, reverse=True))
            self._c = _Compiled(
                values=ordered,
                pattern=re.compile("|".join(re.escape(v) for v in ordered)),
                shortest=len(ordered[-1]),
                prefixes=_Prefixes(ordered),
            )

    def __contains__(self, value: str) -> bool:
        return value in self._secrets

    def text(self, value: str) -> str:
        c = self._c
        if len(value) < c.shortest and value.isascii():
            return value  # too short to hold a secret, and no surrogate to replace
        if not value:
            return value
        if not value.isascii():
            value = _LONE_SURROGATE.sub("\ufffd", value)
        if not c.present(value):
            return value  # the common case: the regex (slow for many secrets) only on a hit
        assert c.pattern is not None
        return c.pattern.sub(MASK, value)

    def ident(self, value: str) -> str:
        """An id (a tool call's) without a secret: as it is when it holds none, else a stand-in
        `redacted_<16 hex>` that differs for different ids (calls stay paired with their
        results) and is portable (letters, digits, `_`)."""
        if self.text(value) == value:
            return value
        digest = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return f"redacted_{digest.hexdigest()[:16]}"

    def session(self, s: Session) -> Session:
        """A session read back from the record, as it may be shown: its title and metadata
        redacted (a database written before a secret was known, or by an older version)."""
        return replace(s, title=self.text(s.title), metadata=self(s.metadata))

    def step(self, st: Step) -> Step:
        """A step read back from the record, as it may be shown: every field a model, a tool
        or a user filled redacted."""
        return replace(
            st,
            name=self.text(st.name),
            agent=self.text(st.agent),
            call_id=None if st.call_id is None else self.text(st.call_id),
            input_data=self(st.input_data),
            output_data=self(st.output_data),
            error_message=None if st.error_message is None else self.text(st.error_message),
        )

    def stream(self) -> StreamRedactor:
        """A redactor for one stream of deltas (one model reply)."""
        return StreamRedactor(self)

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


class StreamRedactor:
    """Redacts a stream of deltas so that their concatenation is exactly `Redactor.text` of
    the whole: a delta goes out up to where a secret could still begin — a tail that is a
    proper prefix of some secret (rarely more than a character or two) is held back until
    the next delta decides it, or `flush` at the end of the stream."""

    __slots__ = ("_held", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, text: str) -> str:
        """The part of the stream so far that is safe to send (maybe "")."""
        c = self._redactor._c
        if not text.isascii():
            text = _LONE_SURROGATE.sub("\ufffd", text)
        prefixes, pattern = c.prefixes, c.pattern
        if prefixes is None or pattern is None:
            held, self._held = self._held, ""
            return held + text
        buf = self._held + text if self._held else text
        hold, whole = prefixes.scan(buf, 0)
        if not whole:
            pos, out = 0, ""  # no whole secret anywhere: only the hold to decide
        else:
            parts: list[str] = []
            pos = 0
            while True:
                m = pattern.search(buf, pos)
                if m is None or m.start() >= hold:
                    break
                parts += (buf[pos : m.start()], MASK)
                pos = m.end()
                if pos > hold:  # the secret covered the held tail: look again after it
                    hold = prefixes.scan(buf, pos)[0]
            out = "".join(parts)
        self._held = buf[hold:]
        return out + buf[pos:hold]

    def flush(self) -> str:
        """The end of the stream: what was held back, redacted."""
        held, self._held = self._held, ""
        return self._redactor.text(held) if held else ""
