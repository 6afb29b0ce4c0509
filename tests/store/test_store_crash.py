"""A real process killed with SIGKILL between "begin step" and "complete step" (write-ahead,
nothing lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.store.conftest import Backend
from xclaw.store.steps.model import INTERRUPTED, NewStep, Status, StepStatus, StepType
from xclaw.store.steps.writes import AddStep

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

CHILD = textwrap.dedent(
    """
    import sys, time
    from xclaw.store import open_store
    from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
    from xclaw.store.steps.writes import AddStep, BeginStep, FinishStep
    store = open_store(sys.argv[1])
    sid = store.record.create_session(session_id="crash", title="kill me").session_id
    u = store.record.write(AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "send the report")))
    l = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "model", {}, u.step_id)))
    # a completion commits without an fsync: it must still survive a process kill
    answer = Completion(status=StepStatus.COMPLETED, output_data={"text": "", "tool_calls": ["c1"]})
    store.record.write(FinishStep(session_id=sid, step=l.seq, done=answer))
    t = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"command": "sleep 10"},
                                      l.step_id, call_id="c1")))
    print(t.step_id, flush=True)   # the side effect would start now
    time.sleep(60)
    """
)

LOOP = textwrap.dedent(
    """
    import sys, threading
    from xclaw.store import open_store
    from xclaw.store.steps.model import Completion, NewStep, StepStatus, StepType
    from xclaw.store.steps.writes import BeginStep, FinishStep
    store = open_store(sys.argv[1])
    out = threading.Lock()
    done = Completion(status=StepStatus.COMPLETED, output_data="y" * 300)
    def work(i):
        sid = store.record.create_session(session_id=f"w{i}").session_id
        k = 0
        while True:
            st = store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"k": k})))
            with out:
                print(f"w{i} {st.seq}", flush=True)
            store.record.write(FinishStep(session_id=sid, step=st.seq, done=done))
            k += 1
    for i in range(4):
        threading.Thread(target=work, args=(i,), daemon=True).start()
    threading.Event().wait()
    """
)


def _kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert child.returncode == -signal.SIGKILL


def test_killed_between_begin_and_complete(backend: Backend) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, backend.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline().strip()  # type: ignore[union-attr]
        assert line == "crash:s0003", child.stderr.read()  # type: ignore[union-attr]
    finally:
        _kill(child)
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]
    with backend.open() as store:  # type: ignore[attr-defined]
        steps = store.record.steps("crash")
        assert [(s.display_id, s.step_type, s.status) for s in steps] == [
            ("s0001", StepType.USER_INPUT, StepStatus.COMPLETED),
            ("s0002", StepType.LLM_CALL, StepStatus.COMPLETED),
            ("s0003", StepType.TOOL_CALL, StepStatus.RUNNING),  # recorded, not executed
        ]
        assert steps[1].output_data == {"text": "", "tool_calls": ["c1"]}
        assert store.record.get_session("crash").status is Status.RUNNING
        marked = store.record.mark_interrupted("crash")
        assert [s.display_id for s in marked] == ["s0003"]
    with backend.open() as store:  # type: ignore[attr-defined]  # and that, too, is durable
        kept = store.record.get_step("crash", "s0003")
        assert kept.status is StepStatus.FAILED and kept.error_message == INTERRUPTED
        assert kept.call_id == "c1" and kept.input_data == {"command": "sleep 10"}
        assert len(store.record.steps("crash")) == 3  # kept, not deleted
        retry = NewStep(StepType.USER_INPUT, "user", "retry")
        assert store.record.write(AddStep(session_id="crash", step=retry)).display_id == "s0004"


def test_killed_in_the_middle_of_busy_writing(backend: Backend) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", LOOP, backend.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: dict[str, int] = {}
    try:
        while sum(seen.values()) < 400:
            line = child.stdout.readline()  # type: ignore[union-attr]
            assert line, child.stderr.read()  # type: ignore[union-attr]
            worker, seq = line.split()
            seen[worker] = int(seq)
    finally:
        _kill(child)
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]
    with backend.open() as store:  # type: ignore[attr-defined]
        for worker, last in seen.items():
            steps = store.record.steps(worker)
            # every begun step the child reported is there, in order, without gaps
            assert [s.seq for s in steps[:last]] == list(range(1, last + 1))
            assert all(s.status is StepStatus.COMPLETED for s in steps[:-1])
            store.record.mark_interrupted(worker)
            assert all(s.status is not StepStatus.RUNNING for s in store.record.steps(worker))
    backend.check_integrity()
