"""The typed frames (xclaw/wire/frames.py) against what documents and publishes them: docs/protocol.md
names every frame type and every field the classes declare (and nothing they do not), and
docs/frames.schema.json is exactly what `xclaw schema frames` generates from them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from xclaw.wire.frames import (
    BY_TYPE,
    AssistantMessage,
    Frame,
    ImageRef,
    ReplyFrame,
    Step,
    StepFrame,
    SummaryMessage,
    ToolFrame,
    ToolResultMessage,
    UserMessage,
    decode_frame,
    undeclared,
    wire_fields,
)
from xclaw.wire.protocol import (
    ApprovalFrame,
    CancelFrame,
    MessageFrame,
    PingFrame,
    ReconnectFrame,
    frames_schema,
)

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()
SCHEMA_FILE = ROOT / "docs" / "frames.schema.json"


def _section(title: str) -> str:
    start = PROTOCOL.index(f"\n## {title}\n")
    end = PROTOCOL.find("\n## ", start + 1)
    return PROTOCOL[start : end if end != -1 else None]


def documented_frames(title: str) -> dict[str, set[str]]:
    """frame type -> the JSON keys its rows of the section's table write (`"key"` followed
    by `:`, `,`, `}` or `?`; a value after `:` or an alternative after `|` is no key)."""
    out: dict[str, set[str]] = {}
    for line in _section(title).splitlines():
        if not line.startswith("| `{"):
            continue
        cell = line.split("`")[1]
        kind = re.search(r'"type":"([a-z_]+)"', cell)
        assert kind, line
        keys = {m.group(1) for m in re.finditer(r'(?<![:|])"([A-Za-z_]+)"(?=\s*[:,}?])', cell)}
        out.setdefault(kind.group(1), set()).update(keys)
    return out


def test_every_server_frame_type_is_documented_and_nothing_else() -> None:
    documented = documented_frames("Server → client")
    assert set(documented) == set(BY_TYPE)


@pytest.mark.parametrize("kind", sorted(BY_TYPE))
def test_every_field_of_a_server_frame_is_documented(kind: str) -> None:
    """Both ways: a declared field the page does not name, or a named one not declared."""
    declared = set(wire_fields(BY_TYPE[kind]))
    # `sessionId`: the section says once that a frame belonging to a session carries it.
    written = documented_frames("Server → client")[kind] | {"type"}
    if kind not in ("pong",):
        written.add("sessionId")
    assert declared == written


def test_client_frames_are_documented() -> None:
    documented = documented_frames("Client → server")
    classes = {
        "reconnect": ReconnectFrame,
        "message": MessageFrame,
        "approval": ApprovalFrame,
        "cancel": CancelFrame,
        "ping": PingFrame,
    }
    assert set(documented) == set(classes)
    for kind, cls in classes.items():
        # `v` and `token` are documented for every frame (the version, Access).
        declared = set(wire_fields(cls)) - {"v", "token"}
        assert declared == documented[kind] | {"type"}, kind
    assert '"v": 1' in PROTOCOL and '`"token"` field in the **first frame**' in PROTOCOL


def test_the_step_object_is_documented() -> None:
    section = _section("Server → client")
    example = section[section.index("### A step object") :]
    example = example[
        example.index("```json") + 7 : example.index("```", example.index("```json") + 7)
    ]
    shown = set(json.loads(example))
    # usage and cost: described below the example, for llm_call steps only.
    assert set(wire_fields(Step)) == shown | {"usage", "cost"}
    assert '"usage": {"input", "output", "cache_read", "cache_write",' in section
    assert '`"cost"`' in section


def test_the_history_messages_are_documented() -> None:
    """Each message's keys, in the section (an assistant's `thinking`: the thinking row)."""
    section = _section("Server → client")
    for cls in (UserMessage, SummaryMessage, AssistantMessage, ToolResultMessage, ImageRef):
        for key in wire_fields(cls):
            assert f'"{key}"' in section, (cls.__name__, key)


def test_the_published_schema_is_generated() -> None:
    """docs/frames.schema.json is what the classes generate: regenerate it with
    `xclaw schema frames > docs/frames.schema.json` after changing them."""
    assert json.loads(SCHEMA_FILE.read_text()) == frames_schema()
    from xclaw.cli.main import _register, cli

    _register()
    out = CliRunner().invoke(cli, ["schema", "frames"])
    assert out.exit_code == 0 and json.loads(out.output) == frames_schema()


def test_frames_read_and_write_the_wire_exactly() -> None:
    raw = {
        "type": "tool",
        "sessionId": "S",
        "stepId": "s0003",
        "name": "shell",
        "input": {"command": "ls"},
        "state": "completed",
        "output": "a.txt\n",
    }
    frame = decode_frame(raw)
    assert isinstance(frame, ToolFrame) and frame.output == "a.txt\n" and frame.agent is None
    assert frame.wire() == raw  # absent optional fields stay absent
    assert ReplyFrame(session_id="S", content="hi").wire() == {
        "type": "reply",
        "sessionId": "S",
        "content": "hi",
    }
    # Unknown types are ignored; unknown fields are ignored but found by `undeclared`.
    assert decode_frame({"type": "from_the_future", "x": 1}) is None
    assert undeclared({**raw, "extra": 1}) == ["extra"]
    assert undeclared({**raw, "state": "maybe"})  # a known type that breaks its declaration


def test_every_frame_class_is_in_the_union() -> None:
    assert all(issubclass(c, Frame) for c in BY_TYPE.values())
    assert StepFrame.model_fields["step"].annotation is Step


def test_the_runtime_builders_follow_the_declaration() -> None:
    """The frames a real gateway sends are checked in tests/gateway/test_frames_declared.py;
    this one comes only from a model call retried after its thinking went out."""
    from xclaw.llm.prices import PriceTable
    from xclaw.recorder.events import ThinkingDiscarded
    from xclaw.runtime.frames import event_frame

    frame = event_frame(ThinkingDiscarded(), PriceTable.with_overrides(None))
    assert undeclared({**frame, "sessionId": "S"}) == []
