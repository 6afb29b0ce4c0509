"""The providers against third-party mock servers (`fakellm`, `llm-mock-api`, run as real
processes), through the real anthropic/openai SDKs and the whole runtime: the real
counterparts of tests/llm/fakes.py. Faults the servers cannot make themselves (a stream
without its end marker, an error inside the stream, Retry-After and request-id headers) are
applied to their real replies by our FaultProxy (tests/llm/mock_servers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm.mock_servers import Fault, FaultProxy, mock_server
from xclaw.config.settings import Settings
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest, Model
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import OpenAIModel
from xclaw.llm.registry import entry
from xclaw.llm.retry import RetryingModel
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepStatus, StepType

pytestmark = pytest.mark.slow

SERVERS = ["fakellm", "llm-mock-api"]
PROVIDERS = ["openai", "anthropic"]


@pytest.fixture(params=SERVERS)
def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with mock_server(request.param, tmp_path / "mock") as url:
        yield request.param, url


def base_url(kind: str, root: str) -> str:
    return f"{root}/v1" if kind == "openai" else root


async def run_task(
    tmp: Path, kind: str, url: str, text: str
) -> tuple[Runtime, str, list[dict[str, Any]]]:
    settings = Settings(
        home=tmp,
        database=str(tmp / "x.db"),
        workspace_root=tmp / "ws",
        approval={"mode": "yolo"},
        providers=(
            entry(f"{kind}:m", {"api_key": "sk-test-123456", "base_url": base_url(kind, url)}),
        ),
        llm_retries=1,
        llm_retry_base_delay=0.01,
        llm_retry_max_delay=0.01,
    )
    runtime = Runtime(open_store(settings.database), settings)
    frames: list[dict[str, Any]] = []
    session, _ = await runtime.open(None)
    runtime.subscribe(session.session_id, frames.append)
    await runtime.send(session.session_id, text)
    await runtime.wait_idle(session.session_id)
    return runtime, session.session_id, frames


async def close(runtime: Runtime) -> None:
    await runtime.shutdown()
    runtime.store.close()


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_tool_call_round_trip_with_request_ids(tmp_path: Path, upstream, kind: str) -> None:
    _, url = upstream
    with FaultProxy(url) as proxy:
        runtime, sid, frames = await run_task(tmp_path, kind, proxy.url, "make the file")
    assert (tmp_path / "ws" / sid / "a.txt").read_text() == "hi"
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["Done: wrote a.txt."]
    assert runtime.store.record.get_session(sid).status.value == "Success"
    llm = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.LLM_CALL]
    assert [s.output_data["request_id"] for s in llm] == ["req_proxy_1", "req_proxy_2"]
    await close(runtime)


@pytest.mark.parametrize(
    ("kind", "fault"),
    [
        ("openai", Fault(drop_end=True)),
        ("openai", Fault(cut_after=2)),  # one tool_calls chunk, then the server closes
        ("anthropic", Fault(drop_end=True)),
        ("anthropic", Fault(cut_after=3)),
    ],
    ids=["openai-no-end", "openai-one-chunk", "anthropic-no-end", "anthropic-cut"],
)
async def test_a_cut_off_reply_runs_no_tool_and_is_not_success(
    tmp_path: Path, upstream, kind: str, fault: Fault
) -> None:
    _, url = upstream
    with FaultProxy(url, default=fault) as proxy:
        runtime, sid, frames = await run_task(tmp_path, kind, proxy.url, "make the file")
        assert proxy.count == 2  # the first attempt and its retry, both cut
    assert not (tmp_path / "ws" / sid / "a.txt").exists()
    steps = runtime.store.record.steps(sid)
    assert [s.step_type for s in steps] == [StepType.USER_INPUT, StepType.LLM_CALL]
    assert steps[1].status is StepStatus.FAILED
    assert "cut off" in (steps[1].error_message or "")
    assert "req_proxy_2" in (steps[1].error_message or "")
    assert runtime.store.record.get_session(sid).status.value == "Failed"
    assert not [f for f in frames if f["type"] in ("tool", "reply")]
    await close(runtime)


@pytest.mark.parametrize(
    ("kind", "error"),
    [("openai", "server_error"), ("anthropic", "overloaded_error")],
)
async def test_an_error_inside_the_stream_is_retried(
    tmp_path: Path, upstream, kind: str, error: str
) -> None:
    _, url = upstream
    with FaultProxy(url) as proxy:
        proxy.push(Fault(stream_error=(error, "please retry")))
        runtime, sid, frames = await run_task(tmp_path, kind, proxy.url, "just talk")
        assert proxy.count == 2
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["Hello there."]
    assert runtime.store.record.get_session(sid).status.value == "Success"
    await close(runtime)


class Sleeps(list[float]):
    async def __call__(self, s: float) -> None:
        self.append(s)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_retry_after_of_a_real_429_is_honoured_and_bounded(tmp_path: Path, kind: str) -> None:
    # llm-mock-api answers "rate me" twice with its own 429 body; the proxy adds the headers.
    with mock_server("llm-mock-api", tmp_path / "mock") as url, FaultProxy(url) as proxy:
        proxy.push(Fault(headers={"retry-after-ms": "300"}), Fault(headers={"retry-after": "3600"}))
        bare: Model = (
            OpenAIModel("m", api_key="k", base_url=base_url(kind, proxy.url))
            if kind == "openai"
            else AnthropicModel("m", api_key="k", base_url=proxy.url)
        )
        sleeps = Sleeps()
        model = RetryingModel(bare, retries=2, base_delay=0.01, max_retry_after=2.0, sleep=sleeps)
        r = await model.complete(LLMRequest(system="", messages=(UserMessage("rate me"),)))
    assert r.text == "after the wait" and r.request_id == "req_proxy_3"
    assert sleeps == [0.3, 2.0]  # retry-after-ms exactly; an hour capped at max_retry_after


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_image_round_trip(tmp_path: Path, upstream, kind: str) -> None:
    """view_file on a PNG: the third-party server takes the image block (Anthropic `image` in
    the tool_result, OpenAI `image_url` in a user message after the tool message) and answers;
    the bytes are in the blob store, not in the step."""
    from tests.runtime.test_images import png

    _, url = upstream
    settings = Settings(
        home=tmp_path,
        database=str(tmp_path / "x.db"),
        workspace_root=tmp_path / "ws",
        approval={"mode": "yolo"},
        providers=(
            entry(f"{kind}:m", {"api_key": "sk-test-123456", "base_url": base_url(kind, url)}),
        ),
        llm_retries=0,
    )
    runtime = Runtime(open_store(settings.database), settings)
    session, _ = await runtime.open(None)
    sid = session.session_id
    (tmp_path / "ws" / sid).mkdir(parents=True, exist_ok=True)
    (tmp_path / "ws" / sid / "pic.png").write_bytes(png())
    frames: list[dict[str, Any]] = []
    runtime.subscribe(sid, frames.append)
    await runtime.send(sid, "look at pic.png")
    await runtime.wait_idle(sid)
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["A red picture."], frames
    (tool,) = [s for s in runtime.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
    (ref,) = tool.output_data["images"]
    assert runtime.store.snapshots.get_blobs([ref["hash"]]) == {ref["hash"]: png()}
    await close(runtime)
