"""`finish`: the FinishStep value of a running step as tests write it (one line for what the
store's write values spell as a FinishStep holding a Completion, store/steps/writes.py)."""

from __future__ import annotations

from typing import Any

from xclaw.store.steps.model import Completion, Status, StepStatus
from xclaw.store.steps.writes import FinishStep


def finish(
    session_id: str,
    seq: int | str,
    *,
    output_data: Any = None,
    error_message: str | None = None,
    token_usage_prompt: int | None = 0,
    token_usage_completion: int | None = 0,
    session_status: Status | None = None,
    told: bool = False,
) -> FinishStep:
    """Step `seq` of the session finished: failed with `error_message` when one is given,
    else completed; the session moved to `session_status` in the same transaction; `told`:
    synced before a client hears of it (writes.SYNC, RESULT)."""
    done = Completion(
        status=StepStatus.COMPLETED if error_message is None else StepStatus.FAILED,
        output_data=output_data,
        error_message=error_message,
        token_usage_prompt=token_usage_prompt,
        token_usage_completion=token_usage_completion,
    )
    return FinishStep(
        session_id=session_id, step=seq, done=done, session_status=session_status, told=told
    )
