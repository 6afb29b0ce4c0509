"""MCP servers nobody here wrote, driven through the real runtime (SQLite store, scripted
model): calls recorded write-ahead as tool steps, results mapped, failing / crashing / silent
servers named and survived, annotations turned into approval and resume policy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.tools.mcp_servers.servers import (
    HttpEverything,
    children_running,
    everything,
    python_server,
    wait_for_pids,
)
from tests.waiting import until
from xclaw.store.steps.model import StepStatus, StepType
from xclaw.tools.approval import ApprovalPolicy
from xclaw.tools.mcp.config import parse_servers
from xclaw.tools.mcp.hub import McpHub

pytestmark = pytest.mark.slow


def servers(raw: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    return parse_servers(raw, env if env is not None else dict(os.environ))


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "input": args}


def tool_steps(h: Any, sid: str) -> list[Any]:
    return [s for s in h.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]


async def answer_approvals(h: Any, sid: str, approve: bool = True) -> list[dict[str, Any]]:
    """Answer every approval request as it comes until the run ends; returns the requests."""
    seen: list[dict[str, Any]] = []
    while h.runtime.is_busy(sid):
        for f in h.of("approval_request"):
            if f not in seen:
                seen.append(f)
                h.runtime.answer_approval(sid, f["stepId"], approve)
        await asyncio.sleep(0.02)
    return seen


@pytest.mark.parametrize("trusted", [True, False])
async def test_time_server_answer_is_recorded_as_a_completed_tool_step(make, trusted) -> None:
    h = make(
        [
            {
                "text": "Asking.",
                "tool_calls": [call("mcp__time__get_current_time", timezone="UTC")],
            },
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=servers(
            {"time": {"command": python_server("mcp-server-time"), "trusted": trusted}}
        ),
    )
    sid = await h.ask("what time is it in UTC?")
    [step] = tool_steps(h, sid)
    assert step.name == "mcp__time__get_current_time"
    assert step.input_data == {"timezone": "UTC"}
    assert step.status is StepStatus.COMPLETED
    answer = json.loads(step.output_data)
    assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00")
    # Read-only and closed-world: nothing is marked as an effect outside the workspace — if
    # the server is trusted; an untrusted server's read-only hint does not count.
    marked = [s for s in h.store.record.steps(sid) if s.name == "outside_effects"]
    assert bool(marked) is not trusted
    assert h.of("reply")[-1]["content"] == "Done."


async def test_untrusted_server_is_asked_even_for_read_only_tools_trusted_is_not(
    make, tmp_path: Path
) -> None:
    turns = [
        {"text": "Asking.", "tool_calls": [call("mcp__time__get_current_time", timezone="UTC")]},
        {"text": "Done."},
    ]
    cmd = python_server("mcp-server-time")
    h = make(turns, approval="ask", mcp_servers=servers({"time": {"command": cmd}}))
    sid = await h.session()
    await h.runtime.send(sid, "time?")
    asked = await answer_approvals(h, sid)
    assert [a["name"] for a in asked] == ["mcp__time__get_current_time"]
    assert "is not trusted" in asked[0]["reason"]
    assert tool_steps(h, sid)[0].status is StepStatus.COMPLETED
    await h.close()

    trusted = make(
        turns, approval="ask", mcp_servers=servers({"time": {"command": cmd, "trusted": True}})
    )
    sid2 = await trusted.ask("time?")
    assert trusted.of("approval_request") == []
    assert tool_steps(trusted, sid2)[0].status is StepStatus.COMPLETED


async def test_git_server_annotations_choose_approval_and_resume(tmp_path: Path) -> None:
    """mcp-server-git's own annotations: git_status read-only, git_commit not, git_reset
    destructive. Untrusted annotations only ever add questions, and never have a call run
    again after a crash."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # noqa: ASYNC221 - setup
    cmd = python_server("mcp-server-git")

    async def decisions(
        trusted: bool, overrides: dict[str, Any] | None = None
    ) -> dict[tuple[str, str], str]:
        from xclaw.tools.traits import ToolPolicy

        hub = McpHub(
            servers(
                {"git": {"command": cmd, "args": ["--repository", str(repo)], "trusted": trusted}}
            ),
            {name: ToolPolicy.model_validate(p) for name, p in (overrides or {}).items()},
        )
        try:
            assert await hub.start() == {}
            tools = {t.name: t for t in hub.tools()}
            out = {}
            for mode in ("ask", "auto-edits", "yolo"):
                policy = ApprovalPolicy(mode)
                for name in ("git_status", "git_commit", "git_reset"):
                    out[(mode, name)] = policy.decide(tools[f"mcp__git__{name}"], {}).kind
            out[("resume", "git_status")] = str(tools["mcp__git__git_status"].retry_on_resume)
            out[("resume", "git_commit")] = str(tools["mcp__git__git_commit"].retry_on_resume)
            out[("outside", "git_status")] = str(tools["mcp__git__git_status"].outside_effects)
            out[("outside", "git_commit")] = str(tools["mcp__git__git_commit"].outside_effects)
            return out
        finally:
            await hub.close()

    untrusted = await decisions(False)
    assert untrusted[("ask", "git_status")] == "ask"  # its readOnlyHint does not loosen
    assert untrusted[("auto-edits", "git_status")] == "ask"
    assert untrusted[("yolo", "git_status")] == "allow"
    assert untrusted[("yolo", "git_reset")] == "ask"  # destructive: always asked
    # Nor what happens after a crash: its read-only git_status is asked again, may-have-run.
    assert untrusted[("resume", "git_status")] == "False"
    assert untrusted[("resume", "git_commit")] == "False"
    # Nor the outside-effects mark: nobody vouches that its "read-only" tool is.
    assert untrusted[("outside", "git_status")] == "True"
    assert untrusted[("outside", "git_commit")] == "True"

    trusted = await decisions(True)
    assert trusted[("ask", "git_status")] == "allow"
    assert trusted[("auto-edits", "git_status")] == "allow"
    assert trusted[("ask", "git_commit")] == "ask"
    assert trusted[("yolo", "git_reset")] == "ask"
    assert trusted[("resume", "git_status")] == "True"  # read-only: retried after a crash
    assert trusted[("resume", "git_commit")] == "False"
    assert trusted[("outside", "git_status")] == "False"

    overridden = await decisions(
        True,
        {
            "mcp__git__git_status": {"approval": "ask"},
            "mcp__git__git_reset": {"approval": "allow"},
            "mcp__git__git_commit": {"resume": "retry"},
        },
    )
    assert overridden[("ask", "git_status")] == "ask"
    assert overridden[("yolo", "git_reset")] == "allow"
    assert overridden[("resume", "git_commit")] == "True"


async def test_a_server_that_cannot_start_is_named_and_the_others_keep_working(make) -> None:
    h = make(
        [
            {
                "text": "Both.",
                "tool_calls": [
                    call("mcp__broken__anything"),
                    call("mcp__time__get_current_time", timezone="UTC"),
                ],
            },
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=servers(
            {
                "broken": {"command": "xclaw-no-such-mcp-server"},
                "time": {"command": python_server("mcp-server-time")},
            }
        ),
    )
    sid = await h.ask("go")
    notices = [f["content"] for f in h.of("notice")]
    assert any(
        "'broken'" in n and "xclaw-no-such-mcp-server" in n and "failed to start" in n
        for n in notices
    ), notices
    broken, ok = tool_steps(h, sid)
    assert (
        broken.status is StepStatus.FAILED
        and "unknown tool 'mcp__broken__anything'" in broken.output_data
    )
    assert ok.status is StepStatus.COMPLETED
    assert h.of("reply")[-1]["content"] == "Done."


async def test_everything_server_results_map_images_structured_content_and_errors(make) -> None:
    h = make(
        [
            {
                "text": "All kinds.",
                "tool_calls": [
                    call("mcp__ev__get-tiny-image"),
                    call("mcp__ev__get-structured-content", location="New York"),
                    call("mcp__ev__get-sum", a=2, b=40),
                    call("mcp__ev__get-sum", a="two", b=40),
                ],
            },
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=servers({"ev": {"command": everything()}}),
    )
    sid = await h.ask("go")
    image, structured, good_sum, bad_sum = tool_steps(h, sid)
    assert image.status is StepStatus.COMPLETED
    # The image went to the model as an image block: bytes in the blob store, hash in the step.
    assert "[image image/png" in image.output_data["content"]
    [ref] = image.output_data["images"]
    assert ref["media_type"] == "image/png"
    png = h.store.snapshots.get_blobs([ref["hash"]])[ref["hash"]]
    assert png.startswith(b"\x89PNG") and len(png) == ref["size"]
    assert json.loads(structured.output_data)["conditions"]
    assert "42" in good_sum.output_data and good_sum.status is StepStatus.COMPLETED
    assert bad_sum.status is StepStatus.FAILED  # the server's isError (or a protocol error)


async def test_call_is_written_ahead_and_a_server_that_crashes_mid_call_is_restarted(make) -> None:
    h = make(
        [
            {
                "text": "Long.",
                "tool_calls": [
                    call("mcp__ev__trigger-long-running-operation", duration=120, steps=4)
                ],
            },
            {"text": "Again.", "tool_calls": [call("mcp__ev__echo", message="after the crash")]},
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=servers({"ev": {"command": everything()}}),
    )
    sid = await h.session()
    await h.runtime.send(sid, "go")

    def long_call_runs() -> bool:
        steps = tool_steps(h, sid)
        return bool(steps) and steps[0].status is StepStatus.RUNNING

    # Write-ahead: the running row is in the database while the server works on the call.
    await until(long_call_runs, "the long call's running row", timeout=60)
    # The row is written before the request is sent: a kill that lands in between (seen on a
    # loaded machine) only makes the call start the server afresh and run there for 120 s.
    # So the server is killed until the long call fails — one kill, unless the first came
    # early; never once it has failed (the next call's fresh server is not to be killed).
    killed: list[int] = []

    async def kill_the_server() -> bool:
        if not long_call_runs():
            return True
        for pid in children_running("mcp-server-everything", parent=os.getpid()):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        with contextlib.suppress(AssertionError):
            await until(lambda: not long_call_runs(), "the long call ends", timeout=2)
        return not long_call_runs()

    await until(kill_the_server, "the call fails with its server killed", timeout=60)
    await asyncio.wait_for(h.runtime.wait_idle(sid), 60)
    long_call, echo = tool_steps(h, sid)
    assert long_call.status is StepStatus.FAILED
    assert "MCP server 'ev' stopped during the call" in long_call.output_data
    assert echo.status is StepStatus.COMPLETED and "after the crash" in echo.output_data
    restarted = children_running("mcp-server-everything", parent=os.getpid())
    assert killed and restarted and not set(restarted) & set(killed)


async def test_a_server_that_never_answers_times_out_and_is_replaced(make) -> None:
    h = make(
        [
            {"text": "Ask.", "tool_calls": [call("mcp__ev__echo", message="one")]},
            {"text": "Ask again.", "tool_calls": [call("mcp__ev__echo", message="two")]},
            {"text": "Done."},
        ],
        approval="yolo",
        mcp_servers=servers({"ev": {"command": everything(), "timeout_s": 3}}),
    )
    await h.runtime.toolbox.prepare()  # started: now freeze it, so it never answers
    [frozen] = wait_for_pids("mcp-server-everything", parent=os.getpid())
    os.kill(frozen, signal.SIGSTOP)
    try:
        sid = await h.ask("go")
        first, second = tool_steps(h, sid)
        assert first.status is StepStatus.FAILED
        assert "MCP server 'ev' did not answer 'echo' within 3 s" in first.output_data
        assert second.status is StepStatus.COMPLETED and "Echo: two" in second.output_data
        assert frozen not in children_running("mcp-server-everything", parent=os.getpid())
    finally:
        if frozen in children_running("mcp-server-everything"):
            os.kill(frozen, signal.SIGKILL)


async def test_effects_outside_the_workspace_are_marked_in_the_record(make) -> None:
    h = make(
        [
            {
                "text": "Toggle.",
                "tool_calls": [
                    call("mcp__ev__toggle-simulated-logging"),
                    call("mcp__ev__echo", message="x"),
                ],
            },
            {"text": "Done."},
        ],
        approval="yolo",
        # Trusted, so that its read-only hint counts: echo is read-only and closed-world.
        mcp_servers=servers({"ev": {"command": everything(), "trusted": True}}),
    )
    sid = await h.ask("go")
    steps = h.store.record.steps(sid)
    marks = [
        s for s in steps if s.step_type is StepType.SYSTEM_ALERT and s.name == "outside_effects"
    ]
    assert [m.input_data["tool"] for m in marks] == ["mcp__ev__toggle-simulated-logging"]
    toggle = next(s for s in steps if s.name == "mcp__ev__toggle-simulated-logging")
    assert marks[0].input_data["callId"] == toggle.call_id and marks[0].seq < toggle.seq
    # It hangs beside the call it marks (under the same LLM step) and carries its call id.
    assert marks[0].call_id == toggle.call_id
    assert marks[0].parent_step_id == toggle.parent_step_id


async def test_streamable_http_server_and_env_values_are_redacted(make) -> None:
    http = HttpEverything()
    try:
        h = make(
            [
                {"text": "Over HTTP.", "tool_calls": [call("mcp__web__echo", message="over http")]},
                {"text": "Env.", "tool_calls": [call("mcp__local__get-env")]},
                {"text": "Done."},
            ],
            approval="yolo",
            mcp_servers=servers(
                {
                    "web": {"url": http.url, "headers": {"X-Test": "${XCLAW_T_HEADER}"}},
                    "local": {
                        "command": everything(),
                        "env": {"XCLAW_T_SECRET": "${XCLAW_T_VALUE}"},
                    },
                },
                {"XCLAW_T_HEADER": "h", "XCLAW_T_VALUE": "s3cr3t-value-from-env"},
            ),
        )
        sid = await h.ask("go")
        echo, env = tool_steps(h, sid)
        assert echo.status is StepStatus.COMPLETED and "Echo: over http" in echo.output_data
        assert env.status is StepStatus.COMPLETED
        assert "XCLAW_T_SECRET" in env.output_data  # the server saw the variable...
        assert "s3cr3t-value-from-env" not in env.output_data  # ...the record never the value
        assert "[REDACTED]" in env.output_data
        await h.close()  # (closing twice is harmless) before the HTTP server goes away
    finally:
        http.stop()


async def test_a_server_that_died_between_calls_is_started_again_for_the_next_one() -> None:
    hub = McpHub(servers({"time": {"command": python_server("mcp-server-time")}}))
    try:
        assert await hub.start() == {}
        [tool] = [t for t in hub.tools() if t.name == "mcp__time__get_current_time"]
        [pid] = wait_for_pids("mcp-server-time", parent=os.getpid())
        os.kill(pid, signal.SIGKILL)
        deadline = asyncio.get_running_loop().time() + 30
        # (xclaw notices the closed pipe on its own; a call racing the death would fail)
        while hub.connections["time"].alive:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        from xclaw.tools.base import ToolContext

        result = await tool.run(
            {"timezone": "UTC"}, ToolContext(workspace=Path("."), session_id="s")
        )
        assert not result.is_error, result.content
        assert json.loads(result.content)["timezone"] == "UTC"
        assert hub.connections["time"].starts == 2
    finally:
        await hub.close()


async def test_a_server_that_hangs_on_start_costs_its_timeout_once_not_every_run() -> None:
    """`sleep` never answers the MCP handshake: the first start gives up after
    startup_timeout_s and names the server; the next run within 30 s does not wait again."""
    hub = McpHub(servers({"mute": {"command": "sleep", "args": ["300"], "startup_timeout_s": 2}}))
    loop = asyncio.get_running_loop()
    try:
        began = loop.time()
        first = await hub.start()
        assert 1.5 < loop.time() - began < 30
        assert "MCP server 'mute' (sleep 300) did not start within 2 s" in first["mute"]
        began = loop.time()
        second = await hub.start()
        assert loop.time() - began < 1.5
        assert "did not start within 2 s (tried again in" in second["mute"]
    finally:
        await hub.close()
    assert not children_running("sleep 300", parent=os.getpid())


def test_tool_names_are_ones_the_providers_accept() -> None:
    from xclaw.tools.mcp.tool import tool_name

    assert tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert tool_name("ev", "get-tiny-image") == "mcp__ev__get-tiny-image"
    assert tool_name("fs", "read.file v2") == "mcp__fs__read_file_v2"
    assert len(tool_name("server", "x" * 100)) == 64


async def test_a_server_printing_garbage_on_stdout_is_one_clear_line_not_tracebacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that writes non-JSON-RPC lines on stdout: the SDK's per-line tracebacks do not
    reach the terminal; the log gets one line naming the server, and when the server never
    answers the start-up error quotes what it wrote. A banner before a working server is
    harmless (the server starts)."""
    junk = tmp_path / "junk.py"
    junk.write_text("import sys, time\nprint('hello I am not json', flush=True)\ntime.sleep(300)\n")
    banner = tmp_path / "banner.py"
    banner.write_text(
        "import os, sys\nprint('Starting time server v1.0', flush=True)\n"
        f"os.execv({python_server('mcp-server-time')!r}, ['mcp-server-time'])\n"
    )
    import sys

    hub = McpHub(
        servers(
            {
                "junk": {"command": sys.executable, "args": [str(junk)], "startup_timeout_s": 3},
                "banner": {"command": sys.executable, "args": [str(banner)], "trusted": True},
            }
        )
    )
    caplog.set_level(logging.DEBUG)
    try:
        failures = await hub.start()
        assert set(failures) == {"junk"}
        assert "MCP server 'junk'" in failures["junk"]
        assert "hello I am not json" in failures["junk"], failures["junk"]
        assert any(t.name == "mcp__banner__get_current_time" for t in hub.tools())
    finally:
        await hub.close()
    assert not [r for r in caplog.records if r.exc_info], [
        r.getMessage() for r in caplog.records if r.exc_info
    ]
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "xclaw.mcp" and "not JSON-RPC" in r.getMessage()
    ]
    assert any("server=junk" in m and "hello I am not json" in m for m in lines), lines
    assert any("server=banner" in m and "Starting time server" in m for m in lines), lines
