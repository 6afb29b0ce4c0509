"""Every server frame is made by one builder (xclaw/wire/build.py), and each builder's frame
is its declaration (xclaw/wire/frames.py) exactly: its keys typed by the TypedDicts of
xclaw/wire/shapes.py, which mirror the declared classes key for key."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import Session, Status, Step, StepStatus, StepType
from xclaw.wire import build, shapes
from xclaw.wire.frames import BY_TYPE, undeclared, wire_fields

ROOT = Path(__file__).resolve().parents[2] / "xclaw"
BUILDERS = ROOT / "wire" / "build.py"
DECLARATION = ROOT / "wire" / "frames.py"
SHIM = ROOT / "frames.py"  # the public path: re-exports only


def _frame_literals(path: Path) -> list[str]:
    """`file:line type` of each dict literal in `path` that is a server frame (a "type" key
    naming a server frame type), however deeply nested."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value == "type"
                and isinstance(value, ast.Constant)
                and value.value in BY_TYPE
            ):
                found.append(f"{path.name}:{node.lineno} {value.value}")
    return found


def test_no_server_frame_is_built_outside_the_builders() -> None:
    found = [
        hit
        for path in sorted(ROOT.rglob("*.py"))
        if path not in (BUILDERS, DECLARATION, SHIM)
        for hit in _frame_literals(path)
    ]
    assert found == [], "build these frames with xclaw/wire/build.py: " + ", ".join(found)


def test_the_scan_finds_a_frame_built_by_hand(tmp_path: Path) -> None:
    """The check above can fail: a hand-built frame is found wherever it is nested."""
    hand = tmp_path / "hand.py"
    hand.write_text(
        'def f(x):\n    return g({"a": 1, "nested": {"type": "reply", "content": x}})\n'
    )
    assert [h.split()[-1] for h in _frame_literals(hand)] == ["reply"]


SHAPES = {
    hints["type"].__args__[0]: shape
    for shape in shapes.FrameJson.__args__  # type: ignore[attr-defined]
    if (hints := get_type_hints(shape, include_extras=False))
}


def test_every_declared_frame_has_a_shape_with_exactly_its_keys() -> None:
    assert set(SHAPES) == set(BY_TYPE)
    for kind, shape in SHAPES.items():
        keys = set(shape.__required_keys__) | set(shape.__optional_keys__)
        assert keys == set(wire_fields(BY_TYPE[kind])), kind


def test_step_shape_has_exactly_the_declared_steps_keys() -> None:
    from xclaw.wire.frames import Step as DeclaredStep

    shape = shapes.StepJson
    keys = set(shape.__required_keys__) | set(shape.__optional_keys__)
    assert keys == set(wire_fields(DeclaredStep))


PRICES = PriceTable.with_overrides(None)
SESSION = Session(session_id="s-1", title="t", status=Status.RUNNING, created_at=1, updated_at=2)
STEP = Step(
    step_id="s-1:s0001",
    session_id="s-1",
    seq=1,
    parent_step_id=None,
    step_type=StepType.TOOL_CALL,
    name="shell",
    status=StepStatus.COMPLETED,
    input_data={"command": "ls"},
    output_data="a\nb",
    start_time=1,
    end_time=3,
)

FRAMES: list[Any] = [
    build.session_frame(SESSION, created=False, busy=True, user="carol"),
    build.session_frame(SESSION, created=True),
    build.history_frame("[]", [], "s-1"),
    build.status_frame(Status.PAUSED),
    build.state_frame(SESSION, busy=False),
    build.renamed_frame("new title"),
    build.delta_frame("he"),
    build.reply_frame("done"),
    build.thinking_frame([{"type": "thinking", "thinking": "hmm"}, {"type": "redacted_thinking"}]),
    build.thinking_discarded_frame(),
    build.tool_frame("s0002", "shell", {"command": "ls"}, "running"),
    build.tool_frame("s0002", "shell", {}, "completed", output="x", agent="s0001"),
    build.approval_request_frame("s0003", "shell", {}, "asks", maybe_repeated=True),
    build.approval_request_frame("s0003", "shell", {}, "asks", maybe_repeated=False, agent="s0002"),
    build.step_frame(STEP, PRICES),
    build.notice_frame("[x] y", "s-1"),
    build.notice_frame("[x] y"),
    build.steps_frame("s-1", [STEP], PRICES),
    build.forked_frame("s-2", "s-1", "s0001", "t"),
    build.rolledback_frame("s0001", 3, "s-1"),
    build.rolledback_frame(
        "s0001",
        3,
        "s-1",
        compensated=[{"stepId": "s0009", "effect": "s0004", "tool": "pay", "action": "refund"}],
        not_undone=[{"stepId": "s0005", "tool": "mail", "callId": "c5", "agent": "main"}],
    ),
    build.rollback_preview_frame(
        {
            "sessionId": "s-1",
            "stepId": "s0003",
            "compensable": [],
            "irreversible": [{"stepId": "s0005", "tool": "mail", "callId": "c5", "agent": "main"}],
            "undoneAlready": [],
            "pending": {"planStepId": "s0010", "stepId": "s0003"},
        }
    ),
    build.error_frame("bad", "bad_frame", "s-1"),
    build.error_frame("busy", "busy", "s-1", message_id="m-1"),
    build.ack_frame("s-1", "m-1", "s0004", False),
    build.queue_frame([{"id": "m-2", "busy": "queue", "content": "next", "at": 5, "user": "ann"}]),
    build.queued_frame("s-1", "m-2", "queue", False),
    build.pong_frame(),
]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: str(f["type"]))
def test_each_builder_makes_its_declared_frame(frame: dict[str, Any]) -> None:
    sent = (
        frame
        if frame["type"] in ("pong", "error", "forked", "ack")
        else build.for_session(frame, "s-1")
    )
    assert undeclared(sent) == []


def test_every_builder_is_exercised() -> None:
    made = {f["type"] for f in FRAMES}
    assert made == set(BY_TYPE)
