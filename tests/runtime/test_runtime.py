"""The runtime in-process: real SQLite store, real tools, the scripted model."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.runtime.harness import sh
from tests.writes import finish
from xclaw.errors import SessionBusy, SessionNotFound, StepNotFound
from xclaw.people.teams import Actor, Identity, UserRole
from xclaw.store.steps.model import MAIN_AGENT, Status, StepStatus, StepType
from xclaw.store.steps.writes import AddStep, BeginStep


def member(name: str) -> Actor:
    return Actor(Identity(name, UserRole.MEMBER), "websocket")


async def test_multi_step_task_is_recorded_as_a_tree_and_streams_frames(make) -> None:
    h = make(
        [
            {"text": "Creating a file.", "tool_calls": [sh("echo one >> effects.log")]},
            {"text": "", "tool_calls": [{"name": "read_file", "input": {"path": "effects.log"}}]},
            {"text": "The file says one."},
        ]
    )
    sid = await h.session()
    await h.turn(sid, "make a file")
    assert h.of("reply")[-1]["content"] == "The file says one."
    assert "".join(f["content"] for f in h.of("delta")).endswith("The file says one.")
    assert [f["state"] for f in h.of("tool")] == ["running", "completed", "running", "completed"]
    # Clients see a tool's result before the text of the answer that follows it.
    last_tool = max(i for i, f in enumerate(h.frames) if f["type"] == "tool")
    first_answer_delta = min(
        i for i, f in enumerate(h.frames) if f["type"] == "delta" and "says" in f["content"]
    )
    assert last_tool < first_answer_delta
    assert all(f["sessionId"] == sid for f in h.frames)
    assert h.store.record.get_session(sid).status is Status.SUCCESS
    assert (h.settings.workspace_root / sid / "effects.log").read_text() == "one\n"

    steps = h.store.record.steps(sid)
    kinds = [(s.step_type.value, s.name) for s in steps]
    assert kinds[0] == ("user_input", "user")
    assert ("tool_call", "shell") in kinds and ("tool_call", "read_file") in kinds
    by_id = {s.step_id: s for s in steps}
    for s in steps:
        if s.step_type is StepType.TOOL_CALL:
            assert by_id[s.parent_step_id].step_type is StepType.LLM_CALL  # the trace tree
        if s.step_type is StepType.LLM_CALL:
            assert by_id[s.parent_step_id].step_type is StepType.USER_INPUT
    llm = [s for s in steps if s.step_type is StepType.LLM_CALL]
    assert all(s.token_usage_completion >= 0 and s.end_time is not None for s in llm)
    # Linear storage: an llm_call row holds its parameters and output, not the prompt.
    assert "messages" not in json.dumps(llm[-1].input_data).replace('"messages":', "")


async def test_history_frame_speaks_the_tutorial_format(make) -> None:
    h = make([{"text": "", "tool_calls": [sh("echo hi")]}, {"text": "said hi"}])
    sid = await h.session()
    await h.turn(sid, "say hi")
    frame = h.runtime.history_frame(sid)
    assert json.loads(frame["content"]) == [
        {"role": "user", "content": "say hi"},
        {"role": "assistant", "content": "said hi"},
    ]
    kinds = [m["kind"] for m in frame["messages"]]
    assert kinds == ["user", "assistant", "tool_result", "assistant"]
    assert frame["messages"][2]["stepId"].startswith("s0")


async def test_approval_over_the_runtime_pauses_and_resumes(make) -> None:
    h = make(
        [{"text": "", "tool_calls": [sh("echo x > made.txt")]}, {"text": "made it"}], approval="ask"
    )
    sid = await h.session()
    await h.runtime.send(sid, "make it")
    await h.first("approval_request")
    req = h.of("approval_request")[0]
    assert req["name"] == "shell" and req["maybeRepeated"] is False
    assert h.store.record.get_session(sid).status is Status.PAUSED
    assert h.runtime.pending_approval_frames(sid)[0]["stepId"] == req["stepId"]
    with pytest.raises(StepNotFound):
        h.runtime.answer_approval(sid, "s0999", True)
    h.runtime.answer_approval(sid, req["stepId"], True)
    await h.runtime.wait_idle(sid)
    assert h.of("reply")[-1]["content"] == "made it"
    statuses = [f["status"] for f in h.of("status")]
    assert "Paused" in statuses and statuses[-1] == "Success"
    approval = h.store.record.get_step(sid, req["stepId"])
    assert approval.status is StepStatus.COMPLETED and approval.output_data["approved"] is True


async def test_denial_reaches_the_model_and_nothing_runs(make) -> None:
    h = make(
        [{"text": "", "tool_calls": [sh("echo x > made.txt")]}, {"text": "ok, not doing it"}],
        approval="ask",
    )
    sid = await h.session()
    await h.runtime.send(sid, "make it")
    await h.first("approval_request")
    h.runtime.answer_approval(sid, h.of("approval_request")[0]["stepId"], False)
    await h.runtime.wait_idle(sid)
    assert not (h.settings.workspace_root / sid / "made.txt").exists()
    refused = [s for s in h.store.record.steps(sid) if s.step_type is StepType.TOOL_CALL]
    assert refused[0].status is StepStatus.FAILED and "denied" in refused[0].error_message


async def test_one_driver_per_session(make) -> None:
    h = make([{"text": "", "tool_calls": [sh("sleep 0.3")]}, {"text": "slept"}])
    sid = await h.session()
    await h.runtime.send(sid, "sleep")
    with pytest.raises(SessionBusy):
        await h.runtime.send(sid, "again")
    assert await h.runtime.resume_if_needed(sid) is False  # a refresh just attaches
    with pytest.raises(SessionBusy):
        await h.runtime.rollback(sid, "s0001")
    await h.runtime.wait_idle(sid)
    assert len([s for s in h.store.record.steps(sid) if s.step_type is StepType.USER_INPUT]) == 1


async def test_two_first_messages_at_once_leave_one_driver_holding_its_place(make) -> None:
    """Two people send the first message to one new id at the same moment (a client-chosen
    id): one writes it; the other is refused and takes nothing with it — before, its refusal
    unclaimed the place the winner's run held, so the winner's approval was no longer found
    and a later message started a second driver."""
    h = make(
        [{"text": "", "tool_calls": [sh("echo x > made.txt")]}, {"text": "made it"}], approval="ask"
    )
    teams = h.store.teams
    for name in ("alice", "bob"):
        teams.add_user(name, UserRole.MEMBER, None)
    sid = "cli"
    h.runtime.subscribe(sid, h.frames.append)
    sent = await asyncio.gather(
        *(
            h.runtime.send(sid, f"make it, {name}", create=True, actor=member(name))
            for name in ("alice", "bob")
        ),
        return_exceptions=True,
    )
    refused = [r for r in sent if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], SessionBusy | SessionNotFound), sent
    winner = teams.session_owner(sid)
    assert winner in ("alice", "bob")
    req = await h.first("approval_request")
    assert h.runtime.runs.get(sid) is not None  # the winner's run holds its place
    h.runtime.answer_approval(sid, req["stepId"], True)
    await h.runtime.wait_idle(sid)
    assert h.of("reply")[-1]["content"] == "made it"
    users = [s.output_data for s in h.store.record.steps(sid) if s.step_type is StepType.USER_INPUT]
    assert [u["by"]["user"] for u in users] == [winner]


async def test_llm_failure_fails_the_session_which_can_continue_later(make) -> None:
    h = make([{"fail": "provider exploded"}, {"text": "back again"}])
    sid = await h.session()
    await h.turn(sid, "try")
    assert h.of("error")[-1]["code"] == "llm_error"
    assert "provider exploded" in h.of("error")[-1]["content"]
    assert h.store.record.get_session(sid).status is Status.FAILED
    # The failed call is not an assistant message, so the script serves turn 0 again; make
    # the next turn succeed by sending a new message (Failed -> Running is allowed).
    h.model.script = type(h.model.script)(turns=h.model.script.turns[1:], subagent_turns=None)
    await h.turn(sid, "try again")
    assert h.of("reply")[-1]["content"] == "back again"
    assert h.store.record.get_session(sid).status is Status.SUCCESS


async def test_max_iterations_fails_with_a_clear_error(make) -> None:
    h = make([{"text": "", "tool_calls": [sh("true")]}] * 5, max_iterations=3)
    sid = await h.session()
    await h.turn(sid, "loop")
    assert h.of("error")[-1]["code"] == "max_iterations"
    assert h.store.record.get_session(sid).status is Status.FAILED
    alerts = [s for s in h.store.record.steps(sid) if s.step_type is StepType.SYSTEM_ALERT]
    assert alerts[-1].name == "max_iterations"


async def test_cancel_stops_the_run_and_keeps_the_session_usable(make) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [sh("sleep 5")]},
            {"text": "", "tool_calls": [sh("echo after >> a")]},
            {"text": "done"},
        ]
    )
    sid = await h.session()
    await h.runtime.send(sid, "go")
    await h.first("tool")  # the first command runs
    assert h.runtime.cancel(sid)
    await h.runtime.wait_idle(sid)
    assert not (h.settings.workspace_root / sid / "a").exists()
    assert any("[cancel]" in f["content"] for f in h.of("notice"))
    # A cancelled session waits for the next instruction; it is no longer Failed.
    session = h.store.record.get_session(sid)
    assert session.status is Status.RUNNING and session.awaiting_input
    assert h.runtime.cancel(sid) is False


async def test_rollback_forgets_deleted_steps(make) -> None:
    h = make(
        [
            {"text": "first answer"},
            {"text": "second answer"},
            {"text": "answer after rollback"},
        ]
    )
    sid = await h.session()
    await h.turn(sid, "remember the word BANANA")
    await h.turn(sid, "what word?")
    second_user = [s for s in h.store.record.steps(sid) if s.step_type is StepType.USER_INPUT][1]
    result = await h.runtime.rollback(sid, second_user.display_id)
    assert result.session.status is Status.RUNNING and result.session.awaiting_input
    assert await h.runtime.resume_if_needed(sid) is False  # waits for a new instruction
    await h.turn(sid, "a new instruction")
    users = [s.input_data for s in h.store.record.steps(sid) if s.step_type is StepType.USER_INPUT]
    assert users == ["remember the word BANANA", "a new instruction"]
    assert "what word?" not in json.dumps(h.runtime.history_frame(sid))
    # The script is driven by the history the model sees: with the deleted turn gone, the
    # model is at its second turn again.
    assert h.of("reply")[-1]["content"] == "second answer"


async def test_secrets_never_reach_the_record(make, monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "hunter2-very-secret")
    h = make(
        [
            {"text": "", "tool_calls": [sh("echo hunter2-very-secret")]},
            {"text": "the password is hunter2-very-secret"},
        ],
        secret_env=("MY_SERVICE_PASSWORD",),
    )
    sid = await h.session()
    await h.turn(sid, "print it")
    dump = json.dumps(
        [s.input_data for s in h.store.record.steps(sid)]
        + [s.output_data for s in h.store.record.steps(sid)]
    )
    assert "hunter2-very-secret" not in dump and "[REDACTED]" in dump
    assert "hunter2-very-secret" not in json.dumps(h.frames)


async def test_parallel_sub_agents_form_branches_of_the_tree(make) -> None:
    def spawn(task):
        return {"name": "spawn_agent", "input": {"task": task}}

    h = make(
        [
            {"text": "", "tool_calls": [spawn("count apples"), spawn("count pears")]},
            {"text": "both counted"},
        ],
        script_extra={
            "subagent": {
                "turns": [
                    {"text": "", "tool_calls": [sh("echo sub >> sub.log")]},
                    {"text": "counted"},
                ]
            }
        },
    )
    sid = await h.session()
    await h.turn(sid, "count fruit")
    assert h.of("reply")[-1]["content"] == "both counted"
    steps = h.store.record.steps(sid)
    by_id = {s.step_id: s for s in steps}
    spawns = [s for s in steps if s.name == "spawn_agent"]
    assert len(spawns) == 2 and all(s.status is StepStatus.COMPLETED for s in spawns)
    sub_agents = {s.agent for s in steps} - {MAIN_AGENT}
    assert sub_agents == {s.display_id for s in spawns}
    root = steps[0]
    for s in steps:  # every step's ancestors lead to the user input
        cur = s
        while cur.parent_step_id is not None:
            cur = by_id[cur.parent_step_id]
        assert cur.step_id == root.step_id
    # A sub-agent's shell call hangs under its own llm_call, which hangs under the spawn.
    for sub_shell in (s for s in steps if s.agent != MAIN_AGENT and s.name == "shell"):
        llm = by_id[sub_shell.parent_step_id]
        assert llm.agent == sub_shell.agent
        chain = by_id[by_id[llm.parent_step_id].parent_step_id]
        assert chain.name == "spawn_agent"
    assert (h.settings.workspace_root / sid / "sub.log").read_text() == "sub\nsub\n"


async def test_resume_after_a_crash_marks_retries_and_reports(make) -> None:
    """A record left by a dead process: an llm_call that asked for two calls, a read-only one
    interrupted and a shell one interrupted. Resume re-runs the read-only call, gives the
    shell call an 'interrupted' result, and tells every attached client."""
    from xclaw.store.steps.model import NewStep

    h = make(
        [
            {
                "text": "",
                "tool_calls": [
                    {"name": "read_file", "input": {"path": "a.txt"}},
                    sh("echo once >> fx"),
                ],
            },
            {"text": "resumed and finished"},
        ]
    )
    sid = await h.session()
    st = h.store
    (h.settings.workspace_root / sid).mkdir(parents=True, exist_ok=True)
    (h.settings.workspace_root / sid / "a.txt").write_text("alpha")
    user = st.record.write(AddStep(session_id=sid, step=NewStep(StepType.USER_INPUT, "user", "go")))
    llm = st.record.write(
        BeginStep(
            session_id=sid,
            step=NewStep(StepType.LLM_CALL, "script", {}, parent_step_id=user.step_id),
        )
    )
    calls = [
        {"id": "call_0_0", "name": "read_file", "input": {"path": "a.txt"}},
        {"id": "call_0_1", "name": "shell", "input": {"command": "echo once >> fx"}},
    ]
    st.record.write(finish(sid, llm.seq, output_data={"text": "", "tool_calls": calls}))
    for c in calls:
        st.record.write(
            BeginStep(
                session_id=sid,
                step=NewStep(
                    StepType.TOOL_CALL,
                    c["name"],
                    c["input"],
                    parent_step_id=llm.step_id,
                    call_id=c["id"],
                ),
            )
        )
    assert st.record.get_session(sid).status is Status.RUNNING

    assert await h.runtime.resume_if_needed(sid) is True
    await h.runtime.wait_idle(sid)

    notices = [f["content"] for f in h.of("notice")]
    # The seed's line, then one per call saying how it is retried: the read-only one now,
    # the shell command only by the model and with the person's approval — each reads on
    # from "retrying...", none against it.
    read_step = next(s for s in st.record.steps(sid) if s.name == "read_file").display_id
    shell_step = next(s for s in st.record.steps(sid) if s.name == "shell").display_id
    assert notices[:3] == [
        "[resume] detected interrupted tool_call, retrying...",
        f"[resume] read_file {read_step} is retried now, automatically: repeating it is safe",
        f"[resume] shell {shell_step} may or may not have run: it is retried only if the model "
        "asks for it again, and only once you approve",
    ]
    marked = [f["step"] for f in h.of("step") if f["step"]["error"] == "interrupted"]
    assert {m["name"] for m in marked} == {"read_file", "shell"}
    assert h.of("reply")[-1]["content"] == "resumed and finished"
    steps = st.record.steps(sid)
    retried = [s for s in steps if s.name == "read_file" and s.status is StepStatus.COMPLETED]
    assert len(retried) == 1 and "alpha" in retried[0].output_data  # re-run automatically
    assert not (
        h.settings.workspace_root / sid / "fx"
    ).exists()  # the shell call was not re-run blindly
    assert [s.name for s in steps if s.step_type is StepType.SYSTEM_ALERT] == ["resume"]
    assert st.record.get_session(sid).status is Status.SUCCESS
    # A second reconnect finds nothing to resume: the note does not pile up.
    assert await h.runtime.resume_if_needed(sid) is False


async def test_a_turn_opens_in_one_transaction(make) -> None:
    """A new session's first message: the session (titled), its lease and the settling of
    what the last run left are one commit, and the run then reads what it needs in one go."""
    h = make([{"text": "", "tool_calls": [sh("echo hi")]}, {"text": "done"}])
    await h.runtime.leases.register()
    sid = "turn-in-one-commit-0001"
    before = h.store.record.commits
    await h.runtime.send(sid, "a first message, which names the session", create=True)
    assert h.store.record.commits - before == 1
    session = h.store.record.get_session(sid)
    assert session.title == "a first message, which names the session"
    assert h.store.leases.lease_info(sid).owner == h.runtime.worker_id
    h.runtime.subscribe(sid, h.frames.append)
    await h.runtime.wait_idle(sid)
    assert h.store.record.get_session(sid).status is Status.SUCCESS
    # The lease was given back when the run ended: another worker may take it at once.
    assert not h.store.leases.lease_info(sid).live


async def test_a_new_message_settles_what_a_dead_run_left_pending(make) -> None:
    """The opening write marks the last run's dangling steps, a pending approval included
    (new input answers it): kept, failed as interrupted (nothing lost)."""
    from tests.store.builders import approval, llm, user

    h = make([{"text": "answered"}])
    sid = h.store.record.create_session().session_id
    h.store.record.write(AddStep(session_id=sid, step=user("clean up")))
    asked = h.store.record.write(BeginStep(session_id=sid, step=llm()))
    h.store.record.write(finish(sid, asked.seq, output_data={"text": "", "tool_calls": []}))
    pending = h.store.record.write(
        BeginStep(session_id=sid, step=approval())
    )  # the process died while it waited
    assert h.store.record.get_session(sid).status is Status.PAUSED
    await h.session(sid)
    await h.turn(sid, "never mind, just answer")
    again = h.store.record.get_step(sid, pending.seq)
    assert again.status is StepStatus.FAILED and again.error_message == "interrupted"
    assert h.of("step")[0]["step"]["id"] == pending.display_id  # told first
    assert h.store.record.get_session(sid).status is Status.SUCCESS
