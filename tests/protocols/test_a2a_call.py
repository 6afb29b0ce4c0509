"""Two xclaw gateways, one calling the other over A2A with the `a2a_call` tool: the call
completes; the called gateway SIGKILLed mid-task is restarted and the call follows the task
to its end; the calling gateway SIGKILLed mid-call settles the call on resume by asking the
remote agent (never by sending it again); a remote task that needs input becomes an approval
a person answers, in every approval mode."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, write_script
from tests.waiting import until
from xclaw.tools.a2a_call import A2aCallTool
from xclaw.tools.a2a_remote import call_ids
from xclaw.tools.a2a_settings import RemoteAgent
from xclaw.tools.base import ToolContext

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


def call_b(**args: Any) -> dict[str, Any]:
    return {"name": "a2a_call", "input": {"agent": "b", **args}}


def steps(server: Server, sid: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{server.http}/api/sessions/{sid}/steps?n=0",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["steps"]
    return found


def sessions(server: Server) -> list[str]:
    r = httpx.get(
        f"{server.http}/api/sessions",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    return [s["sessionId"] for s in r.json()["sessions"]]


def b_has(pred: Any, what: str) -> Any:
    """Until `pred` (a read of the record, in a thread) holds: B is slow under load."""
    return until(pred, what, 90, 0.1, in_thread=True)


def pair(
    tmp_path: Path, a_turns: list[dict[str, Any]], b_turns: list[dict[str, Any]], *, b_mode: str
) -> tuple[Server, Server]:
    """B serves A2A; A calls it (`a2a.agents.b`)."""
    b_root = tmp_path / "b"
    b_root.mkdir()
    b = Server(root=b_root, script=write_script(b_root / "script.json", b_turns), approval=b_mode)
    b.start()
    a_root = tmp_path / "a"
    a_root.mkdir()
    a = Server(root=a_root, script=write_script(a_root / "script.json", a_turns), approval="yolo")
    a.config_extra = (
        "a2a:\n  agents:\n    b:\n"
        f"      card_url: {b.http}/.well-known/agent-card.json\n"
        f"      token: {b.token}\n"
        "      timeout_s: 90\n"
    )
    a.start()
    return a, b


@pytest.fixture
def servers() -> Any:
    started: list[Server] = []
    yield started
    for s in started:
        s.kill()


REVIEW = [
    {"text": "Reviewing.", "tool_calls": [sh("echo reviewed >> review.txt")]},
    {"text": "Review done: looks good."},
]
ASK_B = [
    {"text": "Asking b.", "tool_calls": [call_b(message="review the change")]},
    {"text": "b says it looks good."},
]


def b_session(b: Server) -> str:
    (sid,) = sessions(b)
    return sid


async def test_one_gateway_calls_another(tmp_path: Path, servers: list[Server]) -> None:
    a, b = pair(tmp_path, ASK_B, REVIEW, b_mode="yolo")
    servers += [a, b]
    c = await Client.open(a)
    await c.attach("caller")
    reply = await c.turn("get it reviewed")
    assert reply["type"] == "reply" and reply["content"] == "b says it looks good."
    (call,) = [s for s in steps(a, "caller") if s["type"] == "tool_call"]
    assert call["status"] == "completed"
    assert "completed" in call["output"] and "Review done: looks good." in call["output"]
    sid = b_session(b)
    assert sid == call_ids("caller", "call_0_0").context_id  # the call's own context
    assert [s["type"] for s in steps(b, sid)].count("user_input") == 1
    assert b.workspace(sid).joinpath("review.txt").read_text() == "reviewed\n"


SLOW_REVIEW = [
    {"text": "Reviewing.", "tool_calls": [sh("echo reviewed >> review.txt")]},
    {"text": "Thinking.", "tool_calls": [sh("sleep 4")]},
    {"text": "Review done: looks good."},
]


async def test_the_called_gateway_killed_mid_task_is_followed_to_the_end(
    tmp_path: Path, servers: list[Server]
) -> None:
    a, b = pair(tmp_path, ASK_B, SLOW_REVIEW, b_mode="yolo")
    servers += [a, b]
    c = await Client.open(a)
    await c.attach("caller")
    await c.send({"type": "message", "sessionId": "caller", "content": "get it reviewed"})
    sid = await b_has(lambda: sessions(b) and b_session(b), "b has the task")
    await b_has(
        lambda: any(s["input"] == {"command": "sleep 4"} for s in steps(b, sid)), "b sleeps"
    )
    b.kill()  # SIGKILL the serving gateway mid-task
    b.start()
    reply = await c.until(lambda f: f.get("type") in ("reply", "error"), timeout=120)
    assert reply == {**reply, "type": "reply", "content": "b says it looks good."}
    assert [s["type"] for s in steps(b, sid)].count("user_input") == 1  # never sent again
    assert b.workspace(sid).joinpath("review.txt").read_text() == "reviewed\n"
    (call,) = [s for s in steps(a, "caller") if s["type"] == "tool_call"]
    assert call["status"] == "completed" and "Review done" in call["output"]


async def test_the_calling_gateway_killed_mid_call_settles_it_by_asking(
    tmp_path: Path, servers: list[Server]
) -> None:
    a, b = pair(tmp_path, ASK_B, SLOW_REVIEW, b_mode="yolo")
    servers += [a, b]
    c = await Client.open(a)
    await c.attach("caller")
    await c.send({"type": "message", "sessionId": "caller", "content": "get it reviewed"})
    sid = await b_has(lambda: sessions(b) and b_session(b), "b has the task")
    await b_has(
        lambda: any(s["input"] == {"command": "sleep 4"} for s in steps(b, sid)), "b sleeps"
    )
    a.kill()  # SIGKILL the caller while its a2a_call waits
    a.start()
    c2 = await Client.open(a)
    await c2.attach("caller")  # resumes the session: the interrupted call is settled first
    reply = await c2.until(lambda f: f.get("type") in ("reply", "error"), timeout=120)
    assert reply == {**reply, "type": "reply", "content": "b says it looks good."}
    calls = [s for s in steps(a, "caller") if s["type"] == "tool_call"]
    assert [(s["status"], s["error"]) for s in calls] == [
        ("failed", "interrupted"),
        ("completed", None),
    ]
    assert calls[1]["output"].startswith("[settled by asking b")
    assert "Review done: looks good." in calls[1]["output"]
    resume = next(s for s in steps(a, "caller") if s["name"] == "resume")
    assert resume["input"]["settledByWorkspace"] == [calls[1]["id"]]
    assert resume["input"]["mayHaveRun"] == []  # nobody was asked
    assert not [s for s in steps(a, "caller") if s["name"] == "approval"]
    assert [s["type"] for s in steps(b, sid)].count("user_input") == 1  # never sent again
    assert b.workspace(sid).joinpath("review.txt").read_text() == "reviewed\n"


async def test_a_call_the_remote_has_no_task_for_is_left_to_a_person(
    tmp_path: Path, servers: list[Server]
) -> None:
    """No evidence, no settlement: a message the remote never got is not settled (and never
    sent by the settling)."""
    a, b = pair(tmp_path, ASK_B, REVIEW, b_mode="yolo")
    servers += [a, b]
    config = RemoteAgent(card_url=f"{b.http}/.well-known/agent-card.json", token=b.token)
    tool = A2aCallTool({"b": config})
    ctx = ToolContext(workspace=tmp_path, session_id="never", call_id="call_9_9")
    found = await asyncio.to_thread(tool.check_effect, {"agent": "b", "message": "hi"}, ctx)
    assert found is None
    assert sessions(b) == []


NEEDS_INPUT = [
    {"text": "", "tool_calls": [sh("echo risky > risky.txt")]},
    {"text": "Did the risky thing."},
]


async def test_a_remote_that_needs_input_becomes_an_approval(
    tmp_path: Path, servers: list[Server]
) -> None:
    ctx = call_ids("caller", "call_0_0").context_id
    remote_task = f"{ctx}:s0001"
    asking = [
        {"text": "Asking b.", "tool_calls": [call_b(message="do the risky thing")]},
        {
            "text": "b asks; answering.",
            "tool_calls": [call_b(task_id=remote_task, message="approve")],
        },
        {"text": "b did it."},
    ]
    a, b = pair(tmp_path, asking, NEEDS_INPUT, b_mode="ask")
    servers += [a, b]
    c = await Client.open(a)
    await c.attach("caller")  # A runs in yolo: the answer is asked all the same
    await c.send({"type": "message", "sessionId": "caller", "content": "go"})
    asked = await c.until(lambda f: f.get("type") in ("approval_request", "reply"), timeout=120)
    assert asked["type"] == "approval_request", asked
    assert asked["input"] == {"agent": "b", "task_id": remote_task, "message": "approve"}
    assert "asked for input" in asked["reason"]
    first = next(s for s in steps(a, "caller") if s["type"] == "tool_call")
    assert "input-required" in first["output"] and "Approval needed" in first["output"]
    assert not b.workspace(ctx).joinpath("risky.txt").exists()
    await c.send(
        {"type": "approval", "sessionId": "caller", "stepId": asked["stepId"], "approve": True}
    )
    reply = await c.until(lambda f: f.get("type") in ("reply", "error"), timeout=120)
    assert reply["type"] == "reply" and reply["content"] == "b did it."
    assert b.workspace(ctx).joinpath("risky.txt").read_text() == "risky\n"
    approval = next(s for s in steps(b, ctx) if s["name"] == "approval")
    assert approval["output"]["approved"] is True
    assert approval["output"]["by"]["client"] == "a2a"
