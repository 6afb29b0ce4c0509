"""Rebuilding messages from trace rows: always a valid provider history (valid history)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xclaw.llm.messages import AssistantMessage, ToolResultMessage, UserMessage
from xclaw.recorder.history import INTERRUPTED_RESULT, build_history, seed_history
from xclaw.store.steps.model import INTERRUPTED, Step, StepStatus, StepType

SID = "sess"


class Rows:
    def __init__(self) -> None:
        self.rows: list[Step] = []

    def add(self, kind: StepType, status: StepStatus = StepStatus.COMPLETED, **kw: Any) -> Step:
        seq = len(self.rows) + 1
        step = Step(
            step_id=f"{SID}:s{seq:04d}",
            session_id=SID,
            seq=seq,
            parent_step_id=None,
            step_type=kind,
            name=kw.pop("name", kind.value),
            status=status,
            **kw,
        )
        self.rows.append(step)
        return step

    def user(self, text: str) -> None:
        self.add(StepType.USER_INPUT, input_data=text, name="user")

    def llm(
        self,
        text: str = "",
        calls: tuple[tuple[str, str, dict[str, Any]], ...] = (),
        status: StepStatus = StepStatus.COMPLETED,
    ) -> None:
        out = {"text": text, "tool_calls": [{"id": i, "name": n, "input": a} for i, n, a in calls]}
        self.add(
            StepType.LLM_CALL,
            status,
            output_data=out if status is StepStatus.COMPLETED else None,
            name="m",
        )

    def tool(
        self,
        call_id: str,
        name: str,
        status: StepStatus = StepStatus.COMPLETED,
        out: str = "ok",
        err: str | None = None,
    ) -> None:
        self.add(
            StepType.TOOL_CALL,
            status,
            call_id=call_id,
            name=name,
            input_data={},
            output_data=out,
            error_message=err,
        )


READ_ONLY = {"read_file", "list_dir"}


def is_ro(name: str) -> bool:
    return name in READ_ONLY


def assert_valid(messages: list[Any]) -> None:
    """Every tool call answered by exactly one result, right after its assistant message."""
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            following = []
            j = i + 1
            while j < len(messages) and isinstance(messages[j], ToolResultMessage):
                following.append(messages[j].tool_call_id)
                j += 1
            assert sorted(following) == sorted(ids), (ids, following)
            i = j
            continue
        assert not isinstance(m, ToolResultMessage), "a tool result without its call"
        i += 1


def test_completed_steps_become_native_messages() -> None:
    r = Rows()
    r.user("count the files")
    r.llm("", (("c1", "shell", {"command": "ls"}),))
    r.tool("c1", "shell", out="a b")
    r.llm("there are 2 files")
    h = build_history(r.rows, read_only=is_ro)
    assert h.messages == [
        UserMessage("count the files"),
        AssistantMessage("", (h.messages[1].tool_calls[0],)),
        ToolResultMessage("c1", "shell", "a b"),
        AssistantMessage("there are 2 files"),
    ]
    assert seed_history(h.messages) == [
        {"role": "user", "content": "count the files"},
        {"role": "assistant", "content": "there are 2 files"},
    ]


def test_interrupted_side_effect_gets_a_synthetic_result_and_is_suspect() -> None:
    r = Rows()
    r.user("send the mail")
    r.llm("", (("c1", "shell", {"command": "mail x"}),))
    r.tool("c1", "shell", StepStatus.FAILED, out=None, err=INTERRUPTED)  # type: ignore[arg-type]
    h = build_history(r.rows, read_only=is_ro)
    assert h.messages[-1] == ToolResultMessage("c1", "shell", INTERRUPTED_RESULT, True)
    assert h.interrupted_unsafe == ["s0003"] and h.interrupted_retry == []
    assert h.suspect_calls == {'shell:{"command":"mail x"}'}
    assert_valid(h.messages)


def test_interrupted_read_only_call_is_left_pending_for_an_automatic_retry() -> None:
    r = Rows()
    r.user("read it")
    r.llm("", (("c1", "read_file", {"path": "a"}),))
    r.tool("c1", "read_file", StepStatus.RUNNING, out=None)  # type: ignore[arg-type]
    h = build_history(r.rows, read_only=is_ro)
    assert isinstance(h.messages[-1], AssistantMessage)  # no result: the loop re-runs it
    assert h.interrupted_retry == ["s0003"]


def test_an_interrupted_sub_agent_is_left_pending_to_continue_its_own_branch() -> None:
    r = Rows()
    r.user("delegate")
    r.llm("", (("c1", "spawn_agent", {"task": "t"}),))
    r.tool("c1", "spawn_agent", StepStatus.FAILED, out=None, err=INTERRUPTED)  # type: ignore[arg-type]

    def resumable(name):
        return name == "spawn_agent"

    h = build_history(r.rows, read_only=is_ro, resumable=resumable)
    assert isinstance(h.messages[-1], AssistantMessage)  # no synthetic result: it runs again
    assert h.interrupted_retry == ["s0003"] and h.interrupted_unsafe == []
    assert h.resumable_calls == {"c1": "s0003"} and h.suspect_calls == set()
    # Interrupted again on its second run: still the first attempt's branch.
    r.tool("c1", "spawn_agent", StepStatus.FAILED, out=None, err=INTERRUPTED)  # type: ignore[arg-type]
    assert build_history(r.rows, read_only=is_ro, resumable=resumable).resumable_calls == {
        "c1": "s0003"
    }
    # New input settles it like any other interrupted call; so does a tool that is not resumable.
    assert (
        build_history(r.rows, read_only=is_ro, resumable=resumable, new_input=True).resumable_calls
        == {}
    )
    plain = build_history(r.rows, read_only=is_ro)
    assert plain.resumable_calls == {} and plain.interrupted_unsafe == ["s0004"]
    assert_valid(
        build_history(r.rows, read_only=is_ro, resumable=resumable, new_input=True).messages
    )


def test_a_call_that_never_started_stays_pending_unless_new_input_follows() -> None:
    r = Rows()
    r.user("go")
    r.llm("", (("c1", "shell", {"command": "x"}),))
    assert isinstance(build_history(r.rows, read_only=is_ro).messages[-1], AssistantMessage)
    settled = build_history(r.rows, read_only=is_ro, new_input=True).messages
    assert isinstance(settled[-1], ToolResultMessage) and "never executed" in settled[-1].content
    assert_valid(settled)


def test_interrupted_and_failed_llm_calls_are_skipped() -> None:
    r = Rows()
    r.user("go")
    r.llm(status=StepStatus.FAILED)
    r.llm(status=StepStatus.RUNNING)
    h = build_history(r.rows, read_only=is_ro)
    assert h.messages == [UserMessage("go")]


def test_a_retried_call_supersedes_its_interrupted_attempt() -> None:
    r = Rows()
    r.user("go")
    r.llm("", (("c1", "read_file", {"path": "a"}),))
    r.tool("c1", "read_file", StepStatus.FAILED, out=None, err=INTERRUPTED)  # type: ignore[arg-type]
    r.tool("c1", "read_file", out="content")
    h = build_history(r.rows, read_only=is_ro)
    assert h.messages[-1] == ToolResultMessage("c1", "read_file", "content")
    assert h.interrupted_retry == []


def test_pending_approval_is_reported_for_asking_again() -> None:
    r = Rows()
    r.user("go")
    r.llm("", (("c1", "shell", {"command": "rm x"}),))
    r.add(StepType.SYSTEM_ALERT, StepStatus.RUNNING, name="approval", call_id="c1", input_data={})
    h = build_history(r.rows, read_only=is_ro)
    assert set(h.pending_approvals) == {"c1"}
    assert h.resume_state(with_note=True).pending_approvals == {"c1"}


_events = st.lists(
    st.sampled_from(
        [
            "user",
            "llm_text",
            "llm_calls",
            "llm_failed",
            "tool_ok",
            "tool_err",
            "tool_int",
            "tool_run",
        ]
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_events, st.booleans())
def test_any_record_rebuilds_into_a_valid_history(events: list[str], new_input: bool) -> None:
    """Whatever was recorded — crashes anywhere, retries, failures — the rebuilt history is
    valid for the providers (with new input following, or as the last turn)."""
    r = Rows()
    open_calls: list[tuple[str, str]] = []
    n = 0
    for ev in events:
        if ev == "user":
            r.user("u")
        elif ev == "llm_text":
            r.llm("t")
        elif ev == "llm_calls":
            n += 1
            calls = ((f"c{n}a", "shell", {"n": n}), (f"c{n}b", "read_file", {"n": n}))
            r.llm("", calls)
            open_calls = [(c[0], c[1]) for c in calls]
        elif ev == "llm_failed":
            r.llm(status=StepStatus.FAILED)
        elif open_calls:
            cid, name = open_calls.pop(0)
            status = {
                "tool_ok": StepStatus.COMPLETED,
                "tool_err": StepStatus.FAILED,
                "tool_int": StepStatus.FAILED,
                "tool_run": StepStatus.RUNNING,
            }[ev]
            r.tool(cid, name, status, err=INTERRUPTED if ev == "tool_int" else None)
    h = build_history(r.rows, read_only=is_ro, new_input=new_input)
    msgs = list(h.messages)
    if not new_input and msgs and isinstance(msgs[-1], (AssistantMessage, ToolResultMessage)):
        # The last turn may leave calls pending for the loop; answer them as the loop would.
        from xclaw.agent.loop import pending_tool_calls

        msgs += [ToolResultMessage(c.id, c.name, "ran") for c in pending_tool_calls(msgs)]
    assert_valid(msgs)


def test_images_get_their_bytes_back_and_a_lost_blob_becomes_a_note() -> None:
    from xclaw.llm.messages import ImageBlock, ToolResultMessage
    from xclaw.recorder.history import with_image_bytes

    kept, lost = ImageBlock("image/png", hash="a" * 64), ImageBlock("image/gif", hash="b" * 64)
    messages = [ToolResultMessage("c1", "view_file", "[image x.png]", images=(kept, lost))]
    asked: list[list[str]] = []

    def load(hashes: list[str]) -> dict[str, bytes]:
        asked.append(hashes)
        return {"a" * 64: b"PNGDATA"}

    (out,) = with_image_bytes(messages, load)
    assert asked == [["a" * 64, "b" * 64]]
    assert [(i.media_type, i.data) for i in out.images] == [("image/png", b"PNGDATA")]
    assert "no longer in the blob store" in out.content and "bbbbbbbbbbbb" in out.content
