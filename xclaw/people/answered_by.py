"""[people] Who or what answered an approval (docs/approval.md, "Who decided").

Recorded as `by` in the approval step's output, beside the original tutorial's `approved` and
`why` (*the seed*, docs/architecture.md glossary), so
the record says whether a person said yes (and through which client), nobody could be asked,
the wait timed out, or a cancel or a new message ended it. Only a call somebody was asked
about has an approval step: what the policy ran or refused without asking is derived from
the session's recorded approval mode and the refused call's error, not stored twice. Shown
by `xclaw steps`/`trace`, the page's trace view and every `step` frame. A plain value: the
agent loop, the runtime, the gateway and the CLI all build one; the store only keeps its JSON.

    {"kind": "person", "client": "web", "via": "websocket"}
    {"kind": "person", "client": "chat", "via": "websocket", "user": "alice"}
    {"kind": "no_terminal"}
    {"kind": "timeout", "detail": "600 s"}

`user` names the person when they signed in as a user of a shared server (docs/teams.md);
without it, the holder of the server's own token answered (a single-person install records
what it always did). A user's message records the same value as its step's `by`. More fields
may come; readers ignore those they do not know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# Who or what answers:
PERSON = "person"  # someone said yes or no, through `client`
NO_TERMINAL = "no_terminal"  # `xclaw run` without a terminal: nobody could be asked
TIMEOUT = "timeout"  # nobody answered within approval.timeout_s
CANCEL = "cancel"  # the run was cancelled while it waited
NEW_INPUT = "new_input"  # a new message arrived instead of an answer
RUN_ENDED = "run_ended"  # the run failed while it waited
REPLAY = "replay"  # `xclaw replay` answered as the replayed record had
KINDS = frozenset({PERSON, NO_TERMINAL, TIMEOUT, CANCEL, NEW_INPUT, RUN_ENDED, REPLAY})

# The clients xclaw ships name themselves: chat (the terminal client), web (the page); the
# gateway names the HTTP API `api`, and `xclaw run` its own prompt `run`. A WebSocket client
# may give any such word as a hint (`"client"` in its approval frame); `via` is the route the
# answer really came by, which the server knows for certain.
CLIENT_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
CLIENT_WORDS = {
    "chat": "xclaw chat",
    "web": "web page",
    "api": "HTTP API",
    "run": "xclaw run prompt",
    "python": "Python API",
}
_MAX_TEXT = 200
_FIELDS = ("client", "via", "detail", "user")


@dataclass(frozen=True, slots=True)
class AnsweredBy:
    kind: str
    client: str | None = None  # person: which client (chat, web, api, run, or a client's hint)
    via: str | None = None  # person: the route the answer came by (websocket, http, terminal)
    detail: str | None = None  # timeout: how long it waited; replay: the source session
    user: str | None = None  # person: the user who signed in (None: the server's token)

    @classmethod
    def person(cls, client: str | None, via: str, user: str | None = None) -> AnsweredBy:
        return cls(PERSON, client=client, via=via, user=user)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for key in _FIELDS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: Any) -> AnsweredBy | None:
        """An answer's `by` as another worker sent it (or the record holds it); None for
        anything that is not one. Unknown kinds and over-long text are refused."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            return None
        fields: dict[str, str | None] = {}
        for key in _FIELDS:
            value = data.get(key)
            fields[key] = value[:_MAX_TEXT] if isinstance(value, str) else None
        return cls(str(data["kind"]), **fields)

    def why(self, approved: bool) -> str:
        """The tutorial's `why`, in words that say who: also the tool result the model reads
        when the call is refused."""
        verdict = "approved" if approved else "denied"
        if self.kind == PERSON:
            return f"{verdict} by {self.user or 'the user'} ({self.client_words()})"
        if self.kind == NO_TERMINAL:
            return "denied: nobody could be asked (stdin is not a terminal)"
        if self.kind == TIMEOUT:
            return f"no answer within {self.detail} (counts as a denial)"
        if self.kind == CANCEL:
            return "cancelled by the user"
        if self.kind == NEW_INPUT:
            return "not answered: a new message came instead"
        if self.kind == RUN_ENDED:
            return "not answered: the run ended while it waited"
        if self.kind == REPLAY:
            return f"{verdict} as in the replayed record"
        return verdict

    def client_words(self) -> str:
        """`web page`, `xclaw chat`, …; a client that gave no name: `a websocket client`."""
        if self.client:
            return CLIENT_WORDS.get(self.client, self.client)
        return f"a {self.via or 'unknown'} client"


@dataclass(frozen=True, slots=True)
class Answer:
    """An approval's answer: what an Approver returns to the agent loop."""

    approved: bool
    by: AnsweredBy
    # What the person said with it: the model is told (a denial's reason, docs/approval.md).
    message: str | None = None
    # The input the person gave instead of the model's, where the policy allows edits.
    input: dict[str, Any] | None = None

    def why(self) -> str:
        """The tutorial's `why`, with what the person said."""
        said = self.by.why(self.approved)
        return f"{said}: {self.message}" if self.message else said


def answer_output(approved: bool, by: AnsweredBy, why: str | None = None) -> dict[str, Any]:
    """The approval step's output: the tutorial's `approved` and `why`, and `by`."""
    return {"approved": approved, "why": why or by.why(approved), "by": by.to_json()}
