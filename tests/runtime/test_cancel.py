"""Cancel (docs/protocol.md `cancel`): the step in flight stops now — its processes get SIGTERM,
then SIGKILL after a short grace; an LLM request in flight is abandoned — the step is recorded
failed "cancelled by the user", and the session waits for the next instruction (not Failed)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from tests.runtime.harness import sh
from tests.waiting import until
from xclaw.store.steps.model import Status, StepStatus, StepType, session_state


def _running(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (pids inside a sandbox's PID
    namespace mean nothing out here, so they are found by what they run)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if marker.encode() in cmd and state not in (b"Z", b"X") and b"pytest" not in cmd:
            found.append(int(entry))
    return found


async def test_cancel_kills_a_running_command_now_and_the_session_waits(make) -> None:
    # The command ignores SIGTERM, so only the SIGKILL after the grace stops it; its child
    # (a second sleep) must go too. Without cancel it would run for 60 s.
    h = make(
        [
            {
                "text": "",
                "tool_calls": [sh("trap '' TERM; sleep 61.25 & echo started > started; wait")],
            },
            {"text": "after the cancel"},
        ]
    )
    sid = await h.session()
    ws: Path = h.settings.workspace_root / sid
    await h.runtime.send(sid, "run something long")
    await until(lambda: (ws / "started").exists() and bool(_running("61.25")), "the command runs")
    t0 = time.monotonic()
    assert h.runtime.cancel(sid)
    await asyncio.wait_for(h.runtime.wait_idle(sid), 30)
    took = time.monotonic() - t0
    assert took < 15, f"cancel took {took:.1f} s"
    await until(lambda: not _running("61.25"), "the command is gone", 5)

    session = h.store.record.get_session(sid)
    assert session.status is Status.RUNNING and session.awaiting_input
    assert session_state(session, busy=False).key == "waiting"
    tool = [s for s in h.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL][-1]
    assert tool.status is StepStatus.FAILED and tool.error_message == "cancelled by the user"
    assert [f["state"] for f in h.of("tool")] == ["running", "failed"]
    assert h.of("status")[-1]["state"] == "waiting"
    assert any(f["content"].startswith("[cancel] run stopped") for f in h.of("notice"))
    assert not h.of("error")
    # Not resumed on reconnect (nothing to resume), and the next instruction just works.
    assert await h.runtime.resume_if_needed(sid) is False
    await h.turn(sid, "go on")
    assert h.of("reply")[-1]["content"] == "after the cancel"
    assert h.store.record.get_session(sid).status is Status.SUCCESS


async def test_cancel_aborts_an_llm_request_in_flight(make) -> None:
    h = make([{"text": "too late", "sleep": 60}, {"text": "next answer"}])
    sid = await h.session()
    await h.runtime.send(sid, "think hard")
    await until(
        lambda: any(s.step_type is StepType.LLM_CALL for s in h.store.record.steps(sid)),
        "a model call",
    )
    t0 = time.monotonic()
    assert h.runtime.cancel(sid)
    await asyncio.wait_for(h.runtime.wait_idle(sid), 30)
    assert time.monotonic() - t0 < 10
    llm = [s for s in h.store.record.steps(sid) if s.step_type is StepType.LLM_CALL][-1]
    assert llm.status is StepStatus.FAILED and llm.error_message == "cancelled by the user"
    session = h.store.record.get_session(sid)
    assert session.status is not Status.FAILED and session.awaiting_input
    assert not h.of("reply")


async def test_cancel_while_an_approval_waits_records_it_cancelled(make) -> None:
    h = make([{"text": "", "tool_calls": [sh("echo hi > f")]}, {"text": "ok"}], approval="ask")
    sid = await h.session()
    await h.runtime.send(sid, "write f")
    await h.first("approval_request", timeout=20)
    assert h.runtime.cancel(sid)
    await asyncio.wait_for(h.runtime.wait_idle(sid), 30)
    approval = [s for s in h.store.record.steps(sid) if s.name == "approval"][-1]
    assert approval.status is StepStatus.COMPLETED
    assert approval.output_data == {
        "approved": False,
        "why": "cancelled by the user",
        "by": {"kind": "cancel"},  # the record says what ended the wait
    }
    session = h.store.record.get_session(sid)
    assert session.status is Status.RUNNING and session.awaiting_input
    assert not (h.settings.workspace_root / sid / "f").exists()
