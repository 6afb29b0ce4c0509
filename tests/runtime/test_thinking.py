"""Thinking survives everything: `xclaw run` against a loopback Anthropic server that signs its
thinking blocks and enforces the real API's rule (a tool-use turn's assistant message must be
sent back starting with the same thinking blocks, signature byte-exact, or HTTP 400), through
the real anthropic SDK, killed with SIGKILL mid-turn and resumed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.llm.fakes import (
    FakeAnthropicServer,
    FakeCall,
    InvalidRequest,
    Reply,
    thinking_signature,
    validate_anthropic_request,
)
from tests.waiting import wait_until
from xclaw.llm.anthropic import anthropic_request
from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import (
    AssistantMessage,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from xclaw.recorder.history import build_history
from xclaw.store import open_store
from xclaw.store.steps.model import MAIN_AGENT, StepType

pytestmark = pytest.mark.slow

KEY = "sk-ant-test-123456"
THOUGHT_1 = "The user wants a file. I will append one line, then check it."
THOUGHT_2 = "The first line is there; now the second one."


def _write_config(tmp: Path, url: str) -> Path:
    conf = {
        "providers": [
            {
                "model": "anthropic:claude-test",
                "api_key": KEY,
                "base_url": url,
                "thinking": {"budget_tokens": 2048},
            }
        ],
        "llm_retries": 0,
    }
    path = tmp / "xclaw.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


def _env(tmp: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.pop("XCLAW_MODEL", None)
    env.update(XCLAW_HOME=str(tmp), XCLAW_DB=str(tmp / "xclaw.db"), XCLAW_CONFIG=str(config))
    return env


def _run(tmp: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", *args],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_thinking_round_trip_across_kill_and_resume(tmp_path: Path) -> None:
    with FakeAnthropicServer() as srv:
        srv.push(
            Reply(
                thinking=[THOUGHT_1],
                redacted_thinking=1,
                text="Appending the first line.",
                tool_calls=[
                    FakeCall.of("shell", {"command": "echo one >> effects.log"}, id="toolu_a")
                ],
            ),
            Reply(text="never sent: the process is killed while waiting", delay=120),
            Reply(
                thinking=[THOUGHT_2],
                tool_calls=[
                    FakeCall.of("shell", {"command": "echo two >> effects.log"}, id="toolu_b")
                ],
            ),
            Reply(text="Both lines are in effects.log."),
        )
        env = _env(tmp_path, _write_config(tmp_path, srv.url))
        proc = _run(tmp_path, env, "write two lines")
        wait_until(lambda: len(srv.requests) >= 2, "the tool ran; the second call is in flight", 60)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)

        db = sqlite3.connect(tmp_path / "xclaw.db")
        sid = db.execute("SELECT session_id FROM sessions").fetchone()[0]
        db.close()
        resumed = _run(tmp_path, env, "--session", sid)
        out, _ = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, out
        assert "Both lines are in effects.log." in out
        # Folded in the terminal: one line with the thought's size and beginning.
        assert "▸ thinking (" in out and "The first line is there" in out

        # The server enforces the thinking rule; nothing was rejected, and what went back
        # was byte-exact what it signed.
        assert not srv.rejections, srv.rejections
        assert len(srv.requests) == 4
        for body in srv.requests[1:]:
            assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        after_resume = srv.requests[2]["messages"]
        first_turn = after_resume[1]
        assert first_turn["role"] == "assistant"
        kinds = [b["type"] for b in first_turn["content"]]
        assert kinds == ["redacted_thinking", "thinking", "text", "tool_use"]
        assert first_turn["content"][1]["thinking"] == THOUGHT_1
        assert first_turn["content"][1]["signature"] == thinking_signature(THOUGHT_1)
        # The second tool-use turn's request carries both thinking turns.
        last = srv.requests[3]["messages"]
        assert last[-2]["content"][0] == {
            "type": "thinking",
            "thinking": THOUGHT_2,
            "signature": thinking_signature(THOUGHT_2),
        }

    effects = (tmp_path / "workspaces" / sid / "effects.log").read_text().split()
    assert effects == ["one", "two"]
    store = open_store(str(tmp_path / "xclaw.db"))
    try:
        steps = store.record.steps(sid)
    finally:
        store.close()
    llm = [s for s in steps if s.step_type is StepType.LLM_CALL and s.output_data]
    recorded = llm[0].output_data["thinking"]
    assert [b["type"] for b in recorded] == ["redacted_thinking", "thinking"]
    assert recorded[1]["signature"] == thinking_signature(THOUGHT_1)
    assert KEY not in json.dumps([s.output_data for s in steps])
    # A rebuilt history (what rollback and fork also use) carries the blocks again.
    hist = build_history([s for s in steps if s.agent == MAIN_AGENT], read_only=lambda n: False)
    body = anthropic_request(
        "claude-test", LLMRequest(system="s", messages=tuple(hist.messages)), thinking_budget=2048
    )
    validate_anthropic_request(body)


def test_the_fake_rejects_a_tool_turn_without_its_thinking_as_the_real_api_does() -> None:
    """The counterpart: the rule really is enforced (what xclaw did before thinking was kept)."""
    call = ToolCall("toolu_x", "shell", {"command": "ls"})
    signed = ThinkingBlock("thinking", "look first", thinking_signature("look first"))
    result = ToolResultMessage("toolu_x", "shell", "a.txt")
    for thinking, error in (
        ((), "Expected `thinking` or `redacted_thinking`"),
        ((ThinkingBlock("thinking", "look first ", signed.signature),), "Invalid `signature`"),
    ):
        messages = (UserMessage("go"), AssistantMessage("", (call,), thinking=thinking), result)
        body = anthropic_request(
            "m", LLMRequest(system="s", messages=messages), thinking_budget=1024
        )
        with pytest.raises(InvalidRequest, match=error):
            validate_anthropic_request(body)
    ok = (UserMessage("go"), AssistantMessage("", (call,), thinking=(signed,)), result)
    validate_anthropic_request(
        anthropic_request("m", LLMRequest(system="s", messages=ok), thinking_budget=1024)
    )
