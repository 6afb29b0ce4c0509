"""Declared agents through a real `xclaw serve` (docs/agents.md): xclaw.yaml's `agents:` —
a support agent with instructions, no built-in tools, a Python tool of its own that reads its
context, a hook and a structured answer — listed by `GET /api/agents` and `/agents`, started
with `/new --agent NAME` or a message naming it, said in the `session` frame, run the same
through the Python API's remote client and `xclaw run --agent`, and refused by name when
nobody declares it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import xclaw
from tests.gateway.harness import Client, Server, clean_env, xclaw_cmd
from tests.gateway.mcp_http import call, mcp_host
from tests.gateway.test_workers import TOKEN, PgServer

pytestmark = pytest.mark.slow

TOOLS = '''
from pydantic import BaseModel

import xclaw


class Ticket(BaseModel):
    title: str
    priority: int


@xclaw.tool(read_only=True)
def lookup(order_id: str, ctx: xclaw.ToolContext) -> str:
    """An order's status."""
    return f"{order_id} shipped (session {ctx.session_id}, agent {ctx.agent})"


def no_refunds(event: xclaw.BeforeTool) -> xclaw.HookDecision | None:
    if event.input.get("order_id") == "REFUND":
        return xclaw.deny("refunds go through a person")
    return None
'''

AGENTS = """
agents:
  support:
    description: answers order questions
    instructions: You answer order questions.
    builtin_tools: []
    tools: ["support_tools:lookup"]
    output_type: support_tools:Ticket
    hooks:
      before_tool: ["support_tools:no_refunds"]
"""


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": args}]}


SCRIPT = {
    "turns": [
        _call("shell", command="touch hacked"),
        _call("lookup", order_id="REFUND"),
        _call("lookup", order_id="A-1"),
        {"output": {"title": "A-1 shipped", "priority": 3}},
    ]
}


class AgentServer(Server):
    """A server whose xclaw.yaml declares the agents above (their module beside it)."""

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(config.read_text() + AGENTS)
        (self.root / "support_tools.py").write_text(TOOLS)
        return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    root = tmp_path_factory.mktemp("agents")
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    s = AgentServer(root=root, script=script, approval="ask")
    s.start()
    yield s
    s.kill()


def _api(server: Server) -> httpx.Client:
    return httpx.Client(
        base_url=server.http + "/api", headers={"Authorization": f"Bearer {server.token}"}
    )


def _tools(client: Client) -> list[tuple[str, str]]:
    return [(f["name"], f["state"]) for f in client.of_type("tool") if f["state"] != "running"]


def test_the_agents_are_listed(server: AgentServer) -> None:
    with _api(server) as api:
        agents = api.get("/agents").json()["agents"]
    assert [a["name"] for a in agents] == ["default", "support"]
    support = agents[1]
    assert support["description"] == "answers order questions"
    assert support["output"] == "Ticket" and len(support["digest"]) == 16


async def test_new_agent_runs_the_declared_agent_and_the_session_says_so(
    server: AgentServer,
) -> None:
    client = await Client.open(server)
    await client.attach(None)
    await client.send({"type": "message", "content": "/agents"})
    listed = await client.until(lambda f: f.get("type") == "notice" and "[agents]" in f["content"])
    assert "support  answers order questions (output Ticket)" in listed["content"]
    await client.send({"type": "message", "content": "/new --agent support"})
    attached = await client.until_type("session")
    assert attached["agent"] == "support" and attached["created"] is True
    sid = attached["sessionId"]
    client.session_id = sid
    reply = await client.turn("where is my order A-1?")
    assert reply["type"] == "reply", reply
    assert reply["output"] == {"title": "A-1 shipped", "priority": 3}
    assert reply["agent"] == "support"
    # No shell to call; the hook denied the refund with its reason; its own tool ran.
    tools = [f for f in client.of_type("tool") if f["state"] != "running"]
    assert tools[0]["name"] == "shell" and "unknown tool 'shell'" in tools[0]["output"]
    assert tools[1]["output"] == "Not run: denied by a hook: refunds go through a person"
    assert tools[2]["output"] == f"A-1 shipped (session {sid}, agent support)"
    assert not server.workspace(sid).joinpath("hacked").exists()
    # Recorded: another client attaching is told which agent the session runs.
    other = await Client.open(server)
    await other.send({"type": "reconnect", "sessionId": sid})
    assert (await other.until_type("session"))["agent"] == "support"
    with _api(server) as api:
        meta = api.get(f"/sessions/{sid}").json()["metadata"]
    assert meta["agent"]["name"] == "support" and len(meta["agent"]["digest"]) == 16


async def test_a_message_names_its_agent_and_an_unknown_one_is_refused(
    server: AgentServer,
) -> None:
    client = await Client.open(server)
    await client.attach(None)
    await client.send({"type": "message", "content": "/new --agent nobody"})
    refused = await client.until_type("error")
    assert refused["code"] == "unknown_agent" and "declared: support" in refused["content"]
    await client.send({"type": "message", "content": "hello", "agent": "nobody"})
    assert (await client.until_type("error"))["code"] == "unknown_agent"
    await client.send({"type": "message", "content": "order A-1?", "agent": "support"})
    reply = await client.until(lambda f: f.get("type") in ("reply", "error"))
    assert reply.get("output") == {"title": "A-1 shipped", "priority": 3}, reply
    with _api(server) as api:
        created = api.post("/sessions", json={"title": "t", "agent": "support"})
        assert created.status_code == 201
        assert created.json()["metadata"]["agent"]["name"] == "support"
        bad = api.post("/sessions", json={"agent": "nobody"})
        assert bad.status_code == 404 and bad.json()["code"] == "unknown_agent"


async def test_the_remote_client_runs_the_same_definition(
    server: AgentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(server.root))  # the program declares it from the same module
    support = xclaw.Agent(
        "support",
        description="answers order questions",
        instructions="You answer order questions.",
        builtin_tools=[],
        tools=["support_tools:lookup"],
        output_type="support_tools:Ticket",
        hooks=xclaw.Hooks(before_tool=["support_tools:no_refunds"]),
    )
    with _api(server) as api:
        served = {a["name"]: a["digest"] for a in api.get("/agents").json()["agents"]}
    assert support.digest == served["support"]  # the same declaration, the same definition
    async with xclaw.connect(server.http, token=server.token, agent=support) as agent:
        assert agent.name == "support"
        session = await agent.new_session()
        result = await session.send("order A-1?")
        assert type(result.output).__name__ == "Ticket"
        assert result.output.priority == 3
        assert (await session.info()).agent == "support"
    changed = xclaw.Agent("support", builtin_tools=[])
    with pytest.raises(xclaw.AgentMismatch, match="the gateway runs its own"):
        await xclaw.connect(server.http, token=server.token, agent=changed)
    with pytest.raises(xclaw.UnknownAgent):
        await xclaw.connect(server.http, token=server.token, agent="nobody")


def test_xclaw_run_agent(server: AgentServer, tmp_path: Path) -> None:
    env = server.env()
    env["XCLAW_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [*xclaw_cmd(), "run", "--agent", "support", "order A-1?"],
        cwd=server.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agent support" in done.stderr
    assert '{"title": "A-1 shipped", "priority": 3}' in done.stdout
    unknown = subprocess.run(
        [*xclaw_cmd(), "run", "--agent", "nobody", "hi"],
        cwd=server.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert unknown.returncode == 2 and "no agent named 'nobody'" in unknown.stderr


def test_xclaw_chat_new_agent_shows_the_agent(server: AgentServer, tmp_path: Path) -> None:
    done = subprocess.run(
        [*xclaw_cmd(), "chat", "--url", server.http, "--new"],
        input="/new --agent support\norder A-1?\n",
        cwd=tmp_path,
        env=clean_env(XCLAW_HOME=str(server.home)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "agent support" in done.stdout
    assert 'xclaw: {"title": "A-1 shipped", "priority": 3}' in done.stdout


SLOW = '''
import time

import xclaw


@xclaw.tool
def slow(ctx: xclaw.ToolContext) -> str:
    """The slow part."""
    (ctx.workspace / "slow.txt").write_text("started")
    time.sleep(30)
    return "done"
'''


@dataclass
class Worker(PgServer):
    """A worker on a shared SQLite file whose xclaw.yaml declares `support` with these
    instructions (two workers with different ones declare two definitions)."""

    instructions: str = "v1"

    def env(self) -> dict[str, str]:
        env = super().env()
        config = Path(env["XCLAW_CONFIG"])
        config.write_text(
            config.read_text()
            + "agents:\n  support:\n"
            + f"    instructions: {self.instructions}\n"
            + '    builtin_tools: []\n    tools: ["slow_tools:slow"]\n'
        )
        (self.root / "slow_tools.py").write_text(SLOW)
        return env


async def test_a_worker_with_another_definition_does_not_take_the_session_over(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [_call("slow"), {"text": "done"}]}))
    workers = []
    try:
        for name, instructions in (("a", "v1"), ("b", "v2")):
            root = tmp_path / name
            root.mkdir()
            w = Worker(
                root=root,
                script=script,
                approval="yolo",
                db=str(tmp_path / "shared.db"),
                shared_workspace=tmp_path / "workspaces",
                instructions=instructions,
            )
            workers.append(w)
            w.start()
        a, b = workers
        ca = await Client.open(a, token=TOKEN)
        await ca.attach(None)
        sid = ca.session_id
        await ca.send({"type": "message", "content": "go", "agent": "support"})
        await ca.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
        a.kill()  # SIGKILL mid-tool
        cb = await Client.open(b, token=TOKEN)
        await cb.send({"type": "reconnect", "sessionId": sid})
        refused = await cb.until_type("error")
        assert refused["code"] == "agent_mismatch", refused
        assert "agent 'support' (definition" in refused["content"]
        status = await cb.until(lambda f: f.get("type") == "status" and "busy" in f)
        assert status["busy"] is False and status["state"] == "interrupted"
        assert [f for f in cb.seen if f.get("type") == "tool"] == []  # nothing ran on b
        # The worker with the recorded definition takes it up again.
        a.start()
        ca = await Client.open(a, token=TOKEN)
        await ca.send({"type": "reconnect", "sessionId": sid})
        reply = await ca.until(lambda f: f.get("type") in ("reply", "error"), timeout=90)
        assert reply == {"type": "reply", "sessionId": sid, "content": "done", "agent": "support"}
    finally:
        for w in workers:
            w.kill()


async def test_an_mcp_host_starts_a_session_with_a_declared_agent(server: AgentServer) -> None:
    """`/mcp`'s send_message names the agent: an unknown one is refused before anything is
    written; a declared one runs, and the session records it."""
    async with mcp_host(server) as host:
        refused = await host.call_tool("send_message", {"text": "hi", "agent": "nobody"})
        assert refused.is_error
        assert "unknown_agent" in refused.content[0].text
        assert "declared: support" in refused.content[0].text
        done = await call(host, "send_message", text="order A-1?", agent="support", wait_s=60)
        assert done["state"] == "success", done
        sid = done["session_id"]
    with _api(server) as api:
        meta = api.get(f"/sessions/{sid}").json()["metadata"]
    assert meta["agent"]["name"] == "support"
