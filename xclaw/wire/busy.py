"""[wire] What a message does when it arrives while its session's run is busy (docs/protocol.md,
"Input while a run is busy"): pure values and the one rule that picks the policy.

`reject` refuses it (`busy`, as always); `queue` keeps it, durably, to run after the run in
order; `steer` gives it to the model at the run's next tool boundary; `interrupt` stops the
run as Stop does and runs it next. The policy comes from the message (a `busy` field, the
Python API's `send(..., busy=)`), else from the session (its metadata's `busy`, set with
`/busy POLICY`), else from the deployment (xclaw.yaml's `input.busy`, `reject` by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

BusyPolicy = Literal["reject", "queue", "steer", "interrupt"]
BUSY_POLICIES: tuple[str, ...] = get_args(BusyPolicy)
# The session metadata key a session's own policy is kept under.
SESSION_KEY = "busy"


def check_policy(value: str) -> BusyPolicy:
    """`value` as a policy; ValueError naming the four otherwise."""
    if value not in BUSY_POLICIES:
        raise ValueError(f"{value!r} is no busy policy: expected {', '.join(BUSY_POLICIES)}")
    return value  # type: ignore[return-value]


def session_policy(metadata: Mapping[str, Any] | None) -> BusyPolicy | None:
    """The session's own policy, if it set one (a value it does not know is ignored)."""
    found = (metadata or {}).get(SESSION_KEY)
    return found if isinstance(found, str) and found in BUSY_POLICIES else None  # type: ignore[return-value]


def policy_for(
    message: str | None, metadata: Mapping[str, Any] | None, deployment: BusyPolicy
) -> BusyPolicy:
    """The message's policy, else the session's, else the deployment's."""
    if message is not None:
        return check_policy(message)
    return session_policy(metadata) or deployment
