"""Steps -> GenAI spans (pure mapping) and the export switch, without any receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from xclaw.errors import ConfigError
from xclaw.store.model import NewStep, Status, StepType
from xclaw.store.sqlite import SQLiteStore
from xclaw.telemetry.config import otel_config
from xclaw.telemetry.exporter import recent_steps, turns_of_run
from xclaw.telemetry.spans import split_turns, turn_spans


@pytest.fixture
def store(tmp_path: Path):
    s = SQLiteStore(tmp_path / "x.db")
    yield s
    s.close()


def _session(store: SQLiteStore) -> str:
    """A turn: model asks for a file write and a sub-agent; the sub-agent calls the model
    and a tool; the main agent answers. An approval alert on the way."""
    sid = store.create_session().session_id
    user = store.add_step(sid, NewStep(StepType.USER_INPUT, "user", "build it, key sk-SECRET123"))
    llm = store.begin_step(
        sid,
        NewStep(
            StepType.LLM_CALL,
            "anthropic:claude-x",
            {"model": "anthropic:claude-x", "params": {"max_tokens": 99}},
            user.step_id,
        ),
    )
    store.complete_step(
        sid,
        llm.seq,
        output_data={
            "text": "",
            "model": "anthropic:claude-x-2024",
            "stop_reason": "tool_use",
            "tool_calls": [
                {"id": "t1", "name": "write_file", "input": {"path": "a"}},
                {"id": "t2", "name": "spawn_agent", "input": {"task": "sub"}},
            ],
            "usage": {
                "input": 120,
                "output": 30,
                "cache_read": 40,
                "cache_write": 7,
                "reasoning": 12,
            },
            "request_id": "req_1",
        },
        token_usage_prompt=120,
        token_usage_completion=30,
    )
    store.add_step(
        sid,
        NewStep(
            StepType.SYSTEM_ALERT, "approval", {"tool": "write_file"}, user.step_id, call_id="t1"
        ),
    )
    w = store.begin_step(
        sid, NewStep(StepType.TOOL_CALL, "write_file", {"path": "a"}, llm.step_id, call_id="t1")
    )
    store.complete_step(sid, w.seq, output_data="wrote sk-SECRET123")
    spawn = store.begin_step(
        sid, NewStep(StepType.TOOL_CALL, "spawn_agent", {"task": "sub"}, llm.step_id, call_id="t2")
    )
    sub_llm = store.begin_step(
        sid,
        NewStep(StepType.LLM_CALL, "anthropic:claude-x", {}, spawn.step_id, agent=spawn.display_id),
    )
    store.complete_step(
        sid,
        sub_llm.seq,
        output_data={"text": "", "tool_calls": [{"id": "u1", "name": "read_file", "input": {}}]},
    )
    r = store.begin_step(
        sid,
        NewStep(
            StepType.TOOL_CALL,
            "read_file",
            {},
            sub_llm.step_id,
            agent=spawn.display_id,
            call_id="u1",
        ),
    )
    store.fail_step(sid, r.seq, error_message="interrupted")
    store.complete_step(sid, spawn.seq, output_data="sub done")
    last = store.begin_step(sid, NewStep(StepType.LLM_CALL, "anthropic:claude-x", {}, user.step_id))
    store.complete_step(
        sid,
        last.seq,
        output_data={"text": "all built", "stop_reason": "end_turn"},
        session_status=Status.SUCCESS,
    )
    return sid


def test_a_turn_maps_to_genai_spans_with_sub_agents_nested(store: SQLiteStore) -> None:
    sid = _session(store)
    [turn] = split_turns(store.steps(sid))
    spans = turn_spans(sid, turn)
    by_name = {s.name: s for s in spans}
    root = by_name["invoke_agent xclaw"]
    assert root.parent_id is None and root.error is None
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.attributes["gen_ai.conversation.id"] == sid for s in spans)
    chats = [s for s in spans if s.name == "chat claude-x"]
    assert len(chats) == 3
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == "claude-x"
    assert first["gen_ai.response.model"] == "claude-x-2024"
    assert first["gen_ai.request.max_tokens"] == 99
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (120, 30)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 40
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 7
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first["gen_ai.response.id"] == "req_1"
    assert first["xclaw.usage.reasoning_tokens"] == 12
    tool = by_name["execute_tool write_file"]
    assert tool.attributes["gen_ai.tool.name"] == "write_file"
    assert tool.attributes["gen_ai.tool.call.id"] == "t1"
    assert tool.parent_id == root.span_id
    # The sub-agent: an invoke_agent span under the spawn_agent call, its steps under it.
    spawn = by_name["execute_tool spawn_agent"]
    sub = next(s for s in spans if s.name.startswith("invoke_agent s0"))
    assert sub.parent_id == spawn.span_id
    read = by_name["execute_tool read_file"]
    assert read.parent_id == sub.span_id
    assert read.error == "interrupted" and read.attributes["error.type"] == "interrupted"
    assert chats[1].parent_id == sub.span_id
    # The approval is an event on the main agent's span; no content without the opt-in.
    assert [e.name for e in root.events] == ["xclaw.approval"]
    assert not any(
        k.startswith(
            ("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res")
        )
        for s in spans
        for k in s.attributes
    )
    # The same steps give the same ids (a turn exported twice is the same spans).
    again = turn_spans(sid, turn)
    assert [(s.trace_id, s.span_id) for s in again] == [(s.trace_id, s.span_id) for s in spans]


def test_content_only_on_opt_in_and_redacted(store: SQLiteStore) -> None:
    sid = _session(store)
    [turn] = split_turns(store.steps(sid))
    spans = turn_spans(
        sid, turn, capture_content=True, redact=lambda t: t.replace("sk-SECRET123", "[REDACTED]")
    )
    by_name = {s.name: s for s in spans}
    root = by_name["invoke_agent xclaw"].attributes
    assert "[REDACTED]" in root["gen_ai.input.messages"]
    assert "all built" in root["gen_ai.output.messages"]
    tool = by_name["execute_tool write_file"].attributes
    assert tool["gen_ai.tool.call.result"] == "wrote [REDACTED]"
    assert '"path"' in tool["gen_ai.tool.call.arguments"]
    assert not any("sk-SECRET123" in str(v) for s in spans for v in s.attributes.values())


def test_a_turn_without_an_answer_is_an_error_and_only_touched_turns_go_out(
    store: SQLiteStore,
) -> None:
    sid = _session(store)
    user = store.add_step(sid, NewStep(StepType.USER_INPUT, "user", "more"))
    llm = store.begin_step(sid, NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    store.close()  # killed mid-call; the next run starts a moment later and settles it
    started = llm.start_time + 10
    later = SQLiteStore(store.path, clock=lambda: started + 5)
    later.mark_interrupted(sid)
    steps = later.steps(sid)
    later.close()
    assert len(split_turns(steps)) == 2
    [touched] = turns_of_run(steps, started)
    assert touched[0].seq == user.seq
    root = turn_spans(sid, touched)[0]
    assert root.error is not None and "without an answer" in root.error


def test_export_is_switched_by_the_standard_variables_or_xclaw_yaml() -> None:
    assert not otel_config({}, {}).enabled
    on = otel_config({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"})
    assert on.enabled and on.endpoint is None and on.protocol == "http/protobuf"
    assert not on.capture_content
    yaml = otel_config(
        {
            "otel": {
                "endpoint": "http://c:4318",
                "protocol": "grpc",
                "service_name": "svc",
                "capture_message_content": True,
            }
        },
        {},
    )
    assert (
        yaml.enabled,
        yaml.endpoint,
        yaml.protocol,
        yaml.service_name,
        yaml.capture_content,
    ) == (True, "http://c:4318", "grpc", "svc", True)
    env_wins = otel_config(
        {"otel": {"endpoint": "http://c:4318", "protocol": "grpc"}},
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
            "OTEL_SERVICE_NAME": "mine",
        },
    )
    assert (
        env_wins.endpoint,
        env_wins.protocol,
        env_wins.capture_content,
        env_wins.service_name,
    ) == (None, "http/protobuf", True, "mine")
    assert not otel_config(
        {}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_SDK_DISABLED": "true"}
    ).enabled
    assert not otel_config(
        {}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_EXPORTER": "none"}
    ).enabled
    with pytest.raises(ConfigError, match="protocol"):
        otel_config(
            {},
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon",
            },
        )


def test_only_the_end_of_a_long_session_is_read(tmp_path: Path) -> None:
    ticks = iter(range(1_000_000, 2_000_000, 10))  # one step per 10 ms
    store = SQLiteStore(tmp_path / "long.db", clock=lambda: next(ticks))
    sid = store.create_session().session_id
    for i in range(40):
        u = store.add_step(sid, NewStep(StepType.USER_INPUT, "user", f"turn {i}"))
        llm = store.begin_step(sid, NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        store.complete_step(sid, llm.seq, output_data={"text": "ok"})
    last_user = store.latest_steps(sid, 2)[0]
    got = recent_steps(store, sid, last_user.start_time, first=4)
    assert got[0].seq <= last_user.seq and len(got) <= 8
    assert turns_of_run(got, last_user.start_time)[-1][0].seq == last_user.seq
    assert len(recent_steps(store, sid, 0, first=4)) == 80  # everything touched: all of it
    store.close()


def test_unknown_token_counts_are_not_sent_as_zero(store: SQLiteStore) -> None:
    """A server that reported no usage: no gen_ai.usage.* counts (they are facts in the
    GenAI conventions); xclaw's estimate goes in its own, marked attributes."""
    sid = store.create_session().session_id
    user = store.add_step(sid, NewStep(StepType.USER_INPUT, "user", "hi"))
    llm = store.begin_step(
        sid, NewStep(StepType.LLM_CALL, "openai:gemma", {"model": "openai:gemma"}, user.step_id)
    )
    store.complete_step(
        sid,
        llm.seq,
        output_data={
            "text": "hello",
            "model": "openai:gemma",
            "stop_reason": "stop",
            "tool_calls": [],
            "usage": {
                "input": 80,
                "output": 3,
                "cache_read": 0,
                "cache_write": 0,
                "reasoning": 0,
                "estimated": True,
            },
            "endpoint": "http://127.0.0.1:8080/v1",
        },
        token_usage_prompt=None,
        token_usage_completion=None,
        session_status=Status.SUCCESS,
    )
    [turn] = split_turns(store.steps(sid))
    (chat,) = [s for s in turn_spans(sid, turn) if s.name == "chat gemma"]
    attrs = chat.attributes
    assert "gen_ai.usage.input_tokens" not in attrs and "gen_ai.usage.output_tokens" not in attrs
    assert attrs["xclaw.usage.estimated"] is True
    assert (
        attrs["xclaw.usage.estimated_input_tokens"],
        attrs["xclaw.usage.estimated_output_tokens"],
    ) == (80, 3)
    assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", 8080)
