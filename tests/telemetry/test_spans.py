"""Steps -> GenAI spans (pure mapping) and the export switch, without any receiver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeOpenAIServer, Reply
from tests.writes import finish
from xclaw.config.settings import Settings, read_settings
from xclaw.errors import ConfigError
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, Status, StepType
from xclaw.store.steps.writes import AddStep, BeginStep
from xclaw.telemetry.config import OtelSettings
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
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(
            session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "build it, key sk-SECRET123")
        )
    )
    llm = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.LLM_CALL,
                "anthropic:claude-x",
                {"model": "anthropic:claude-x", "params": {"max_tokens": 99}},
                user.step_id,
            ),
        )
    )
    store.record.write(
        finish(
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
                "response_id": "msg_01abc",
            },
            token_usage_prompt=120,
            token_usage_completion=30,
        )
    )
    store.record.write(
        AddStep(
            session_id=sid,
            step=NewStep(
                StepType.SYSTEM_ALERT,
                "approval",
                {"tool": "write_file"},
                user.step_id,
                call_id="t1",
            ),
        )
    )
    w = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.TOOL_CALL, "write_file", {"path": "a"}, llm.step_id, call_id="t1"
            ),
        )
    )
    store.record.write(finish(sid, w.seq, output_data="wrote sk-SECRET123"))
    spawn = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.TOOL_CALL, "spawn_agent", {"task": "sub"}, llm.step_id, call_id="t2"
            ),
        )
    )
    sub_llm = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.LLM_CALL, "anthropic:claude-x", {}, spawn.step_id, agent=spawn.display_id
            ),
        )
    )
    store.record.write(
        finish(
            sid,
            sub_llm.seq,
            output_data={
                "text": "",
                "tool_calls": [{"id": "u1", "name": "read_file", "input": {}}],
            },
        )
    )
    r = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.TOOL_CALL,
                "read_file",
                {},
                sub_llm.step_id,
                agent=spawn.display_id,
                call_id="u1",
            ),
        )
    )
    store.record.write(finish(sid, r.seq, error_message="interrupted"))
    store.record.write(finish(sid, spawn.seq, output_data="sub done"))
    last = store.record.write(
        BeginStep(
            session_id=sid, step=NewStep(StepType.LLM_CALL, "anthropic:claude-x", {}, user.step_id)
        )
    )
    store.record.write(
        finish(
            sid,
            last.seq,
            output_data={"text": "all built", "stop_reason": "end_turn"},
            session_status=Status.SUCCESS,
        )
    )
    return sid


def test_a_turn_maps_to_genai_spans_with_sub_agents_nested(store: SQLiteStore) -> None:
    sid = _session(store)
    [turn] = split_turns(store.record.steps(sid))
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
    # The reply's id, not the HTTP request's: that one has its own attribute.
    assert first["gen_ai.response.id"] == "msg_01abc"
    assert first["xclaw.provider.request_id"] == "req_1"
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
    [turn] = split_turns(store.record.steps(sid))
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
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "more"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.close()  # killed mid-call; the next run starts a moment later and settles it
    started = llm.start_time + 10
    later = SQLiteStore(store.path, clock=lambda: started + 5)
    later.record.mark_interrupted(sid)
    steps = later.record.steps(sid)
    later.close()
    assert len(split_turns(steps)) == 2
    [touched] = turns_of_run(steps, started)
    assert touched[0].seq == user.seq
    root = turn_spans(sid, touched)[0]
    assert root.error is not None and "without an answer" in root.error


def otel_of(otel: dict[str, Any] | None, env: dict[str, str]) -> OtelSettings:
    return read_settings({"otel": otel} if otel else {}, env).otel


def test_export_is_switched_by_the_standard_variables_or_xclaw_yaml() -> None:
    assert not otel_of(None, {}).enabled
    on = otel_of(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"})
    assert on.enabled and on.endpoint == "http://h:4318" and on.protocol == "http/protobuf"
    assert not on.capture_message_content and on.service_name == "xclaw"
    yaml = otel_of(
        {
            "endpoint": "http://c:4318",
            "protocol": "grpc",
            "service_name": "svc",
            "capture_message_content": True,
        },
        {},
    )
    assert (
        yaml.enabled,
        yaml.endpoint,
        yaml.protocol,
        yaml.service_name,
        yaml.capture_message_content,
    ) == (True, "http://c:4318", "grpc", "svc", True)
    env_wins = otel_of(
        {"endpoint": "http://c:4318", "protocol": "grpc"},
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
            "OTEL_SERVICE_NAME": "mine",
        },
    )
    assert (
        env_wins.endpoint,
        env_wins.protocol,
        env_wins.capture_message_content,
        env_wins.service_name,
    ) == ("http://h:4318", "http/protobuf", True, "mine")
    traces = otel_of(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/x/traces"})
    assert traces.enabled and traces.traces_endpoint == "http://h:4318/x/traces"
    assert not otel_of(
        None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_SDK_DISABLED": "true"}
    ).enabled
    assert otel_of(
        None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_SDK_DISABLED": "no"}
    ).enabled
    assert not otel_of(
        None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_TRACES_EXPORTER": "none"}
    ).enabled
    with pytest.raises(
        ConfigError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL 'carrier-pigeon': expected http/protobuf"
    ):
        otel_of(
            None,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon",
            },
        )
    with pytest.raises(ConfigError, match=r"otel\.sdk_disabled is not a key of xclaw\.yaml"):
        otel_of({"sdk_disabled": True}, {})


def test_only_the_end_of_a_long_session_is_read(tmp_path: Path) -> None:
    ticks = iter(range(1_000_000, 2_000_000, 10))  # one step per 10 ms
    store = SQLiteStore(tmp_path / "long.db", clock=lambda: next(ticks))
    sid = store.record.create_session().session_id
    for i in range(40):
        u = store.record.write(
            AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", f"turn {i}"))
        )
        llm = store.record.write(
            BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
        )
        store.record.write(finish(sid, llm.seq, output_data={"text": "ok"}))
    last_user = store.record.latest_steps(sid, 2)[0]
    got = recent_steps(store.record, sid, last_user.start_time, first=4)
    assert got[0].seq <= last_user.seq and len(got) <= 8
    assert turns_of_run(got, last_user.start_time)[-1][0].seq == last_user.seq
    assert len(recent_steps(store.record, sid, 0, first=4)) == 80  # everything touched: all of it
    store.close()


def test_every_text_of_a_span_is_redacted_names_and_errors_too(store: SQLiteStore) -> None:
    """A record that holds a secret in what a span is named after (an older database, or a
    secret learned since it was written): the tool's name, its call id, its error, an
    alert's call id — the span names, attributes, events and status are redacted all the
    same, with or without captured content."""
    key = "sk-SECRET123"
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go"))
    )
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(finish(sid, llm.seq, output_data={"text": "", "tool_calls": []}))
    store.record.write(
        AddStep(
            session_id=sid,
            step=NewStep(StepType.SYSTEM_ALERT, "approval", {}, user.step_id, call_id=f"c_{key}"),
        )
    )
    t = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.TOOL_CALL, f"tool_{key}", {}, llm.step_id, call_id=f"c_{key}"),
        )
    )
    store.record.write(finish(sid, t.seq, error_message=f"unknown tool 'tool_{key}'"))
    [turn] = split_turns(store.record.steps(sid))
    for capture in (False, True):
        spans = turn_spans(
            sid, turn, capture_content=capture, redact=lambda s: s.replace(key, "[REDACTED]")
        )
        texts = [
            str(x)
            for s in spans
            for x in (
                s.name,
                s.error,
                *s.attributes.values(),
                *(e.name for e in s.events),
                *(v for e in s.events for v in e.attributes.values()),
            )
        ]
        assert "execute_tool tool_[REDACTED]" in texts
        assert not any(key in x for x in texts), texts


def test_a_record_without_a_response_id_gives_none_rather_than_the_request_id(
    store: SQLiteStore,
) -> None:
    """Steps recorded before response ids were kept hold only `request_id`: that is no
    response id, so gen_ai.response.id is left out."""
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "hi"))
    )
    llm = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.LLM_CALL, "openai:m", {"model": "openai:m"}, user.step_id),
        )
    )
    store.record.write(
        finish(
            sid,
            llm.seq,
            output_data={"text": "hello", "stop_reason": "stop", "request_id": "req_old"},
            session_status=Status.SUCCESS,
        )
    )
    [turn] = split_turns(store.record.steps(sid))
    [chat] = [s for s in turn_spans(sid, turn) if s.name == "chat m"]
    assert "gen_ai.response.id" not in chat.attributes
    assert chat.attributes["xclaw.provider.request_id"] == "req_old"


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_response_and_request_ids_from_real_sdks_land_in_their_attributes(
    tmp_path: Path, kind: str
) -> None:
    """Through the provider SDKs against a fake API on loopback: the llm_call step keeps the
    reply's id beside the request id, and the span names each as what it is."""
    server_cls = FakeAnthropicServer if kind == "anthropic" else FakeOpenAIServer
    with server_cls() as srv:
        srv.push(Reply(text="hello"))
        settings = Settings(
            home=tmp_path,
            database=str(tmp_path / "x.db"),
            workspace_root=tmp_path / "ws",
            providers=(entry(f"{kind}:m", {"api_key": "sk-test-123456", "base_url": srv.url}),),
        )
        runtime = Runtime(open_store(settings.database), settings)
        try:
            session, _ = await runtime.open(None)
            sid = session.session_id
            await runtime.send(sid, "hi")
            await runtime.wait_idle(sid)
            steps = runtime.store.record.steps(sid)
        finally:
            await runtime.shutdown()
            runtime.store.close()
    (llm,) = [s for s in steps if s.step_type is StepType.LLM_CALL]
    expected = "msg_fake" if kind == "anthropic" else "chatcmpl-fake"
    assert llm.output_data["response_id"] == expected
    assert llm.output_data["request_id"] == "req_fake_1"
    [turn] = split_turns(steps)
    [chat] = [s for s in turn_spans(sid, turn) if s.name == "chat m"]
    assert chat.attributes["gen_ai.response.id"] == expected
    assert chat.attributes["xclaw.provider.request_id"] == "req_fake_1"


def test_unknown_token_counts_are_not_sent_as_zero(store: SQLiteStore) -> None:
    """A server that reported no usage: no gen_ai.usage.* counts (they are facts in the
    GenAI conventions); xclaw's estimate goes in its own, marked attributes."""
    sid = store.record.create_session().session_id
    user = store.record.write(
        AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "hi"))
    )
    llm = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(
                StepType.LLM_CALL, "openai:gemma", {"model": "openai:gemma"}, user.step_id
            ),
        )
    )
    store.record.write(
        finish(
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
    )
    [turn] = split_turns(store.record.steps(sid))
    (chat,) = [s for s in turn_spans(sid, turn) if s.name == "chat gemma"]
    attrs = chat.attributes
    assert "gen_ai.usage.input_tokens" not in attrs and "gen_ai.usage.output_tokens" not in attrs
    assert attrs["xclaw.usage.estimated"] is True
    assert (
        attrs["xclaw.usage.estimated_input_tokens"],
        attrs["xclaw.usage.estimated_output_tokens"],
    ) == (80, 3)
    assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", 8080)


def test_spans_name_the_user_who_sent_the_message_and_who_approved(store: SQLiteStore) -> None:
    """A team server (docs/teams.md): the turn's spans carry `enduser.id`, the sender; the
    approval event the user who answered it. The server's own token names nobody."""
    sid = store.record.create_session().session_id
    by_alice = {"by": {"kind": "person", "via": "websocket", "user": "alice"}}
    user = store.record.write(
        AddStep(
            session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go"), output_data=by_alice
        )
    )
    ask = store.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.SYSTEM_ALERT, "approval", {"tool": "shell"}, user.step_id),
        )
    )
    answer = {
        "approved": True,
        "why": "approved by bob (web page)",
        "by": {"kind": "person", "client": "web", "via": "websocket", "user": "bob"},
    }
    store.record.write(finish(sid, ask.seq, output_data=answer))
    llm = store.record.write(
        BeginStep(session_id=sid, step=NewStep(StepType.LLM_CALL, "m", {}, user.step_id))
    )
    store.record.write(
        finish(sid, llm.seq, output_data={"text": "ok"}, session_status=Status.SUCCESS)
    )
    (turn,) = split_turns(store.record.steps(sid))
    spans = turn_spans(sid, turn)
    assert {s.attributes.get("enduser.id") for s in spans} == {"alice"}
    (approval,) = [e for s in spans for e in s.events if e.name == "xclaw.approval"]
    assert approval.attributes["enduser.id"] == "bob"
    # Without users: no enduser.id at all.
    plain = store.record.create_session().session_id
    u = store.record.write(
        AddStep(session_id=plain, step=NewStep(StepType.USER_INPUT, "user", "go"))
    )
    m = store.record.write(
        BeginStep(session_id=plain, step=NewStep(StepType.LLM_CALL, "m", {}, u.step_id))
    )
    store.record.write(
        finish(plain, m.seq, output_data={"text": "ok"}, session_status=Status.SUCCESS)
    )
    (turn,) = split_turns(store.record.steps(plain))
    assert all("enduser.id" not in s.attributes for s in turn_spans(plain, turn))
