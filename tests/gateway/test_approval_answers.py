"""The record says who answered an approval (docs/approval.md, "Who decided"): a person and
through which client, in the approval step's output — seen in the `step` frame, `xclaw
steps`/`trace` and the export; and what a rule decided without asking has no approval step.
Real servers, real clients, the real CLI."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, clean_env, xclaw_cmd

pytestmark = pytest.mark.slow


def sh(command: str) -> dict[str, Any]:
    return {"name": "shell", "input": {"command": command}}


SCRIPT = {
    "turns": [{"text": "", "tool_calls": [sh("echo hi > f")]}, {"text": "done"}],
    "branches": [
        {"when": "wipe", "turns": [{"text": "", "tool_calls": [sh("rm -rf /")]}, {"text": "no"}]}
    ],
}


def make_server(factory: Any, approval: str, name: str) -> Server:
    server: Server = factory(None, approval=approval, name=name)
    server.kill()  # with the script that has branches (the factory writes turns only)
    assert server.script is None
    path = server.root / "script.json"
    path.write_text(json.dumps(SCRIPT))
    server.script = path
    return server.start()


@pytest.fixture(scope="module")
def asking(module_server_factory) -> Server:
    return make_server(module_server_factory, "ask", "asking")


@pytest.fixture(scope="module")
def yolo(module_server_factory) -> Server:
    return make_server(module_server_factory, "yolo", "yolo")


def cli(server: Server, *args: str) -> str:
    r = subprocess.run(
        [*xclaw_cmd(), *args, "--db", str(server.home / "xclaw.db")],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(XCLAW_HOME=str(server.home), NO_COLOR="1"),
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def answered(c: Client, step_id: str) -> dict[str, Any]:
    """The approval step as the `step` frame shows it once answered."""
    return next(
        f["step"]
        for f in c.seen
        if f.get("type") == "step"
        and f["step"]["id"] == step_id
        and f["step"]["status"] != "running"
    )


async def ask_once(server: Server) -> tuple[Client, dict[str, Any]]:
    c = await Client.open(server)
    await c.attach(None)
    await c.send({"type": "message", "sessionId": c.session_id, "content": "write f"})
    return c, await c.until_type("approval_request", timeout=30)


async def test_an_answer_on_the_page_is_recorded_as_a_person_on_the_web_page(
    asking: Server,
) -> None:
    c, ask = await ask_once(asking)
    sid = c.session_id
    await c.send(
        {
            "type": "approval",
            "sessionId": sid,
            "stepId": ask["stepId"],
            "approve": True,
            "client": "web",
        }
    )
    assert (await c.until_type("reply", timeout=30))["content"] == "done"
    step = answered(c, ask["stepId"])
    assert step["output"] == {
        "approved": True,
        "why": "approved by the user (web page)",
        "by": {"kind": "person", "client": "web", "via": "websocket"},
    }
    # The CLI's listings and the export say the same.
    assert "asked to run shell: echo hi > f — approved by the user (web page)" in cli(
        asking, "steps", sid
    )
    assert "approved by the user (web page)" in cli(asking, "trace", sid)
    steps = json.loads(cli(asking, "steps", sid, "--json"))
    assert [s["output"]["by"] for s in steps if s["name"] == "approval"] == [step["output"]["by"]]
    async with httpx.AsyncClient(timeout=10) as http:
        export = (
            await http.get(
                f"{asking.http}/api/sessions/{sid}/export", params={"token": asking.token}
            )
        ).text
    lines = [json.loads(x) for x in export.splitlines()]
    outputs = [x.get("output") for x in lines[1:] if x.get("name") == "approval"]
    assert [o["by"] for o in outputs] == [step["output"]["by"]]
    await c.close()


async def test_an_answer_by_the_http_api_says_so(asking: Server) -> None:
    c, ask = await ask_once(asking)
    sid = c.session_id
    url = f"{asking.http}/api/sessions/{sid}/approvals/{ask['stepId']}"
    auth = {"token": asking.token}
    async with httpx.AsyncClient(timeout=10) as http:
        bad = await http.post(url, params=auth, json={"approve": "yes"})
        assert bad.status_code == 400 and bad.json()["code"] == "bad_request"
        ok = await http.post(url, params=auth, json={"approve": False})
        assert ok.status_code == 200 and ok.json()["approved"] is False
        assert (await c.until_type("reply", timeout=30))["content"] == "done"
        again = await http.post(url, params=auth, json={"approve": True})
        assert again.status_code == 400 and again.json()["code"] == "bad_step"
    assert answered(c, ask["stepId"])["output"] == {
        "approved": False,
        "why": "denied by the user (HTTP API)",
        "by": {"kind": "person", "client": "api", "via": "http"},
    }
    await c.close()


async def test_a_client_that_names_no_client_is_recorded_by_its_route(asking: Server) -> None:
    c, ask = await ask_once(asking)
    await c.send(
        {"type": "approval", "sessionId": c.session_id, "stepId": ask["stepId"], "approve": True}
    )
    await c.until_type("reply", timeout=30)
    assert answered(c, ask["stepId"])["output"]["by"] == {"kind": "person", "via": "websocket"}
    await c.close()


async def test_a_malformed_client_hint_is_a_bad_frame_and_the_approval_still_waits(
    asking: Server,
) -> None:
    c, ask = await ask_once(asking)
    frame = {"type": "approval", "sessionId": c.session_id, "stepId": ask["stepId"]}
    await c.send({**frame, "approve": True, "client": "\u001b[31mweb"})
    err = await c.until_type("error")
    assert err["code"] == "bad_frame" and "client" in err["content"]
    await c.send({**frame, "approve": True, "client": "chat"})
    await c.until_type("reply", timeout=30)
    assert answered(c, ask["stepId"])["output"]["by"]["client"] == "chat"
    await c.close()


async def test_a_deny_pattern_refuses_without_an_approval_step_and_the_call_names_it(
    asking: Server,
) -> None:
    """Nobody was asked, so there is no approval step: the refused call's own failed step
    says which rule refused it (the deny pattern), and the step ids stay the plain ones."""
    c = await Client.open(asking)
    await c.attach(None)
    assert (await c.turn("wipe it all"))["content"] == "no"
    assert not c.of_type("approval_request")
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.get(
            f"{asking.http}/api/sessions/{c.session_id}/steps",
            params={"token": asking.token, "n": 0},
        )
    steps = r.json()["steps"]
    assert [(s["id"], s["type"]) for s in steps] == [
        ("s0001", "user_input"),
        ("s0002", "llm_call"),
        ("s0003", "tool_call"),
        ("s0004", "llm_call"),
    ]
    refused = steps[2]
    assert (refused["name"], refused["status"]) == ("shell", "failed")
    assert refused["error"].startswith("refused by policy: matches 'rm -rf /'")
    assert "(deny pattern rm\\s+" in refused["error"]  # which rule: the pattern itself
    listing = cli(asking, "steps", c.session_id)
    assert "system_alert" not in listing
    assert "s0003  tool_call     shell" in listing and "[failed: refused by policy" in listing
    await c.close()


async def test_a_call_yolo_runs_has_no_approval_step_the_session_says_yolo(yolo: Server) -> None:
    """What a rule runs without asking is no approval: the call is the step after the model's
    answer (s0003), and the session's recorded configuration says which mode let it run."""
    c = await Client.open(yolo)
    await c.attach(None)
    assert (await c.turn("write f"))["content"] == "done"
    steps = {f["step"]["id"]: f["step"] for f in c.of_type("step")}
    assert sorted(steps) == ["s0001", "s0002", "s0003", "s0004"]
    assert (steps["s0003"]["type"], steps["s0003"]["name"]) == ("tool_call", "shell")
    assert not any(s["name"] == "approval" for s in steps.values())
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.get(f"{yolo.http}/api/sessions/{c.session_id}", params={"token": yolo.token})
    assert r.json()["metadata"]["config"]["approval"] == "yolo"
    await c.close()
