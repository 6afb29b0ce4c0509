"""Property tests: random sequences of begin/complete/fail/add/rollback/fork against a model.

The model is the obvious list-of-steps per session. After every operation the store must
agree with it; at the end of each example the database must pass its own integrity checks
(SQLite's PRAGMAs, PostgreSQL's amcheck) and the record's invariants in plain SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.store.conftest import BACKEND_PARAMS, BACKENDS, Backend
from tests.writes import finish
from xclaw.errors import IllegalTransition
from xclaw.store.base import Store
from xclaw.store.steps.model import NewStep, Status, StepStatus, StepType
from xclaw.store.steps.writes import AddStep, BeginStep


@dataclass
class ModelStep:
    seq: int
    kind: StepType
    name: str
    status: StepStatus
    parent: int | None
    error: str | None = None


@dataclass
class ModelSession:
    sid: str
    status: Status = Status.INIT
    next_seq: int = 1
    steps: list[ModelStep] = field(default_factory=list)
    issued: list[int] = field(default_factory=list)  # every seq ever handed out

    def running_approvals(self) -> bool:
        return any(s.status is StepStatus.RUNNING and s.name == "approval" for s in self.steps)


KINDS = [
    (StepType.USER_INPUT, "user"),
    (StepType.LLM_CALL, "model"),
    (StepType.TOOL_CALL, "shell"),
    (StepType.SYSTEM_ALERT, "approval"),
]

op = st.one_of(
    st.tuples(st.just("begin"), st.integers(0, 3), st.integers(0, 50)),
    st.tuples(st.just("add"), st.integers(0, 3), st.integers(0, 50)),
    st.tuples(st.just("complete"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("fail"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("rollback"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("fork"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("switch"), st.integers(0, 50), st.booleans()),
)


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Store, Backend]]:
    backend = BACKENDS[request.param](tmp_path_factory.mktemp("props"))
    store = backend.open()
    yield store, backend
    store.close()
    backend.drop()


def _after_new(m: ModelSession, kind: StepType, name: str, moves: bool) -> Status:
    if not moves:
        return m.status
    if kind is StepType.SYSTEM_ALERT and name == "approval":
        return Status.PAUSED
    if m.status is Status.PAUSED and m.running_approvals():
        return Status.PAUSED
    return Status.RUNNING


def _legal(current: Status, target: Status) -> bool:
    from xclaw.store.steps.model import TRANSITIONS

    return target in TRANSITIONS[current]


def check(store: Store, m: ModelSession) -> None:
    got = store.record.steps(m.sid)
    assert [(s.seq, s.step_type, s.name, s.status, s.error_message) for s in got] == [
        (s.seq, s.kind, s.name, s.status, s.error) for s in m.steps
    ]
    seqs = {s.seq for s in got}
    for s in got:
        assert s.step_id == f"{m.sid}:s{s.seq:04d}"
        want = next(x for x in m.steps if x.seq == s.seq).parent
        assert s.parent_display_id == (None if want is None else f"s{want:04d}")
        if s.parent_step_id is not None:  # never outside the session, never dangling
            assert s.parent_step_id.startswith(m.sid + ":")
            parent_seq = int(s.parent_step_id.rpartition(":s")[2])
            assert parent_seq in seqs and parent_seq < s.seq
    assert store.record.get_session(m.sid).status is m.status
    assert len(m.issued) == len(set(m.issued))  # ids never repeat within a session


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=30))
def test_random_histories(shared: tuple[Store, Backend], ops: list[tuple]) -> None:
    store, backend = shared
    sessions = [ModelSession(store.record.create_session().session_id)]
    m = sessions[0]
    for name, a, b in ops:
        if name in ("begin", "add"):
            kind, step_name = KINDS[a]
            running = name == "begin"
            if not running and step_name == "approval":
                step_name = "notice"  # a finished approval is just an alert
            parent = m.steps[b % len(m.steps)].seq if m.steps and b % 3 else None
            moves = running or kind is StepType.USER_INPUT
            target = _after_new(m, kind, step_name, moves)
            new = NewStep(kind, step_name, {"b": b}, None if parent is None else f"s{parent:04d}")
            if moves and not _legal(m.status, target):
                with pytest.raises(IllegalTransition):
                    store.record.write(
                        BeginStep(session_id=m.sid, step=new)
                    ) if running else store.record.write(AddStep(session_id=m.sid, step=new))
            else:
                step = (
                    store.record.write(BeginStep(session_id=m.sid, step=new))
                    if running
                    else store.record.write(AddStep(session_id=m.sid, step=new))
                )
                assert step.seq == m.next_seq
                m.steps.append(
                    ModelStep(
                        step.seq,
                        kind,
                        step_name,
                        StepStatus.RUNNING if running else StepStatus.COMPLETED,
                        parent,
                    )
                )
                m.issued.append(step.seq)
                m.next_seq += 1
                m.status = target
        elif name in ("complete", "fail"):
            live = [s for s in m.steps if s.status is StepStatus.RUNNING]
            if not live:
                continue
            s = live[a % len(live)]
            final = Status.SUCCESS if (b and name == "complete") else (Status.FAILED if b else None)
            others = [x for x in live if x is not s and x.name == "approval"]
            target = final
            if target is None and s.name == "approval" and m.status is Status.PAUSED and not others:
                target = Status.RUNNING
            error = "boom" if name == "fail" else None
            done = finish(m.sid, s.seq, error_message=error, session_status=final)
            if target is not None and not _legal(m.status, target):
                with pytest.raises(IllegalTransition):
                    store.record.write(done)
                continue
            store.record.write(done)
            s.status = StepStatus.COMPLETED if name == "complete" else StepStatus.FAILED
            s.error = None if name == "complete" else "boom"
            if target is not None:
                m.status = target
        elif name == "rollback" and m.steps:
            target = m.steps[a % len(m.steps)].seq
            result = store.record.rollback(m.sid, f"s{target:04d}")
            assert result.deleted == sum(1 for s in m.steps if s.seq >= target)
            m.steps = [s for s in m.steps if s.seq < target]
            m.status = Status.RUNNING
        elif name == "fork" and m.steps:
            target = m.steps[a % len(m.steps)].seq
            source_before = store.record.steps(m.sid)
            new = store.record.fork(m.sid, target)
            assert store.record.steps(m.sid) == source_before  # the source is untouched
            copied = [
                ModelStep(
                    s.seq,
                    s.kind,
                    s.name,
                    StepStatus.FAILED if s.status is StepStatus.RUNNING else s.status,
                    s.parent,
                    "interrupted" if s.status is StepStatus.RUNNING else s.error,
                )
                for s in m.steps
                if s.seq <= target
            ]
            fork = ModelSession(
                new.session_id, Status.INIT, target + 1, copied, [s.seq for s in copied]
            )
            sessions.append(fork)
            if b:
                m = fork
        elif name == "switch":
            m = sessions[a % len(sessions)]
        check(store, m)
    for s in sessions:
        check(store, s)
    backend.check_integrity()
