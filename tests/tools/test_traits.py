"""What a user-supplied tool's declared traits allow (xclaw/tools/traits.py): a source's
hints loosen approval and crash policy only when the source is trusted; `tool_policies`
decides over both."""

from __future__ import annotations

import pytest

from xclaw.tools.traits import ToolPolicy, ToolTraits, approval_for

SOURCE = "MCP server 'x'"


@pytest.mark.parametrize(
    ("read_only", "idempotent", "trusted", "retried"),
    [
        (True, False, True, True),
        (False, True, True, True),
        (False, False, True, False),
        (True, False, False, False),
        (False, True, False, False),
        (True, True, False, False),
        (False, False, False, False),
    ],
)
def test_hints_rerun_a_call_after_a_crash_only_from_a_trusted_source(
    read_only: bool, idempotent: bool, trusted: bool, retried: bool
) -> None:
    traits = ToolTraits(SOURCE, read_only=read_only, idempotent=idempotent, trusted=trusted)
    assert traits.retry_on_resume is retried
    assert traits.as_json()["resume"] == ("retry" if retried else "ask")
    hinted = read_only or idempotent
    assert bool(traits.resume_note) is (hinted and not trusted)


def test_the_note_says_which_hints_did_not_count() -> None:
    both = ToolTraits(SOURCE, read_only=True, idempotent=True)
    assert both.resume_note == (
        "MCP server 'x' is not trusted: its read-only and idempotent hints do not count"
    )


@pytest.mark.parametrize("trusted", [True, False])
def test_a_tool_policy_decides_over_trust(trusted: bool) -> None:
    retry = ToolTraits(SOURCE, trusted=trusted, policy=ToolPolicy(resume="retry"))
    ask = ToolTraits(SOURCE, read_only=True, trusted=trusted, policy=ToolPolicy(resume="ask"))
    assert retry.retry_on_resume and not ask.retry_on_resume
    assert retry.resume_note == "" and ask.resume_note == ""


def test_approval_and_crash_policy_agree_on_an_untrusted_read_only_tool() -> None:
    traits = ToolTraits(SOURCE, read_only=True)
    kind, reason = approval_for(traits, "mcp__x__peek", "ask")
    assert kind == "ask" and "is not trusted" in reason
    assert not traits.retry_on_resume and "is not trusted" in traits.resume_note


@pytest.mark.parametrize(("trusted", "marked"), [(True, False), (False, True)])
def test_an_untrusted_read_only_hint_does_not_spare_the_outside_effects_mark(
    trusted: bool, marked: bool
) -> None:
    """Rollback cannot undo what an untrusted "read-only" tool did: it is marked, as any tool
    whose effects nobody vouches for."""
    traits = ToolTraits(SOURCE, read_only=True, open_world=False, trusted=trusted)
    assert traits.trusted_read_only is trusted
    assert traits.outside_effects is marked
    assert traits.as_json()["outsideEffects"] is marked
