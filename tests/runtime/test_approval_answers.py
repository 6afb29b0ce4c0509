"""Who answered an approval, as the record keeps it (xclaw/people/answered_by.py): what ends a wait
other than an answer — a new message, the run failing — says so in the approval step."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.runtime.harness import Harness, sh
from xclaw.store.steps.model import StepStatus


async def test_a_new_message_instead_of_an_answer_is_recorded_as_such(tmp_path: Path) -> None:
    turns = [{"text": "", "tool_calls": [sh("echo hi > f")]}, {"text": "moved on"}]
    first = Harness(tmp_path, turns, approval="ask")
    sid = await first.session()
    await first.runtime.send(sid, "write f")
    await first.first("approval_request", timeout=20)
    await first.close()  # the process ends: the approval stays pending (asked again)

    second = Harness(tmp_path, [{"text": "moved on"}], approval="ask")
    try:
        waiting = [s for s in second.store.record.steps(sid) if s.name == "approval"]
        assert [s.status for s in waiting] == [StepStatus.RUNNING]
        await second.session(sid)
        await second.runtime.send(sid, "never mind, just say hi")
        await asyncio.wait_for(second.runtime.wait_idle(sid), 30)
        (approval,) = [s for s in second.store.record.steps(sid) if s.name == "approval"]
        assert approval.status is StepStatus.FAILED and approval.error_message == "interrupted"
        assert approval.output_data == {
            "approved": False,
            "why": "not answered: a new message came instead",
            "by": {"kind": "new_input"},
        }
    finally:
        await second.close()
