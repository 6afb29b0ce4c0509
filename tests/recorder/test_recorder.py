"""The recorder on a real SQLite file, watched from a second connection: the write-ahead row is
committed before `tool_started` returns (and so before the tool runs), a tool's result is on
disk before its frame goes out, LLM calls become begin/answer rows with their usage and
thinking, and a store write that fails ends the run with a clear error and runs nothing."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from xclaw.agent.loop import Agent
from xclaw.errors import StoreError
from xclaw.llm.base import LLMRequest, LLMResponse
from xclaw.llm.events import EventSink
from xclaw.llm.messages import ThinkingBlock, ToolCall, Usage
from xclaw.llm.prices import PriceTable
from xclaw.recorder.caller import StoreCaller
from xclaw.recorder.events import RecorderEvent, StatusChanged, StepCommitted, ToolChanged
from xclaw.recorder.recorder import Recorder
from xclaw.recorder.redact import Redactor
from xclaw.runtime.frames import event_frame
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import Status, StepStatus, StepType
from xclaw.tools.base import Tool, ToolContext, ToolResult

PRICES = PriceTable.with_overrides(None)
SECRET = "sk-test-0123456789abcdef"


class Outside:
    """A second connection to the database file: sees only what is committed."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)

    def rows(self, sid: str, step_type: str | None = None) -> list[tuple[Any, ...]]:
        sql = (
            "SELECT step_type, name, status, input_data, output_data, parent_step_id,"
            " token_usage_prompt, token_usage_completion, error_message, step_id"
            " FROM traces WHERE session_id=?"
        )
        args: list[Any] = [sid]
        if step_type is not None:
            sql += " AND step_type=?"
            args.append(step_type)
        return self.conn.execute(sql + " ORDER BY seq", args).fetchall()

    def status(self, sid: str) -> str:
        (status,) = self.conn.execute(
            "SELECT current_status FROM sessions WHERE session_id=?", (sid,)
        ).fetchone()
        return str(status)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Any:
    store = SQLiteStore(tmp_path / "rec.db")
    outside = Outside(tmp_path / "rec.db")
    yield store, outside
    outside.close()
    store.close()


def recorder(store: SQLiteStore, sid: str, frames: list[dict[str, Any]], **kw: Any) -> Recorder:
    return Recorder(
        db=StoreCaller(store.record),
        writes=store.record.write_stream(),
        session_id=sid,
        emit=lambda event: frames.append(event_frame(event, PRICES)),
        redact=Redactor([SECRET]),
        **kw,
    )


def answer(text: str = "", *calls: ToolCall, **kw: Any) -> LLMResponse:
    return LLMResponse(text=text, tool_calls=calls, model="fn:test", stop_reason="end", **kw)


def request() -> LLMRequest:
    return LLMRequest(system="", messages=())


async def test_write_ahead_row_is_committed_before_tool_started_returns(db: Any) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    frames: list[dict[str, Any]] = []
    rec = recorder(store, sid, frames)
    await rec.user_input("go")
    await rec.llm_started(request(), "fn:test", {})
    call = ToolCall("c1", "shell", {"command": "touch x"})
    await rec.llm_finished(answer("", call))
    # Nothing above was awaited to disk: the user row and the LLM call may still be queued.
    await rec.tool_started(call, read_only=False)
    # Returned: the running row, the session's Running status and every earlier write are
    # committed — another connection (another process) sees them.
    rows = outside.rows(sid)
    assert [(r[0], r[2]) for r in rows] == [
        ("user_input", "completed"),
        ("llm_call", "completed"),
        ("tool_call", "running"),
    ]
    assert outside.status(sid) == "Running"
    tool_row = rows[2]
    assert json.loads(tool_row[3]) == {"command": "touch x"}
    assert tool_row[5] == rows[1][9]  # hangs under the llm_call that asked for it
    # The live views hear of the running step only once it is committed.
    assert [f["state"] for f in frames if f["type"] == "tool"] == ["running"]


@dataclass
class PeekingTool(Tool):
    """A side-effecting tool that, when it starts, looks at the record from outside."""

    outside: Outside
    sid: str
    name: str = "peek"
    description: str = "peek"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    read_only: bool = False
    parallel_safe: bool = False
    seen: list[list[tuple[str, str]]] = field(default_factory=list)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        rows = self.outside.rows(self.sid, "tool_call")
        self.seen.append([(r[1], r[2]) for r in rows])
        return ToolResult("peeked")


class ScriptModel:
    name = "fn:test"

    def __init__(self, *turns: LLMResponse | Exception) -> None:
        self.turns = list(turns)

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        turn = self.turns.pop(0)
        if isinstance(turn, Exception):
            raise turn
        return turn


@dataclass
class Allow:
    kind: str = "allow"
    reason: str = ""
    confine: bool = False

    async def review(self, tool: Any, args: dict[str, Any], workspace: Any) -> Allow:
        return self


class NoHuman:
    async def decide(self, request: Any) -> Any:
        raise AssertionError("nobody should be asked")


def agent(
    store: SQLiteStore, sid: str, tmp: Path, model: ScriptModel, tool: Any, frames: list
) -> Agent:
    return Agent(
        model=model,  # type: ignore[arg-type]
        tools={tool.name: tool},
        policy=Allow(),  # type: ignore[arg-type]
        approver=NoHuman(),
        observer=recorder(store, sid, frames),
        context=ToolContext(workspace=tmp, session_id=sid),
    )


async def test_the_tool_runs_only_after_its_row_is_visible_to_another_connection(
    db: Any, tmp_path: Path
) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    tool = PeekingTool(outside, sid)
    model = ScriptModel(answer("", ToolCall("c1", "peek", {})), answer("done"))
    frames: list[dict[str, Any]] = []
    assert await agent(store, sid, tmp_path, model, tool, frames).run([], user_text="go") == "done"
    assert tool.seen == [[("peek", "running")]]
    assert [r[2] for r in outside.rows(sid, "tool_call")] == ["completed"]
    # The final answer and Success are committed before anyone hears of them.
    assert outside.status(sid) == "Success"
    assert frames[-1] == {"type": "status", "status": "Success"}


async def test_the_write_ahead_commit_is_synced_and_no_write_runs_on_the_loop(
    db: Any, tmp_path: Path
) -> None:
    """The row the tool saw was synced after its commit (on disk, not only in the page
    cache), and every statement of the write connection, over a whole run, ran on the
    store's writer thread — never on the event loop's."""
    store, outside = db
    sid = store.record.create_session().session_id
    statements: list[tuple[threading.Thread, str]] = []
    writer_conn = store.db._writer._conn
    writer_conn.set_trace_callback(lambda sql: statements.append((threading.current_thread(), sql)))
    sync_wal = store.db._writer._sync_wal

    def traced_sync() -> None:  # a durable commit's sync of the WAL shows in the trace too
        sync_wal()
        statements.append((threading.current_thread(), "SYNC"))

    store.db._writer._sync_wal = traced_sync
    synced_before_tool: list[bool] = []

    class Peek(PeekingTool):
        async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            # The last COMMIT before the tool started was followed by a sync of the WAL.
            after_commit = [sql for _, sql in statements if sql in ("COMMIT", "SYNC")]
            synced_before_tool.append(after_commit[-2:] == ["COMMIT", "SYNC"])
            return await super().run(args, ctx)

    tool = Peek(outside, sid)
    model = ScriptModel(answer("", ToolCall("c1", "peek", {})), answer("done"))
    frames: list[dict[str, Any]] = []
    assert await agent(store, sid, tmp_path, model, tool, frames).run([], user_text="go") == "done"
    assert tool.seen == [[("peek", "running")]] and synced_before_tool == [True]
    threads = {t for t, _ in statements}
    assert threads == {store.writer_thread}
    assert threading.current_thread() not in threads


async def test_a_tool_result_is_on_disk_before_its_frame_goes_out(db: Any) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    seen_at_frame: list[tuple[str, list[tuple[str, str, Any]]]] = []

    def emit(frame: dict[str, Any]) -> None:
        if frame["type"] in ("tool", "step"):
            rows = outside.rows(sid, "tool_call")
            seen_at_frame.append(
                (frame.get("state") or frame["step"]["status"], [(r[1], r[2], r[4]) for r in rows])
            )

    rec = Recorder(
        db=StoreCaller(store.record),
        writes=store.record.write_stream(),
        session_id=sid,
        emit=lambda e: emit(event_frame(e, PRICES)),
        redact=Redactor([SECRET]),
    )
    ok, bad = (
        ToolCall("c1", "shell", {"command": "true"}),
        ToolCall("c2", "shell", {"command": "false"}),
    )
    await rec.tool_started(ok, read_only=False)
    seen_at_frame.clear()
    await rec.tool_finished(ok, ToolResult("all good"))
    # The first frame about the result already finds the completed row, output included.
    assert seen_at_frame[0] == ("completed", [("shell", "completed", json.dumps("all good"))])
    await rec.tool_started(bad, read_only=False)
    seen_at_frame.clear()
    await rec.tool_finished(bad, ToolResult(f"exit 1: {SECRET}", is_error=True))
    state, rows = seen_at_frame[0]
    assert state == "failed" and rows[-1][:2] == ("shell", "failed")
    (error,) = outside.conn.execute(
        "SELECT error_message FROM traces WHERE session_id=? AND call_id='c2'", (sid,)
    ).fetchone()
    assert error == "exit 1: [REDACTED]"  # redacted before it is written, like everything


async def test_llm_calls_become_a_begin_row_then_its_answer_with_usage_and_thinking(
    db: Any,
) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    frames: list[dict[str, Any]] = []
    rec = recorder(store, sid, frames)
    await rec.user_input("hello")
    await rec.llm_started(request(), "fn:test", {"temperature": 0.2})
    await rec.settle()
    ((_, name, status, input_data, output_data, *_),) = outside.rows(sid, "llm_call")
    assert (name, status, output_data) == ("fn:test", "running", None)
    # Not the prompt: messages are rebuilt from the steps.
    assert json.loads(input_data) == {"model": "fn:test", "params": {"temperature": 0.2}}

    thinking = ThinkingBlock("thinking", thinking=f"the key is {SECRET}", signature="sig==")
    usage = Usage(
        prompt_tokens=120, completion_tokens=30, cache_read_tokens=100, reasoning_tokens=12
    )
    await rec.llm_finished(answer("Hi.", usage=usage, thinking=(thinking,), request_id="req_1"))
    ((_, _, status, _, output_data, _, prompt, completion, *_),) = outside.rows(sid, "llm_call")
    assert status == "completed" and (prompt, completion) == (120, 30)
    out = json.loads(output_data)
    assert out["text"] == "Hi." and out["tool_calls"] == [] and out["request_id"] == "req_1"
    assert out["usage"] == {
        "input": 120,
        "output": 30,
        "cache_read": 100,
        "cache_write": 0,
        "reasoning": 12,
    }
    # Thinking text is redacted; the provider's signature stays byte-exact.
    assert out["thinking"] == [
        {"type": "thinking", "thinking": "the key is [REDACTED]", "signature": "sig=="}
    ]
    assert outside.status(sid) == "Success"  # the final answer: committed with Success


async def test_a_failed_llm_call_is_kept_as_a_failed_row(db: Any) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    rec = recorder(store, sid, [])
    await rec.llm_started(request(), "fn:test", {})
    await rec.llm_failed(f"HTTP 500 with key {SECRET}")
    ((_, _, status, _, _, _, _, _, error, _),) = outside.rows(sid, "llm_call")
    assert status == "failed" and error == "HTTP 500 with key [REDACTED]"


def refuse_tool_rows(path: Path) -> None:
    """A real SQLite failure on the write-ahead row, from outside: the insert is aborted."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse_tools BEFORE INSERT ON traces WHEN NEW.step_type='tool_call'"
            " BEGIN SELECT RAISE(ABORT, 'the disk said no'); END"
        )


async def test_a_failing_write_ahead_row_stops_the_run_before_the_tool(
    db: Any, tmp_path: Path
) -> None:
    store, outside = db
    sid = store.record.create_session().session_id
    refuse_tool_rows(tmp_path / "rec.db")
    tool = PeekingTool(outside, sid)
    model = ScriptModel(answer("", ToolCall("c1", "peek", {})), answer("never"))
    frames: list[dict[str, Any]] = []
    a = agent(store, sid, tmp_path, model, tool, frames)
    with pytest.raises(StoreError, match="the disk said no"):
        await a.run([], user_text="go")
    assert tool.seen == []  # no side effect without its record
    assert not [f for f in frames if f["type"] == "tool"]
    # What came before the failed write stays written; the failed one left nothing.
    assert [(r[0], r[2]) for r in outside.rows(sid)] == [
        ("user_input", "completed"),
        ("llm_call", "completed"),
    ]
    # The queue is broken: a later write fails with the same error instead of running out of
    # order behind the hole.
    recorder_ = a.observer
    assert isinstance(recorder_, Recorder)
    with pytest.raises(StoreError, match="the disk said no"):
        await recorder_.alert("late", {})


async def test_a_failing_store_write_ends_the_run_failed_with_a_clear_error(make) -> None:
    h = make([{"text": "", "tool_calls": [{"name": "shell", "input": {"command": "touch made"}}]}])
    sid = await h.session()
    refuse_tool_rows(Path(h.settings.database))
    await asyncio.wait_for(h.turn(sid, "make a file"), timeout=60)
    (error,) = h.of("error")
    assert error["code"] == "store_error"
    assert "database error" in error["content"] and "the disk said no" in error["content"]
    assert h.of("status")[-1]["status"] == "Failed"
    assert h.store.record.get_session(sid).status is Status.FAILED
    assert not (h.root / sid / "made").exists()  # the command never ran
    assert [s.step_type for s in h.store.record.steps(sid)] == [
        StepType.USER_INPUT,
        StepType.LLM_CALL,
    ]
    assert all(s.status is not StepStatus.RUNNING for s in h.store.record.steps(sid))


async def test_the_recorder_emits_typed_events_and_the_runtime_shapes_the_frames(
    db: Any, tmp_path: Path
) -> None:
    """No wire frames out of the recorder: typed events, which `event_frame` turns into the
    frames of docs/protocol.md (secrets redacted in both)."""
    store, _ = db
    sid = store.record.create_session().session_id
    events: list[RecorderEvent] = []
    rec = Recorder(
        db=StoreCaller(store.record),
        writes=store.record.write_stream(),
        session_id=sid,
        emit=events.append,
        redact=Redactor([SECRET]),
    )
    call = ToolCall("c1", "shell", {"command": f"echo {SECRET}"})
    await rec.tool_started(call, read_only=True)
    await rec.tool_finished(call, ToolResult("ok"))
    assert all(not isinstance(e, dict) for e in events)
    tools = [e for e in events if isinstance(e, ToolChanged)]
    assert [t.state for t in tools] == ["running", "completed"]
    assert SECRET not in json.dumps(tools[0].input)
    assert event_frame(tools[1], PRICES) == {
        "type": "tool",
        "stepId": tools[1].step_id,
        "name": "shell",
        "input": tools[1].input,
        "state": "completed",
        "output": "ok",
        "callId": "c1",  # the assistant tool call it answers, as recorded
    }
    steps = [e for e in events if isinstance(e, StepCommitted)]
    assert event_frame(steps[-1], PRICES)["step"]["status"] == "completed"
    assert event_frame(StatusChanged(Status.SUCCESS), PRICES) == {
        "type": "status",
        "status": "Success",
    }


async def test_call_ids_holding_secrets_get_distinct_stand_ins_that_still_pair(db: Any) -> None:
    """A tool call's id comes from the provider (an OpenAI-compatible server may echo what
    the model wrote): one holding a secret is recorded as `redacted_<hex>`, the same in the
    llm_call's tool_calls and in the call's own step, and two such ids stay two, so the
    history rebuilt from the record still pairs every call with its result."""
    from xclaw.recorder.history import build_history

    other = "another-secret-42"
    store, outside = db
    sid = store.record.create_session().session_id
    frames: list[dict[str, Any]] = []
    rec = Recorder(
        db=StoreCaller(store.record),
        writes=store.record.write_stream(),
        session_id=sid,
        emit=lambda event: frames.append(event_frame(event, PRICES)),
        redact=Redactor([SECRET, other]),
    )
    calls = (
        ToolCall(f"call_{SECRET}", f"tool_{SECRET}", {}),
        ToolCall(other, "shell", {"command": "true"}),
    )
    await rec.user_input("go")
    await rec.llm_started(request(), "fn:test", {})
    await rec.llm_finished(answer("", *calls))
    await rec.tool_refused(calls[0], f"unknown tool {calls[0].name!r}")
    await rec.tool_started(calls[1], read_only=True)
    await rec.tool_finished(calls[1], ToolResult("ok"))
    await rec.settle()
    rows = store.record.steps(sid)
    llm = next(s for s in rows if s.step_type is StepType.LLM_CALL)
    recorded = [c["id"] for c in llm.output_data["tool_calls"]]
    tools = [s for s in rows if s.step_type is StepType.TOOL_CALL]
    assert [t.call_id for t in tools] == recorded
    assert len(set(recorded)) == 2 and all(i.startswith("redacted_") for i in recorded)
    # A stand-in that is still a valid tool name: it goes back to the provider in history.
    assert re.fullmatch(r"redacted_[0-9a-f]{16}", tools[0].name)
    assert [c["name"] for c in llm.output_data["tool_calls"]] == [tools[0].name, "shell"]
    assert tools[0].error_message == "unknown tool 'tool_[REDACTED]'"
    everything = json.dumps([outside.rows(sid), frames])
    assert SECRET not in everything and other not in everything
    hist = build_history(rows, read_only=lambda name: True)
    answered = [m.tool_call_id for m in hist.messages if hasattr(m, "tool_call_id")]
    assert answered == recorded


async def test_a_reply_streams_redacted_as_one_text(db: Any) -> None:
    """Deltas of one reply: a secret split across them never reaches a frame, even joined;
    what they held back goes out when the reply ends; sub-agents stream nothing."""
    store, _ = db
    sid = store.record.create_session().session_id
    frames: list[dict[str, Any]] = []
    rec = recorder(store, sid, frames)
    text = f"the key is {SECRET}. Bye"
    await rec.user_input("go")
    await rec.llm_started(request(), "fn:test", {})
    for i in range(0, len(text), 3):
        await rec.llm_delta(text[i : i + 3])
    await rec.llm_finished(answer(text))
    await rec.settle()
    deltas = [f["content"] for f in frames if f["type"] == "delta"]
    assert "".join(deltas) == "the key is [REDACTED]. Bye"
    # a reply that fails ends its stream too: a held tail goes out (never a whole secret)
    frames.clear()
    await rec.llm_started(request(), "fn:test", {})
    await rec.llm_delta("partial sk-te")
    await rec.llm_failed("provider went away")
    assert "".join(f["content"] for f in frames if f["type"] == "delta") == "partial sk-te"
