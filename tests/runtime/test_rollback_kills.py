"""A rollback that undoes outside effects survives being killed half-way (xclaw/runtime/
rollbacks.py): real `xclaw run` and `xclaw rollback` processes, SIGKILLed during the
compensations, on both backends (SQLite; PostgreSQL, with the payments table there too).
After the next start finishes it: every payment's row removed exactly once, completed
compensations never run again, one cut short run again only where declared idempotent
(otherwise a person decides), the record consistent (`xclaw fsck`'s check)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ledger import Ledger, pay
from tests.runtime.test_crash import kill
from tests.store.conftest import BACKEND_PARAMS, BACKENDS, Backend
from tests.waiting import wait_until
from xclaw.ops import fsck
from xclaw.store import Access, open_store

pytestmark = pytest.mark.slow

REFS = ("A", "B", "C")


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = BACKENDS[request.param](tmp_path)
    yield b
    b.drop()


class Scene:
    """A session that recorded three payments (`xclaw run`), and its rollback by command."""

    def __init__(self, tmp: Path, backend: Backend, tool: str = "record_payment") -> None:
        self.tmp = tmp
        self.backend = backend
        pg = getattr(backend, "base_url", None)
        self.ledger = Ledger(tmp, pg)
        self.ledger.install(tmp)
        script = tmp / "script.json"
        turns = [{"tool_calls": [pay(r, tool=tool)]} for r in REFS] + [{"text": "paid"}]
        script.write_text(json.dumps({"turns": turns}))
        self.env = {
            **os.environ,
            **self.ledger.env(),
            "XCLAW_HOME": str(tmp / "home"),
            "XCLAW_MODEL": f"script:{script}",
            "XCLAW_DB": backend.url,
        }
        self.env.pop("XCLAW_CONFIG", None)
        done = self.xclaw("run", "--approval", "yolo", "pay the three")
        assert done.returncode == 0, done.stdout
        assert self.ledger.refs() == list(REFS)
        self.sid = str(self.q("SELECT session_id FROM sessions")[0][0])

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "xclaw", *args],
            cwd=self.tmp,
            env={**self.env, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def xclaw(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        proc = self.start(*args, **env)
        out, _ = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(args, proc.returncode, out, "")

    def q(self, sql: str) -> list[tuple[Any, ...]]:
        return self.backend.query(sql)

    def rollback(self, *extra: str, **env: str) -> subprocess.Popen[str]:
        return self.start("rollback", self.sid, "s0001", "--yes", *extra, **env)

    def compensations(self) -> list[tuple[str, str]]:
        rows = self.q(
            "SELECT status, coalesce(error_message, '') FROM traces WHERE name='compensation' "
            "ORDER BY seq"
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    def check_undone_once(self) -> None:
        """Every row removed, each exactly once; the plan completed; the effects' steps gone,
        the compensations kept; nothing left running; fsck finds nothing."""
        assert self.ledger.refs() == []
        # Counted from the note committed with each delete: a kill just after a delete
        # committed loses its log line (calls()), not the deletion.
        assert self.ledger.undone() == sorted(REFS), self.ledger.calls()
        plans = self.q("SELECT status FROM traces WHERE name='rollback'")
        assert [str(p[0]) for p in plans] == ["completed"]
        assert self.q("SELECT 1 FROM traces WHERE step_type='tool_call'") == []
        completed = [c for c in self.compensations() if c[0] == "completed"]
        assert len(completed) == len(REFS)  # one completed compensation per effect
        assert self.q("SELECT step_id FROM traces WHERE status='running'") == []
        # `xclaw fsck`'s own check (xclaw/ops/fsck.py) on the store opened as the command
        # opens it, here rather than in a process of its own: a start of xclaw for a read.
        store = open_store(self.backend.url, access=Access.READ)
        try:
            report = fsck.check(store)
        finally:
            store.close()
        assert report.ok, report.to_json()
        self.backend.check_record()


def _running_compensation(sc: Scene, done: int) -> bool:
    """The (done+1)-th compensation is running, has deleted its row and logged it (it pauses
    after): the log line is written just after the delete commits, so a kill between the two
    would lose the line, not the deletion."""
    states = sc.compensations()
    return (
        len(states) == done + 1
        and states[-1][0] == "running"
        and len(sc.ledger.refs()) == len(REFS) - done - 1
        and sum(c.startswith("undo") for c in sc.ledger.calls()) == done + 1
    )


@pytest.mark.parametrize("done", [0, 1], ids=["in-the-first", "after-one-completed"])
def test_a_rollback_killed_during_a_compensation_is_finished_by_the_next_command(
    tmp_path: Path, backend: Backend, done: int
) -> None:
    sc = Scene(tmp_path, backend)
    # The compensations run C, B, A: the one to cut short pauses after its delete.
    proc = sc.rollback(UNDO_PAUSE="60", UNDO_PAUSE_REF=REFS[-1 - done])
    wait_until(lambda: _running_compensation(sc, done), "a compensation runs, its row deleted", 60)
    kill(proc)
    assert sc.q("SELECT status FROM traces WHERE name='rollback'") == [("running",)]
    assert sc.q("SELECT 1 FROM traces WHERE step_type='tool_call'") != []  # not rewound yet

    again = sc.xclaw("rollback", sc.sid, "s0001", "--yes")
    assert again.returncode == 0, again.stdout
    assert "[rollback] session reset to before step s0001" in again.stdout
    sc.check_undone_once()
    # The one cut short is kept, marked; it ran again (declared idempotent: the delete is).
    states = sc.compensations()
    assert states.count(("failed", "interrupted")) == 1
    assert len(states) == len(REFS) + 1


def test_the_next_start_of_the_session_finishes_a_rollback_cut_short(
    tmp_path: Path, backend: Backend
) -> None:
    """Not only the command: the runtime finishes it wherever the session starts next
    (`xclaw run --session`, a reconnect, the Python API's resume)."""
    sc = Scene(tmp_path, backend)
    proc = sc.rollback(UNDO_PAUSE="60")
    wait_until(lambda: _running_compensation(sc, 0), "the first compensation runs", 60)
    kill(proc)
    resumed = sc.xclaw("run", "--session", sc.sid)
    assert resumed.returncode == 0, resumed.stdout
    assert "a rollback cut short by a crash is finished" in resumed.stdout
    sc.check_undone_once()


def test_a_compensation_not_declared_idempotent_cut_short_goes_to_a_person(
    tmp_path: Path, backend: Backend
) -> None:
    sc = Scene(tmp_path, backend, tool="record_payment_strict")
    proc = sc.rollback(UNDO_PAUSE="60")
    wait_until(lambda: _running_compensation(sc, 0), "the first compensation runs", 60)
    kill(proc)
    stopped = sc.xclaw("rollback", sc.sid, "s0001", "--yes")
    assert stopped.returncode == 1, stopped.stdout
    assert "was cut short by a crash and may or may not have run" in stopped.stdout
    assert "--retry" in stopped.stdout
    assert sc.ledger.refs() == ["A", "B"]  # C's row went, nothing else was touched
    # A message is refused until the person decides.
    refused = sc.xclaw("run", "--session", sc.sid, "carry on")
    assert refused.returncode != 0 and "stopped half-way" in refused.stdout
    retried = sc.xclaw("rollback", sc.sid, "s0001", "--yes", "--retry")
    assert retried.returncode == 0, retried.stdout
    sc.check_undone_once()  # the second delete of C's row deleted nothing: removed once


def test_a_rollback_killed_at_random_moments_is_finished_and_undoes_each_row_once(
    tmp_path: Path, backend: Backend
) -> None:
    rng = random.Random()
    sc = Scene(tmp_path, backend)
    for _ in range(4):  # killed again and again, 0-1.2 s in, then finished
        proc = sc.rollback(UNDO_PAUSE="0.3")
        time.sleep(rng.uniform(0.0, 1.2))
        if proc.poll() is not None:
            proc.communicate(timeout=10)
            break
        kill(proc)
    final = sc.xclaw("rollback", sc.sid, "s0001", "--yes")
    # Finished now, or (the last kill came after the rewind) nothing left to do but the
    # session's own rollback again: either way the rows are gone exactly once.
    if final.returncode != 0:
        assert "is not a step of this session" in final.stdout, final.stdout
    sc.check_undone_once()
