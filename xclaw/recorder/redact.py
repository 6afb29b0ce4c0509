"""[recorder] Secrets stay out of the record: API keys and configured secret values are replaced
before anything is written to the database, the logs or a client frame — and so is every token xclaw
issues (a user's `xcu_…`, a server's `xcs_…`), known or not, found by its form: the server holds
only a hash of a user's token, yet a message may quote it.

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
import string
import sys
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from xclaw.security.credentials import ISSUED_TOKEN_PREFIXES, ISSUED_TOKEN_RE
from xclaw.store.steps.model import Session, Step

MASK = "[REDACTED]"
# Shorter values would mask ordinary words; a real credential is longer.
MIN_SECRET_LEN = 6
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The shortest text an issued token's form matches (a prefix and 20 characters).
_TOKEN_SHORTEST = min(map(len, ISSUED_TOKEN_PREFIXES)) + 20
# The characters a token is made of after its prefix (base64url), and the prefixes' beginnings
# a stream's end may hold (`x`, `xc`, `xcu`: longest first, so the earliest start is found).
_TOKEN_CHARS = string.ascii_letters + string.digits + "_-"
_PREFIX_STARTS = sorted(
    {p[:i] for p in ISSUED_TOKEN_PREFIXES for i in range(1, len(p))}, key=len, reverse=True
)


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


_EMPTY = _Compiled((), None, sys.maxsize, None)  # no secret: no text is long enough


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
        return _issued_tokens(self._values(value))

    def _values(self, value: str) -> str:
        """`value` with the known secrets masked (and lone surrogates replaced)."""
        c = self._c
        if len(value) < c.shortest and len(value) < _TOKEN_SHORTEST and value.isascii():
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


def _issued_tokens(text: str) -> str:
    """`text` with every issued token's form masked."""
    if ISSUED_TOKEN_RE.search(text) is None:  # the common case (sre finds the `xc` fast)
        return text
    return ISSUED_TOKEN_RE.sub(MASK, text)


class StreamRedactor:
    """Redacts a stream of deltas so that their concatenation is exactly `Redactor.text` of
    the whole: a delta goes out up to where a secret could still begin — a tail that is a
    proper prefix of some secret (rarely more than a character or two) is held back until
    the next delta decides it, or `flush` at the end of the stream. Then the same for the
    issued tokens' form (`_TokenStream`), on what the first stage let out."""

    __slots__ = ("_held", "_redactor", "_tokens")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""
        self._tokens = _TokenStream()

    def feed(self, text: str) -> str:
        """The part of the stream so far that is safe to send (maybe "")."""
        return self._tokens.feed(self._values(text))

    def flush(self) -> str:
        """The end of the stream: what was held back, redacted."""
        held, self._held = self._held, ""
        rest = self._redactor._values(held) if held else ""
        return self._tokens.feed(rest) + self._tokens.flush()

    def _values(self, text: str) -> str:
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


class _TokenStream:
    """The issued tokens' form in a stream. A token runs for as long as its characters do, so
    its end is known only when another character (or the end of the stream) comes: a tail
    that may still begin one is held (a prefix's beginning, or a prefix and fewer than 20
    characters: at most 23); once the form is met, the mask goes out at once and the rest of
    the token's characters are swallowed as they come."""

    __slots__ = ("_inside", "_pending")

    def __init__(self) -> None:
        self._pending = ""
        self._inside = False  # within a token already masked

    def feed(self, text: str) -> str:
        if self._inside:
            run = len(text) - len(text.lstrip(_TOKEN_CHARS))
            if run == len(text):
                return ""
            self._inside, text = False, text[run:]
        buf = self._pending + text if self._pending else text
        self._pending = ""
        if buf[-1:] != "x" and "xc" not in buf:  # no prefix can begin here: the common case
            return buf
        tail = _token_tail(buf)
        out = _issued_tokens(buf[:tail])
        rest = buf[tail:]
        if rest and ISSUED_TOKEN_RE.fullmatch(rest):
            self._inside = True
            return out + MASK
        self._pending = rest
        return out

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        self._inside = False
        return pending  # less than the form: no token


def _token_tail(buf: str) -> int:
    """Where the tail of `buf` that may still be or become an issued token begins (len(buf)
    when none): the earliest prefix within the last run of token characters, else the
    beginning of a prefix at the very end."""
    run = len(buf.rstrip(_TOKEN_CHARS))
    starts = [i for i in (buf.find(p, run) for p in ISSUED_TOKEN_PREFIXES) if i >= 0]
    if starts:
        return min(starts)
    for start in _PREFIX_STARTS:
        if buf.endswith(start):
            return len(buf) - len(start)
    return len(buf)
