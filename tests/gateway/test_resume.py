"""The original tutorial's scenario (*the seed*, docs/architecture.md glossary) over the wire: kill
the server mid-task, restart, reconnect, carry on (resume on reconnect, approval asked again, kept
session id) — and never repeat a completed side effect."""

from __future__ import annotations

import json

import pytest

from tests.gateway.harness import Client

pytestmark = pytest.mark.slow

SLOW = "sleep 2"
# Each shell command appends a line to effects.txt in the session's workspace: the file is
# the count of side effects that actually happened.
SEED_TASK = [
    {
        "text": "Step one.",
        "tool_calls": [{"name": "shell", "input": {"command": "echo one >> effects.txt"}}],
    },
    {"text": "Now the slow part.", "tool_calls": [{"name": "shell", "input": {"command": SLOW}}]},
    # After the restart the model is called again (k = 2 assistant messages in the history)
    # and re-issues the interrupted call, as the resume prompt asks.
    {
        "text": "Retrying the slow part.",
        "tool_calls": [{"name": "shell", "input": {"command": SLOW}}],
    },
    {
        "text": "Last step.",
        "tool_calls": [{"name": "shell", "input": {"command": "echo three >> effects.txt"}}],
    },
    {"text": "All done: one, slow, three."},
]


async def test_sigkill_during_sleep_then_resume_on_reconnect(server_factory) -> None:
    server = server_factory(SEED_TASK, approval="yolo")
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    assert sid and len(sid) >= 16
    await c.send({"type": "message", "sessionId": sid, "content": "run the three steps"})
    await c.until(
        lambda f: (
            f.get("type") == "tool"
            and f.get("state") == "running"
            and f["input"].get("command") == SLOW
        )
    )
    effects = server.workspace(sid) / "effects.txt"
    assert effects.read_text() == "one\n"

    server.kill()  # SIGKILL: no chance to clean up anything
    server.start()

    c2 = await Client.open(server)
    await c2.send({"type": "reconnect", "sessionId": sid})
    session = await c2.until_type("session")
    assert session["sessionId"] == sid and session["created"] is False
    assert session["status"] == "Running"
    history = await c2.until_type("history")
    seed_view = json.loads(history["content"])  # the tutorial's clients parse a JSON string
    assert seed_view[0] == {"role": "user", "content": "run the three steps"}
    notice = await c2.until_type("notice")
    assert notice["content"] == "[resume] detected interrupted tool_call, retrying..."
    # The interrupted call was not read-only: re-running it needs a human, with a warning.
    ask = await c2.until_type("approval_request")
    assert ask["name"] == "shell" and ask["maybeRepeated"] is True
    await c2.send({"type": "approval", "sessionId": sid, "stepId": ask["stepId"], "approve": True})
    reply = await c2.until_type("reply", timeout=20)
    assert reply["content"] == "All done: one, slow, three."
    # Exactly once each: the completed `echo one` did not run again.
    assert effects.read_text() == "one\nthree\n"
    status = [f["status"] for f in c2.of_type("status")]
    assert status[0] == "Running" and "Success" in status

    # A third connect after success: history only, no run.
    c3 = await Client.open(server)
    after = await c3.attach(sid)
    assert after["busy"] is False and after["status"] == "Success"
    await c3.send({"type": "ping"})
    assert (await c3.recv())["type"] == "pong"
    assert not c3.of_type("notice")
    for c_ in (c, c2, c3):
        await c_.close()


async def test_paused_session_asks_again_after_restart_and_another_client_answers(
    server_factory,
) -> None:
    server = server_factory(
        [
            {
                "text": "Writing.",
                "tool_calls": [{"name": "shell", "input": {"command": "echo x >> effects.txt"}}],
            },
            {"text": "Wrote it."},
        ],
        approval="ask",
    )
    c1 = await Client.open(server)
    await c1.attach(None)
    sid = c1.session_id
    await c1.send({"type": "message", "sessionId": sid, "content": "write x"})
    first = await c1.until_type("approval_request")
    assert first["maybeRepeated"] is False

    # A refresh while Paused with the run in flight: the request is sent to the new socket.
    c2 = await Client.open(server)
    status = await c2.attach(sid)
    assert status["busy"] is True and status["status"] == "Paused"
    again = [f for f in c2.seen if f.get("type") == "approval_request"]
    assert [f["stepId"] for f in again] == [first["stepId"]]

    # The process that waited for y/n dies: after restart the question is asked again.
    server.kill()
    server.start()
    c3 = await Client.open(server)
    await c3.send({"type": "reconnect", "sessionId": sid})
    asked = await c3.until_type("approval_request")
    assert asked["name"] == "shell" and asked["input"] == {"command": "echo x >> effects.txt"}
    assert not (server.workspace(sid) / "effects.txt").exists()  # nothing ran yet

    # Any attached client may answer: a fourth socket does.
    c4 = await Client.open(server)
    st = await c4.attach(sid)
    assert st["status"] == "Paused" and st["busy"] is True
    await c4.send(
        {"type": "approval", "sessionId": sid, "stepId": asked["stepId"], "approve": True}
    )
    assert (await c3.until_type("reply"))["content"] == "Wrote it."
    assert (await c4.until_type("reply"))["content"] == "Wrote it."
    assert (server.workspace(sid) / "effects.txt").read_text() == "x\n"
    # The stale answer from before is refused clearly, and the connection stays usable.
    await c4.send(
        {"type": "approval", "sessionId": sid, "stepId": asked["stepId"], "approve": True}
    )
    err = await c4.until_type("error")
    assert err["code"] == "bad_step"
    await c4.send({"type": "ping"})
    assert (await c4.until_type("pong"))["type"] == "pong"
    for c_ in (c1, c2, c3, c4):
        await c_.close()


async def test_a_call_holding_a_secret_is_still_known_again_after_a_crash(tmp_path) -> None:
    """The record holds an interrupted call redacted; the model re-issues it with the secret
    in it. It is still recognised as the same call: a human is asked, warned that it may
    already have run (no blind repeat), and nothing of the secret reaches the record."""
    from tests.gateway.harness import Server, write_script

    key = "resume-secret-9f8e7d6c5b"
    slow = f"sleep 2; echo {key} >> effects.txt"
    turns = [
        {"text": "Slow.", "tool_calls": [{"name": "shell", "input": {"command": slow}}]},
        {"text": "Again.", "tool_calls": [{"name": "shell", "input": {"command": slow}}]},
        {"text": "Done."},
    ]
    root = tmp_path / "srv"
    root.mkdir()
    server = Server(root=root, script=write_script(root / "s.json", turns), approval="yolo")
    base_env = server.env
    server.env = lambda: {**base_env(), "RESUME_API_KEY": key}  # type: ignore[method-assign]
    server.start()
    try:
        c = await Client.open(server)
        await c.attach(None)
        sid = c.session_id
        await c.send({"type": "message", "sessionId": sid, "content": "go"})
        await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        server.kill()
        server.start()
        c2 = await Client.open(server)
        await c2.send({"type": "reconnect", "sessionId": sid})
        ask = await c2.until_type("approval_request")
        assert ask["maybeRepeated"] is True, ask
        assert key not in json.dumps(ask)
        await c2.send(
            {"type": "approval", "sessionId": sid, "stepId": ask["stepId"], "approve": True}
        )
        assert (await c2.until_type("reply", timeout=20))["content"] == "Done."
    finally:
        server.kill()


async def test_a_scripts_branches_answer_what_people_say_not_the_resume_note(
    server_factory,
) -> None:
    """The runtime's resume note goes to the model as the last user message of the resumed
    call ("… do not start over …"); a branch whose `when` it happens to contain must not
    answer it (docs/scripted-model.md, Branches): the script goes on where the conversation
    left it, and the branch still answers a person who says it."""
    server = server_factory([], approval="yolo")
    server.kill()
    assert server.script is not None
    server.script.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "The slow part.",
                        "tool_calls": [{"name": "shell", "input": {"command": SLOW}}],
                    },
                    {
                        "text": "Again.",
                        "tool_calls": [{"name": "shell", "input": {"command": SLOW}}],
                    },
                    {"text": "All done."},
                ],
                "branches": [{"when": "start over", "turns": [{"text": "Starting over."}]}],
            }
        )
    )
    server.start()
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    await c.send({"type": "message", "sessionId": sid, "content": "run the slow part"})
    await c.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
    server.kill()
    server.start()

    c2 = await Client.open(server)
    await c2.send({"type": "reconnect", "sessionId": sid})
    ask = await c2.until_type("approval_request")  # the model asked for the call again
    assert ask["maybeRepeated"] is True
    await c2.send({"type": "approval", "sessionId": sid, "stepId": ask["stepId"], "approve": True})
    assert (await c2.until_type("reply", timeout=30))["content"] == "All done."
    # Said by a person, the branch answers.
    await c2.send({"type": "message", "sessionId": sid, "content": "start over, please"})
    assert (await c2.until_type("reply", timeout=30))["content"] == "Starting over."
    for c_ in (c, c2):
        await c_.close()
