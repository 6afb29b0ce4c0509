"""[store/snapshots] The latest snapshot this process saved for each session, so that saving the
next one need not rebuild it from its rows. A snapshot is saved as a delta against the session's
previous one, and that one's whole state is rebuilt from its rows (the last whole manifest — on a
10,000-file tree a megabyte of JSON — and every delta after it) before each save: the main cost of a
snapshot when little changed.

A state remembered here is used only while the row it came from is provably still there as
it was written: same seq, same base, same time, same delta. Snapshots before a session's
latest are never rewritten (a rollback deletes, a save only replaces the latest; seqs are
never reused), so such a row holds the same state. A row stored whole is not compared (its
text is what rebuilding costs): the save after it rebuilds, one in FULL_EVERY.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from xclaw.store.snapshots.model import Manifest
from xclaw.store.steps.rows import load_json

# The previous snapshot of a session, with what it takes to recognise the row.
PREVIOUS_SQL = (
    "SELECT seq, depth, base_seq, created_at, "
    "CASE WHEN base_seq IS NULL THEN NULL ELSE manifest END, removed "
    "FROM snapshots WHERE session_id=? AND seq<? ORDER BY seq DESC LIMIT 1"
)
KEPT_SESSIONS = 64


@dataclass(frozen=True, slots=True)
class Saved:
    seq: int
    base_seq: int | None  # None: stored whole (never matched: see the module docstring)
    created_at: int
    changed: Manifest
    removed: list[str]
    state: Manifest  # the whole state the row holds


class SavedStates:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._saved: OrderedDict[str, Saved] = OrderedDict()

    def state_of(self, session_id: str, previous: tuple[Any, ...] | None) -> Manifest | None:
        """The whole state of `previous` (a row of PREVIOUS_SQL), if this process saved that
        very row; None: rebuild it."""
        with self._lock:
            saved = self._saved.get(session_id)
        if previous is None or saved is None or saved.base_seq is None:
            return None
        seq, _, base_seq, created_at, changed, removed = previous
        if (seq, base_seq, created_at) != (saved.seq, saved.base_seq, saved.created_at):
            return None
        if load_json(changed) != saved.changed or (load_json(removed) or []) != saved.removed:
            return None
        return saved.state

    def remember(self, session_id: str, saved: Saved) -> None:
        with self._lock:
            self._saved.pop(session_id, None)
            self._saved[session_id] = saved
            while len(self._saved) > KEPT_SESSIONS:
                self._saved.popitem(last=False)
