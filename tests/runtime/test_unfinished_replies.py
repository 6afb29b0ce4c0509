"""Nothing runs from an unfinished reply: the whole runtime against fake provider servers on
loopback through the real SDKs, and `xclaw run` as a user runs it (a real process). A Failed
session is continued on request and picks up where it stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.llm.fakes import FakeAnthropicServer, FakeCall, FakeOpenAIServer, Reply
from xclaw.config.settings import Settings
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepStatus, StepType

TOUCH = FakeCall.of("shell", {"command": "touch PWNED"}, id="call_touch")


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest):
    server_cls = FakeOpenAIServer if request.param == "openai" else FakeAnthropicServer
    with server_cls() as srv:
        yield request.param, srv


def make_runtime(tmp: Path, kind: str, srv: Any, *, thinking: bool = False) -> Runtime:
    budget = 1024 if thinking and kind == "anthropic" else None  # (OpenAI: the server's call)
    options: dict[str, Any] = {"api_key": "sk-test-123456", "base_url": srv.url}
    if budget:
        options["thinking"] = {"budget_tokens": budget}
    provider = entry(f"{kind}:m", options)
    settings = Settings(
        home=tmp,
        database=str(tmp / "x.db"),
        workspace_root=tmp / "ws",
        approval={"mode": "yolo"},
        providers=(provider,),
        llm_retries=1,
        llm_retry_base_delay=0.01,
        llm_retry_max_delay=0.01,
    )
    return Runtime(open_store(settings.database), settings)


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda: Reply.cut(2, tool_calls=[TOUCH]), id="cut-early"),
        pytest.param(lambda: Reply(cut_before_end=True, tool_calls=[TOUCH]), id="no-end-marker"),
        pytest.param(lambda: Reply(raw_body=b""), id="zero-byte-200"),
    ],
)
async def test_a_cut_off_reply_runs_no_tool_and_fails_the_session(
    tmp_path: Path, provider, fault
) -> None:
    kind, srv = provider
    srv.push(fault(), fault())  # the first attempt and its one retry
    runtime = make_runtime(tmp_path, kind, srv)
    frames: list[dict[str, Any]] = []
    session, _ = await runtime.open(None)
    sid = session.session_id
    runtime.subscribe(sid, frames.append)
    await runtime.send(sid, "go")
    await runtime.wait_idle(sid)

    assert not (tmp_path / "ws" / sid / "PWNED").exists()
    steps = runtime.store.record.steps(sid)
    assert [s.step_type for s in steps] == [StepType.USER_INPUT, StepType.LLM_CALL]
    llm = steps[1]
    assert llm.status is StepStatus.FAILED and "cut off" in (llm.error_message or "")
    assert "[request id req_fake_2]" in (llm.error_message or "")  # the last attempt's
    assert runtime.store.record.get_session(sid).status.value == "Failed"
    assert not [f for f in frames if f["type"] in ("tool", "reply")]
    assert [f["code"] for f in frames if f["type"] == "error"] == ["llm_error"]

    # Continued on request (xclaw run --session ID): the call is made again, now whole.
    srv.push(Reply(tool_calls=[TOUCH]), Reply(text="done"))
    assert await runtime.resume_if_needed(sid) is False  # never on its own
    assert await runtime.resume_if_needed(sid, failed=True) is True
    await runtime.wait_idle(sid)
    assert (tmp_path / "ws" / sid / "PWNED").exists()
    assert runtime.store.record.get_session(sid).status.value == "Success"
    steps = runtime.store.record.steps(sid)
    resume = [s for s in steps if s.step_type is StepType.SYSTEM_ALERT]
    assert resume and resume[0].name == "resume" and resume[0].input_data["after"] == "Failed"
    ok = [s for s in steps if s.step_type is StepType.LLM_CALL and s.status is StepStatus.COMPLETED]
    assert [s.output_data["request_id"] for s in ok] == ["req_fake_3", "req_fake_4"]
    assert not srv.rejections, srv.rejections
    await runtime.shutdown()
    runtime.store.close()


async def test_an_in_stream_error_is_retried_and_the_session_succeeds(
    tmp_path: Path, provider
) -> None:
    kind, srv = provider
    srv.push(Reply(stream_error=("server_error", "The server had an error")), Reply(text="hi"))
    runtime = make_runtime(tmp_path, kind, srv)
    session, _ = await runtime.open(None)
    sid = session.session_id
    await runtime.send(sid, "hello")
    await runtime.wait_idle(sid)
    assert runtime.store.record.get_session(sid).status.value == "Success"
    assert len(srv.requests) == 2
    await runtime.shutdown()
    runtime.store.close()


def xclaw(tmp: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "XCLAW_MODEL"}
    env.update(
        {
            "XCLAW_HOME": str(tmp),
            "NO_COLOR": "1",
            "XCLAW_MODEL": "openai:m",
            "OPENAI_API_BASE_URL": url,
        }
    )
    (tmp / "xclaw.yaml").write_text("llm_retry_base_delay: 0.01\nllm_retry_max_delay: 0.01\n")
    return subprocess.run(
        [sys.executable, "-m", "xclaw", "run", *args],
        check=False,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_xclaw_run_does_not_run_the_tool_call_of_a_cut_off_stream(tmp_path: Path) -> None:
    """A stream cut short: one chunk with a tool_calls delta, then the server closes."""
    with FakeOpenAIServer(default=Reply.cut(2, tool_calls=[TOUCH])) as srv:
        r = xclaw(tmp_path, srv.url, "--approval", "yolo", "go")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "xclaw uses [shell]" not in r.stdout
        assert "the reply was cut off" in r.stdout + r.stderr
        assert not list(tmp_path.glob("workspaces/*/PWNED"))
        sid = r.stderr.split("session ", 1)[1].split()[0]
        assert f"xclaw run --session {sid}" in r.stderr  # says how to continue it

        srv.default = None
        srv.push(Reply(tool_calls=[TOUCH]), Reply(text="Touched it."))
        r = xclaw(tmp_path, srv.url, "--approval", "yolo", "--session", sid)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "continuing Failed session" in r.stderr
        assert "xclaw: Touched it." in r.stdout
        assert len(list(tmp_path.glob("workspaces/*/PWNED"))) == 1

        r = xclaw(tmp_path, srv.url, "--session", sid)  # Success: nothing to continue
        assert r.returncode == 0 and "nothing to resume" in r.stdout
        assert f'xclaw run --session {sid} "your next message"' in r.stdout


def test_xclaw_run_marks_text_of_a_reply_cut_after_it_streamed(tmp_path: Path) -> None:
    with FakeOpenAIServer(default=Reply.cut(4, text="Done: I wrote the file for you.")) as srv:
        r = xclaw(tmp_path, srv.url, "go")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "xclaw: Done: I wrote [reply cut off]\n" in r.stdout
    assert "error (llm_error)" in r.stdout and "not retried" in r.stdout
    assert len(srv.requests) == 1  # text went out: no second, different beginning


FIRST_THOUGHT = "The first attempt wonders about the weather."
SECOND_THOUGHT = "The second attempt thinks about the greeting."


def _cut_after_thinking(kind: str) -> Reply:
    """A reply whose thinking was complete (and shown) when the stream broke off."""
    if kind == "openai":  # the role chunk, then one chunk per word of reasoning
        return Reply.cut(1 + len(FIRST_THOUGHT.split()), thinking=[FIRST_THOUGHT])
    # message_start, ping; the block's start, a delta per word, its signature, its stop
    return Reply.cut(5 + len(FIRST_THOUGHT.split()), thinking=[FIRST_THOUGHT])


async def test_thinking_of_a_retried_attempt_is_taken_back(tmp_path: Path, provider) -> None:
    """A stream cut after its thinking was shown is retried: clients are told to drop the
    failed attempt's thinking before the new attempt's arrives (thinking_discarded)."""
    kind, srv = provider
    srv.push(_cut_after_thinking(kind), Reply(thinking=[SECOND_THOUGHT], text="Hello."))
    runtime = make_runtime(tmp_path, kind, srv, thinking=True)
    frames: list[dict[str, Any]] = []
    session, _ = await runtime.open(None)
    sid = session.session_id
    runtime.subscribe(sid, frames.append)
    await runtime.send(sid, "hello")
    await runtime.wait_idle(sid)
    told = [
        f.get("content") if f["type"] == "thinking" else f["type"]
        for f in frames
        if f["type"] in ("thinking", "thinking_discarded", "delta")
    ]
    assert told[:3] == [FIRST_THOUGHT, "thinking_discarded", SECOND_THOUGHT], told
    assert told[3:] and set(told[3:]) <= {"delta"}
    (llm,) = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert [b["thinking"] for b in llm.output_data["thinking"]] == [SECOND_THOUGHT]
    await runtime.shutdown()
    runtime.store.close()


def test_xclaw_run_shows_the_thinking_of_a_retried_call_once(tmp_path: Path) -> None:
    with FakeOpenAIServer() as srv:
        srv.push(_cut_after_thinking("openai"), Reply(thinking=[SECOND_THOUGHT], text="Hello."))
        r = xclaw(tmp_path, srv.url, "hi")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(srv.requests) == 2
    assert r.stdout.count("thinking") == 1, r.stdout
    assert "The second attempt" in r.stdout and "The first attempt" not in r.stdout
