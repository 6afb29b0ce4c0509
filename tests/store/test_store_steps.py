"""Steps: begin/add/complete/fail, addressing, listings, the tree, interrupted steps."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tests.store.builders import approval, llm, tool, user
from tests.store.conftest import Backend
from tests.writes import finish
from xclaw.errors import SessionNotFound, StepNotFound, StepNotRunning
from xclaw.store.base import Store
from xclaw.store.steps.model import INTERRUPTED, NewStep, Step, StepStatus, StepType
from xclaw.store.steps.rows import STEP_COLS, load_json
from xclaw.store.steps.writes import AddStep, BeginStep


def test_begin_step_returns_the_running_row(store: Store) -> None:
    sid = store.record.create_session(session_id="s1").session_id
    st = store.record.write(BeginStep(session_id=sid, step=tool("cat app.log", call_id="toolu_1")))
    assert (st.step_id, st.seq, st.display_id) == ("s1:s0001", 1, "s0001")
    assert st.status is StepStatus.RUNNING and st.end_time is None
    assert st.input_data == {"command": "cat app.log"} and st.call_id == "toolu_1"
    assert st.start_time > 0 and st.agent == "main"
    assert store.record.get_step(sid, 1) == st


def test_seq_counts_up_per_session(store: Store) -> None:
    a = store.record.create_session().session_id
    b = store.record.create_session().session_id
    assert [store.record.write(AddStep(session_id=a, step=user())).seq for _ in range(3)] == [
        1,
        2,
        3,
    ]
    assert store.record.write(AddStep(session_id=b, step=user())).seq == 1


def test_complete_step(store: Store) -> None:
    sid = store.record.create_session().session_id
    st = store.record.write(BeginStep(session_id=sid, step=llm()))
    done = store.record.write(
        finish(
            sid,
            st.seq,
            output_data={"text": "hi", "tool_calls": []},
            token_usage_prompt=120,
            token_usage_completion=7,
        )
    )
    assert done.status is StepStatus.COMPLETED
    assert done.output_data == {"text": "hi", "tool_calls": []}
    assert (done.token_usage_prompt, done.token_usage_completion) == (120, 7)
    assert done.end_time is not None and done.duration_ms == done.end_time - done.start_time
    assert done.input_data == st.input_data
    assert store.record.get_step(sid, st.seq) == done


def test_fail_step(store: Store) -> None:
    sid = store.record.create_session().session_id
    st = store.record.write(BeginStep(session_id=sid, step=tool()))
    failed = store.record.write(finish(sid, st.step_id, error_message="exit 1", output_data="boom"))
    assert failed.status is StepStatus.FAILED
    assert failed.error_message == "exit 1" and failed.output_data == "boom"
    assert store.record.get_step(sid, "s0001") == failed


def test_finishing_twice_is_a_clear_error(store: Store) -> None:
    sid = store.record.create_session().session_id
    st = store.record.write(BeginStep(session_id=sid, step=tool()))
    store.record.write(finish(sid, st.seq, output_data="ok"))
    with pytest.raises(StepNotRunning, match="already completed"):
        store.record.write(finish(sid, st.seq, output_data="again"))
    with pytest.raises(StepNotRunning):
        store.record.write(finish(sid, st.seq, error_message="late"))
    assert store.record.get_step(sid, st.seq).output_data == "ok"


def test_finishing_an_interrupted_step_says_so(store: Store) -> None:
    sid = store.record.create_session().session_id
    st = store.record.write(BeginStep(session_id=sid, step=tool()))
    store.record.mark_interrupted(sid)
    with pytest.raises(StepNotRunning, match="already interrupted"):
        store.record.write(finish(sid, st.seq, output_data="late result"))


def test_finishing_unknown_steps_and_sessions(store: Store) -> None:
    sid = store.record.create_session().session_id
    with pytest.raises(StepNotFound):
        store.record.write(finish(sid, 7, output_data=None))
    with pytest.raises(SessionNotFound):
        store.record.write(finish("nope", 1, output_data=None))
    with pytest.raises(SessionNotFound):
        store.record.write(BeginStep(session_id="nope", step=llm()))
    with pytest.raises(SessionNotFound):
        store.record.write(AddStep(session_id="nope", step=user()))


def test_add_step_records_finished_steps(store: Store) -> None:
    sid = store.record.create_session().session_id
    u = store.record.write(AddStep(session_id=sid, step=user("帮我分析日志")))
    assert u.status is StepStatus.COMPLETED and u.end_time == u.start_time
    denied = store.record.write(
        AddStep(
            session_id=sid,
            step=tool("rm -rf x"),
            status=StepStatus.FAILED,
            output_data="Not run: denied",
            error_message="denied",
        )
    )
    assert denied.status is StepStatus.FAILED and denied.error_message == "denied"
    assert store.record.steps(sid) == [u, denied]
    with pytest.raises(ValueError, match="BeginStep"):
        store.record.write(AddStep(session_id=sid, step=user(), status=StepStatus.RUNNING))


def test_values_must_be_json(store: Store) -> None:
    sid = store.record.create_session().session_id
    with pytest.raises(ValueError, match="input_data must be JSON"):
        store.record.write(
            BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"x": object()}))
        )
    st = store.record.write(BeginStep(session_id=sid, step=tool()))
    with pytest.raises(ValueError, match="output_data must be JSON"):
        store.record.write(finish(sid, st.seq, output_data={1, 2}))
    assert [s.seq for s in store.record.steps(sid)] == [1]
    with pytest.raises(ValueError, match="needs a name"):
        store.record.write(BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "", None)))
    # plain strings are accepted for the step type
    assert (
        store.record.write(BeginStep(session_id=sid, step=NewStep("llm_call", "m"))).step_type
        is StepType.LLM_CALL
    )  # type: ignore[arg-type]


def test_addressing(store: Store) -> None:
    sid = store.record.create_session(session_id="main-session").session_id
    for _ in range(6):
        store.record.write(AddStep(session_id=sid, step=user()))
    want = store.record.get_step(sid, 5)
    for ref in ("s0005", "S0005", "5", 5, "main-session:s0005", " s0005 ", "s5", "0005"):
        assert store.record.get_step(sid, ref) == want, ref
    other = store.record.create_session(session_id="other").session_id
    store.record.write(AddStep(session_id=other, step=user()))
    for bad in ("s0007", 7, "s0000", 0, -1, "sx", "", "step5", "other:s0001", True):
        with pytest.raises(StepNotFound) as e:
            store.record.get_step(sid, bad)  # type: ignore[arg-type]
        assert e.value.code == "bad_step"
    with pytest.raises(StepNotFound, match="another session"):
        store.record.get_step(sid, "other:s0001")
    with pytest.raises(SessionNotFound):
        store.record.get_step("ghost", 1)


def test_parent_links_stay_inside_the_session(store: Store) -> None:
    a = store.record.create_session(session_id="a").session_id
    b = store.record.create_session(session_id="b").session_id
    root = store.record.write(AddStep(session_id=a, step=user()))
    store.record.write(AddStep(session_id=b, step=user()))
    for ref in ("s0001", 1, root.step_id):
        assert (
            store.record.write(BeginStep(session_id=a, step=llm(parent=ref))).parent_step_id
            == "a:s0001"
        )  # type: ignore[arg-type]
    with pytest.raises(StepNotFound, match="another session"):
        store.record.write(BeginStep(session_id=a, step=llm(parent="b:s0001")))
    with pytest.raises(StepNotFound):
        store.record.write(BeginStep(session_id=a, step=llm(parent="s0099")))
    assert len(store.record.steps(a)) == 4


def test_latest_steps(store: Store) -> None:
    sid = store.record.create_session().session_id
    for i in range(15):
        store.record.write(AddStep(session_id=sid, step=user(f"m{i}")))
    latest = store.record.latest_steps(sid)
    assert [s.seq for s in latest] == list(range(6, 16))  # oldest first
    assert [s.seq for s in store.record.latest_steps(sid, 3)] == [13, 14, 15]
    assert store.record.latest_steps(sid, 0) == []
    empty = store.record.create_session().session_id
    assert store.record.latest_steps(empty) == []
    with pytest.raises(SessionNotFound):
        store.record.latest_steps("nope")


def test_steps_filters(store: Store) -> None:
    sid = store.record.create_session().session_id
    u = store.record.write(AddStep(session_id=sid, step=user()))
    l1 = store.record.write(BeginStep(session_id=sid, step=llm(parent=u.step_id)))
    sub = store.record.write(BeginStep(session_id=sid, step=llm(parent=l1.step_id, agent="s0002")))
    store.record.write(finish(sid, sub.seq, output_data={}))
    t = store.record.write(BeginStep(session_id=sid, step=tool(parent=l1.step_id)))
    store.record.write(finish(sid, t.seq, error_message="x"))
    assert [s.seq for s in store.record.steps(sid)] == [1, 2, 3, 4]
    assert [s.seq for s in store.record.steps(sid, agent="main")] == [1, 2, 4]
    assert [s.seq for s in store.record.steps(sid, agent="s0002")] == [3]
    assert [s.seq for s in store.record.steps(sid, statuses=[StepStatus.COMPLETED])] == [1, 3]
    assert [s.seq for s in store.record.steps(sid, statuses=["running", "failed"])] == [2, 4]  # type: ignore[list-item]
    assert store.record.steps(sid, statuses=[]) == []
    assert [s.seq for s in store.record.steps(sid, after_seq=2)] == [3, 4]
    assert [s.seq for s in store.record.steps(sid, agent="main", after_seq=1)] == [2, 4]
    assert store.record.steps(store.record.create_session().session_id) == []
    with pytest.raises(SessionNotFound):
        store.record.steps("nope")


def test_step_tree(store: Store) -> None:
    sid = store.record.create_session(session_id="t").session_id
    u = store.record.write(AddStep(session_id=sid, step=user()))
    l1 = store.record.write(BeginStep(session_id=sid, step=llm(parent=u.step_id)))
    t1 = store.record.write(BeginStep(session_id=sid, step=tool("a", parent=l1.step_id)))
    spawn = store.record.write(BeginStep(session_id=sid, step=tool("spawn", parent=l1.step_id)))
    sub = store.record.write(
        BeginStep(session_id=sid, step=llm(parent=spawn.step_id, agent=spawn.display_id))
    )
    sub_tool = store.record.write(BeginStep(session_id=sid, step=tool("write", parent=sub.step_id)))
    u2 = store.record.write(AddStep(session_id=sid, step=user("next")))
    tree = store.record.step_tree(sid)
    assert [n.step for n in tree] == [
        store.record.get_step(sid, u.seq),
        store.record.get_step(sid, u2.seq),
    ]
    (llm_node,) = tree[0].children
    assert llm_node.step.seq == l1.seq
    assert [c.step.seq for c in llm_node.children] == [t1.seq, spawn.seq]
    (sub_node,) = llm_node.children[1].children
    assert sub_node.step.agent == "s0004"
    assert [c.step.seq for c in sub_node.children] == [sub_tool.seq]
    assert tree[1].children == ()
    assert store.record.step_tree(store.record.create_session().session_id) == []


def test_deep_tree_does_not_recurse(store: Store) -> None:
    sid = store.record.create_session().session_id
    parent = None
    for _ in range(1200):
        parent = store.record.write(AddStep(session_id=sid, step=user(parent=parent))).step_id
    tree = store.record.step_tree(sid)
    depth, node = 1, tree[0]
    while node.children:
        depth, node = depth + 1, node.children[0]
    assert depth == 1200


def test_mark_interrupted(store: Store) -> None:
    sid = store.record.create_session().session_id
    done = store.record.write(BeginStep(session_id=sid, step=llm()))
    store.record.write(finish(sid, done.seq, output_data={}))
    t = store.record.write(BeginStep(session_id=sid, step=tool("sleep 10")))
    ask = store.record.write(BeginStep(session_id=sid, step=approval()))
    marked = store.record.mark_interrupted(sid)
    assert [s.seq for s in marked] == [t.seq]
    got = store.record.get_step(sid, t.seq)
    assert got.status is StepStatus.FAILED and got.error_message == INTERRUPTED
    assert got.interrupted and got.end_time is not None
    assert store.record.get_step(sid, ask.seq).status is StepStatus.RUNNING  # approval asked again
    assert store.record.mark_interrupted(sid) == []  # idempotent
    marked = store.record.mark_interrupted(sid, keep_approvals=False)
    assert [s.seq for s in marked] == [ask.seq]
    assert len(store.record.steps(sid)) == 3  # never deletes (nothing lost)
    with pytest.raises(SessionNotFound):
        store.record.mark_interrupted("nope")


def test_step_columns_follow_the_step_fields() -> None:
    # rows convert positionally: a new Step field needs a column at the same place
    assert [c.strip() for c in STEP_COLS.split(",")] == [f.name for f in fields(Step)]


def test_json_columns_are_json_the_database_reads(store: Store, backend: Backend) -> None:
    """SQLite: compact UTF-8 text; PostgreSQL: jsonb the database itself can query."""
    sid = store.record.create_session().session_id
    st = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "shell", {"cmd": "统计 ERROR", "n": [1, 2]}),
        )
    )
    store.record.write(finish(sid, st.seq, output_data=None))
    if backend.name == "sqlite":
        row = backend.query(
            "SELECT input_data, output_data, typeof(input_data) FROM traces WHERE step_id=?",
            (st.step_id,),
        )
        assert row == [('{"cmd":"统计 ERROR","n":[1,2]}', None, "text")]
    else:
        row = backend.query(
            "SELECT input_data->>'cmd', jsonb_array_length(input_data->'n'), output_data, "
            "pg_typeof(input_data)::text FROM traces WHERE step_id=?",
            (st.step_id,),
        )
        assert row == [("统计 ERROR", 2, None, "jsonb")]


def test_non_finite_floats_are_stored_as_null(store: Store, backend: Backend) -> None:
    """Python writes NaN / Infinity, which is not JSON: SQLite's json_valid says 0 and
    PostgreSQL refuses the row. A tool's computed infinity must not fail the write."""
    sid = store.record.create_session().session_id
    nan, inf = float("nan"), float("inf")
    st = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, "python", {"x": nan, "ys": [1.5, -inf, (inf,)]}),
        )
    )
    store.record.write(finish(sid, st.seq, output_data={"mean": nan, nan: "key"}))
    got = store.record.get_step(sid, st.seq)
    assert got.input_data == {"x": None, "ys": [1.5, None, [None]]}
    assert got.output_data == {"mean": None, "NaN": "key"}
    if backend.name == "sqlite":
        valid = backend.query(
            "SELECT json_valid(input_data), json_valid(output_data) FROM traces WHERE step_id=?",
            (st.step_id,),
        )
        assert valid == [(1, 1)]


def test_nul_characters_are_stored(store: Store, backend: Backend) -> None:
    """Binary junk in a tool's output must not fail the write (PostgreSQL text cannot hold
    NUL: it becomes U+FFFD there; SQLite keeps it)."""
    sid = store.record.create_session(title="a\x00b").session_id
    st = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.TOOL_CALL, "shell", {"cmd": "cat bin\x00"}))
    )
    done = store.record.write(
        finish(sid, st.seq, error_message="bad\x00", output_data="x\x00y\\u0000")
    )
    kept = "\x00" if backend.name == "sqlite" else "\ufffd"
    got = store.record.get_step(sid, st.seq)
    assert got.input_data == {"cmd": "cat bin" + kept}
    assert got.output_data == "x" + kept + "y\\u0000"  # an escaped backslash stays as it is
    assert got.error_message == "bad" + kept
    assert done.seq == st.seq and store.record.get_session(sid).title == "a" + kept + "b"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a":[1,2]}', {"a": [1, 2]}),
        (' {"a": 1} \n', {"a": 1}),
        ('"x"', "x"),
        ("null", None),
        ("3.5", 3.5),
        (None, None),
    ],
)
def test_json_columns_written_by_other_tools_read_back(text, value) -> None:
    assert load_json(text) == value


@pytest.mark.parametrize("bad", ["", "{", '{"a":1} trailing', "nope"])
def test_broken_json_columns_are_errors_not_guesses(bad: str) -> None:
    with pytest.raises(ValueError):
        load_json(bad)
