"""Compaction through the whole runtime and the real anthropic SDK: when the conversation fills
the window it is summarised once (an llm_call step of its own, a `[compact]` notice), the
conversation goes on from the summary with every request valid and the prompt cache still
read, a later turn in a new process starts from the same summary, rollback undoes it, and
`/compact` does it on demand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.llm.fakes import FakeAnthropicServer, FakeCall, Reply
from xclaw.config.settings import Settings
from xclaw.gateway.commands import CommandRunner
from xclaw.llm.context import COMPACT_INSTRUCTION, SUMMARY_PREFIX
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepType
from xclaw.wire.protocol import parse_command

SUMMARY = "SUMMARY: the user wants part files printed; parts 0-5 were printed; go on."


def summariser(body: dict[str, Any]) -> Reply | None:
    """Answers the compaction request (wherever it falls) with a summary."""
    last = body["messages"][-1]["content"]
    texts = [b.get("text", "") for b in last if isinstance(b, dict)]
    return Reply(text=SUMMARY) if COMPACT_INSTRUCTION in texts else None


def _first_text(body: dict[str, Any]) -> str:
    return body["messages"][0]["content"][0]["text"]


def _settings(tmp: Path, url: str) -> Settings:
    return Settings(
        home=tmp,
        database=str(tmp / "x.db"),
        workspace_root=tmp / "ws",
        approval={"mode": "yolo"},
        providers=(entry("anthropic:claude-test", {"api_key": "sk-test-123456", "base_url": url}),),
        llm_retries=0,
        context_window_tokens=9_000,
        max_tokens=1_000,
        max_iterations=40,
    )


async def _turn(
    settings: Settings, text: str, sid: str | None = None
) -> tuple[Runtime, str, list[dict[str, Any]]]:
    runtime = Runtime(open_store(settings.database), settings)
    session, _ = await runtime.open(sid)
    frames: list[dict[str, Any]] = []
    runtime.subscribe(session.session_id, frames.append)
    await runtime.send(session.session_id, text)
    await runtime.wait_idle(session.session_id)
    return runtime, session.session_id, frames


async def test_a_full_window_is_summarised_once_and_the_conversation_goes_on(
    tmp_path: Path,
) -> None:
    with FakeAnthropicServer(cache_accounting=True) as srv:
        srv.responder = summariser
        for i in range(12):
            command = f"for i in $(seq 60); do echo part {i} line $i of some output; done"
            srv.push(
                Reply(
                    text=f"Printing part {i}.",
                    tool_calls=[FakeCall.of("shell", {"command": command}, id=f"toolu_{i}")],
                )
            )
        srv.push(Reply(text="All parts printed."), Reply(text="Yes, all of them."))
        settings = _settings(tmp_path, srv.url)
        runtime, sid, frames = await _turn(settings, "print every part")
        assert [f["content"] for f in frames if f["type"] == "reply"] == ["All parts printed."]
        assert not srv.rejections, srv.rejections

        compactions = [i for i, b in enumerate(srv.requests) if summariser(b) is not None]
        assert len(compactions) == 1, compactions  # once, then the conversation goes on
        c = compactions[0]
        # The summary request keeps the same system prompt and tools: it reads the cache.
        assert srv.requests[c]["system"] == srv.requests[c - 1]["system"]
        assert srv.requests[c]["tools"] == srv.requests[c - 1]["tools"]
        after = srv.requests[c + 1]
        assert _first_text(after).startswith(SUMMARY_PREFIX) and SUMMARY in _first_text(after)
        assert len(after["messages"]) == 1  # nothing else was carried over

        steps = runtime.store.record.steps(sid)
        (step,) = [
            s
            for s in steps
            if s.step_type is StepType.LLM_CALL and (s.output_data or {}).get("compaction")
        ]
        assert step.input_data["params"]["purpose"] == "compaction"
        assert step.output_data["text"] == SUMMARY and step.output_data["usage"]["cache_read"] > 0
        notices = [f["content"] for f in frames if f["type"] == "notice"]
        assert any(n.startswith("[compact]") for n in notices), notices
        assert runtime.store.record.get_session(sid).status.value == "Success"
        await runtime.shutdown()
        runtime.store.close()

        # A new process: the next turn's history starts from the same summary.
        runtime, _, frames = await _turn(settings, "all of them?", sid)
        assert frames[-1]["content"] == "Yes, all of them."
        assert _first_text(srv.requests[-1]) == _first_text(after)
        assert not srv.rejections, srv.rejections

        # Rollback to the summary step undoes it: the rebuilt history is the whole conversation.
        runtime.store.record.rollback(sid, step.seq)
        hist = runtime.rebuild(runtime.store.record.steps(sid, agent="main"))
        assert len(hist.messages) > 10 and not any(
            SUMMARY_PREFIX in getattr(m, "text", "") for m in hist.messages
        )
        await runtime.shutdown()
        runtime.store.close()


async def test_compact_on_demand(tmp_path: Path) -> None:
    with FakeAnthropicServer(cache_accounting=True) as srv:
        srv.responder = summariser
        srv.push(
            Reply(
                text="Listing.", tool_calls=[FakeCall.of("list_dir", {"path": "."}, id="toolu_1")]
            ),
            Reply(text="Empty workspace."),
            Reply(text="Still empty."),
        )
        settings = _settings(tmp_path, srv.url)
        runtime, sid, frames = await _turn(settings, "what is here?")
        commands = CommandRunner(runtime, runtime.store)
        result = await commands.run(sid, parse_command("/compact"))
        assert result.reply == []
        await runtime.wait_idle(sid)
        assert any(f["type"] == "notice" and f["content"].startswith("[compact]") for f in frames)
        assert runtime.store.record.get_session(sid).status.value == "Success"
        await runtime.send(sid, "and now?")
        await runtime.wait_idle(sid)
        body = srv.requests[-1]
        assert SUMMARY in _first_text(body) and len(body["messages"]) == 1  # summary + question
        assert not srv.rejections, srv.rejections
        await runtime.shutdown()
        runtime.store.close()
