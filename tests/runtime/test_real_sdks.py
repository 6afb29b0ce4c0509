"""The whole runtime against fake provider servers on loopback, through the real SDKs: the
agent, the recorder and resume all speak native tool use to both APIs, and every request the
runtime sends passes the fake's strict validation (which mirrors the real APIs' rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeCall, FakeOpenAIServer, Reply
from xclaw.config.settings import Settings
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepStatus, StepType


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest):
    server_cls = FakeOpenAIServer if request.param == "openai" else FakeAnthropicServer
    with server_cls() as srv:
        yield request.param, srv


async def run_task(
    tmp: Path, kind: str, srv: Any, text: str, sid: str | None = None
) -> tuple[Runtime, str, list[dict[str, Any]]]:
    settings = Settings(
        home=tmp,
        database=str(tmp / "x.db"),
        workspace_root=tmp / "ws",
        approval={"mode": "yolo"},
        providers=(
            entry(f"{kind}:test-model", {"api_key": "sk-test-123456", "base_url": srv.url}),
        ),
        llm_retries=1,
        llm_retry_base_delay=0.01,
    )
    store = open_store(settings.database)
    runtime = Runtime(store, settings)
    frames: list[dict[str, Any]] = []
    session, _ = await runtime.open(sid)
    runtime.subscribe(session.session_id, frames.append)
    await runtime.send(session.session_id, text)
    await runtime.wait_idle(session.session_id)
    return runtime, session.session_id, frames


async def test_tool_use_round_trip_with_usage_and_rebuilt_history(tmp_path: Path, provider) -> None:
    kind, srv = provider
    srv.push(
        Reply(
            text="Let me write it.",
            tool_calls=[
                FakeCall.of("write_file", {"path": "a.txt", "content": "hi"}, id="toolu_1")
            ],
            usage=(100, 20),
        ),
        Reply(text="Done: a.txt written.", usage=(150, 10)),
        Reply(text="It contains hi.", usage=(200, 5)),
    )
    runtime, sid, frames = await run_task(tmp_path, kind, srv, "write a.txt")
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["Done: a.txt written."]
    assert (tmp_path / "ws" / sid / "a.txt").read_text() == "hi"
    llm = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert [(s.token_usage_prompt, s.token_usage_completion) for s in llm] == [(100, 20), (150, 10)]
    assert all(s.name == f"{kind}:test-model" for s in llm)
    await runtime.shutdown()
    runtime.store.close()

    # A second turn in a new runtime (a restarted server) rebuilds the history from the record:
    # the provider receives the earlier tool call and its result as native messages.
    runtime, _, frames = await run_task(tmp_path, kind, srv, "what is in it?", sid=sid)
    assert frames[-1]["type"] == "reply" and frames[-1]["content"] == "It contains hi."
    assert not srv.rejections, srv.rejections  # every request passed the strict validator
    body = srv.requests[-1]
    assert "write_file" in str(body["messages"]) and "wrote" in str(body["messages"])
    await runtime.shutdown()
    runtime.store.close()


async def test_provider_failure_fails_the_session_with_the_providers_message(
    tmp_path: Path, provider
) -> None:
    kind, srv = provider
    srv.push(Reply.fail(500, "upstream exploded"), Reply.fail(500, "upstream exploded"))
    runtime, sid, frames = await run_task(tmp_path, kind, srv, "hello")
    errors = [f for f in frames if f["type"] == "error"]
    assert (
        errors
        and errors[-1]["code"] == "llm_error"
        and "upstream exploded" in errors[-1]["content"]
    )
    failed = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert (
        failed[-1].status is StepStatus.FAILED and "upstream exploded" in failed[-1].error_message
    )
    assert runtime.store.record.get_session(sid).status.value == "Failed"
    # the key never reaches the record
    assert "sk-test-123456" not in str(
        [(s.input_data, s.output_data, s.error_message) for s in runtime.store.record.steps(sid)]
    )
    await runtime.shutdown()
    runtime.store.close()
