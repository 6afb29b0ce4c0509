"""[cli] Tab completion in `xclaw chat`: slash command names, then the ids they take — step ids for
/rollback, /fork and /steps' neighbours, session ids for /switch — from what the client has
seen in frames (the trace's `step` frames, `/steps`, `/sessions`, forks)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

COMMANDS = (
    "/steps",
    "/rollback",
    "/fork",
    "/sessions",
    "/switch",
    "/new",
    "/title",
    "/share",
    "/tools",
    "/ps",
    "/agents",
    "/help",
    "/quit",
)
STEP_COMMANDS = ("/rollback", "/fork")
SESSION_COMMANDS = ("/switch",)


class KnowsIds(Protocol):
    step_ids: set[str]
    session_ids: set[str]


class SlashCompleter(Completer):
    def __init__(self, client: KnowsIds) -> None:
        self.client = client

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        word, space, rest = text.partition(" ")
        if not space:
            yield from _matching(COMMANDS, word, suffix=" ")
        elif " " not in rest:
            if word in STEP_COMMANDS:
                yield from _matching(sorted(self.client.step_ids, reverse=True), rest)
            elif word in SESSION_COMMANDS:
                yield from _matching(sorted(self.client.session_ids), rest)


def _matching(words: Iterable[str], prefix: str, suffix: str = "") -> Iterator[Completion]:
    low = prefix.lower()
    for w in words:
        if w.lower().startswith(low) and w != prefix:
            yield Completion(w + suffix, start_position=-len(prefix), display=w)


__all__ = ["COMMANDS", "SlashCompleter"]
