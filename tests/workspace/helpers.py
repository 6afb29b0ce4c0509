"""Shared helpers for the workspace tests: a session whose steps change real files, and a
readable picture of a directory tree."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.store.builders import llm, tool
from tests.writes import finish
from xclaw.store.base import Store
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace import snapshots as snapmod
from xclaw.workspace.timetravel import Workspaces


def tree(root: Path) -> dict[str, Any]:
    """{relative path: file text | 'dir' | '-> target'}; file modes other than 0644 appear
    as (text, mode)."""
    out: dict[str, Any] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "-> " + os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            else:
                text = p.read_bytes().decode("utf-8", "replace")
                mode = stat.S_IMODE(st.st_mode)
                out[rel] = text if mode == 0o644 else (text, oct(mode))
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
    return out


def settle() -> None:
    """Past the racy window of the stat cache (files just written are re-read anyway)."""
    time.sleep(snapmod._RACY_NS / 1e9 + 0.01)


class Driver:
    """Plays a session by hand: each `step` records a tool call, snapshots the workspace
    before it (as the recorder does), then applies the change the tool would make."""

    def __init__(self, store: Store, workspaces: Workspaces, session_id: str | None = None):
        self.store = store
        self.workspaces = workspaces
        self.sid = session_id or store.record.create_session(title="driven").session_id
        self.ws = workspaces.path(self.sid)
        self.ws.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.ws, 0o700)

    def step(self, change: Callable[[Path], Any]) -> int:
        step = self.store.record.write(BeginStep(session_id=self.sid, step=tool()))
        self.workspaces.snapshot(self.sid, step)
        change(self.ws)
        self.store.record.write(finish(self.sid, step.seq, output_data="ok"))
        return step.seq

    def think(self) -> int:
        """A step that changes nothing (no snapshot), like an LLM call."""
        step = self.store.record.write(BeginStep(session_id=self.sid, step=llm()))
        self.store.record.write(finish(self.sid, step.seq, output_data={"text": ""}))
        return step.seq


def write(rel: str, text: str, mode: int | None = None) -> Callable[[Path], None]:
    def change(ws: Path) -> None:
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if mode is not None:
            os.chmod(p, mode)

    return change


def remove(rel: str) -> Callable[[Path], None]:
    return lambda ws: (ws / rel).unlink()
