"""`/mcp` on a real `xclaw serve`, driven by the official `mcp` Python client over streamable
HTTP: the tools, their structured answers and the resources; an approval elicited from the
host; the gateway's tokens and users exactly as on the HTTP API (another's session looks
nonexistent, a share lets a viewer read and not act, an MCP session answers only the
credential that opened it, a wrong token is refused 401); and the gateway SIGKILLed while a
host waits on a run: the host's next calls see the run continue and finish, nothing twice."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitResult

from tests.gateway.harness import Client, Server
from tests.gateway.mcp_http import RawMcp, call, mcp_host, messages, refused
from tests.gateway.teams_harness import add_user, sh, share, team_server, xclaw
from tests.waiting import until

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest.fixture(scope="module")
def team(module_server_factory: Any) -> Server:
    return team_server(module_server_factory, name="mcp-team")


@pytest.fixture(scope="module")
def tokens(team: Server) -> dict[str, str]:
    return {name: add_user(team, name) for name in ("alice", "bob")}


async def test_a_session_through_the_tools_with_the_approval_elicited(team: Server) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"approve": True})

    async with mcp_host(team, elicit=elicit) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == {
            "send_message",
            "session_status",
            "list_sessions",
            "steps",
            "approve",
            "rollback",
            "fork",
            "cancel",
        }
        done = await call(s, "send_message", text="write it", wait_s=60)
        sid = done["session_id"]
        assert done["state"] == "success" and done["reply"] == "done" and not done["running"]
        assert len(asked) == 1 and "shell" in asked[0]
        steps = (await call(s, "steps", session_id=sid))["steps"]
        approval = next(st for st in steps if st["name"] == "approval")
        assert approval["output"]["approved"] is True
        assert approval["output"]["by"]["client"] == "mcp"
        assert approval["output"]["by"]["via"] == "http"
        assert team.workspace(sid).joinpath("f").read_text() == "hi\n"
        text = (await s.read_resource(f"xclaw://sessions/{sid}/transcript")).contents[0].text
        assert '"done"' in text
        listed = (await s.read_resource("xclaw://sessions")).contents[0].text
        assert sid in listed
        # Time travel: a fork after the first message, the original untouched, then a
        # rollback of the original to before its first message.
        first = steps[0]["id"]
        forked = await call(s, "fork", session_id=sid, step_id=first, title="branch")
        assert forked["from_session_id"] == sid and forked["session_id"] != sid
        rolled = await call(s, "rollback", session_id=sid, step_id=first)
        assert rolled["deleted"] == len(steps)
        assert (await call(s, "steps", session_id=sid))["steps"] == []
        assert (await call(s, "cancel", session_id=sid))["cancelled"] is False


async def test_without_elicitation_the_approve_tool_answers(team: Server) -> None:
    async with mcp_host(team) as s:
        sent = await call(s, "send_message", text="write it", wait_s=60)
        sid = sent["session_id"]
        assert sent["state"] == "paused" and sent["running"] and "reply" not in sent
        [request] = sent["pending_approvals"]
        assert request["name"] == "shell" and request["maybe_repeated"] is False
        answer = await call(s, "approve", session_id=sid, step_id=request["step_id"], approve=True)
        assert answer["approved"] is True
        done = await call(s, "session_status", session_id=sid, wait_s=60)
        assert done["reply"] == "done" and done["state"] == "success"
        again = await refused(
            s, "approve", session_id=sid, step_id=request["step_id"], approve=True
        )
        assert again.startswith("bad_step:")
        busy = await call(s, "send_message", text="slow", session_id=sid, wait_s=0)
        assert busy["running"] is True and busy["state"] == "running"
        second = await refused(s, "send_message", text="hello", session_id=sid)
        assert second.startswith("busy:")
        assert (await call(s, "cancel", session_id=sid))["cancelled"] is True
        stopped = await call(s, "session_status", session_id=sid, wait_s=60)
        assert stopped["running"] is False and stopped["state"] == "waiting"


async def test_a_member_neither_sees_nor_acts_on_anothers_session(
    team: Server, tokens: dict[str, str]
) -> None:
    async with mcp_host(team, tokens["alice"]) as alice:
        theirs = await call(alice, "send_message", text="hello", wait_s=60)
        sid = theirs["session_id"]
        assert theirs["reply"] == "hi there"
    async with mcp_host(team, tokens["bob"]) as bob:
        nobody = await refused(bob, "steps", session_id="no-such-session")
        assert nobody.startswith("unknown_session:")
        for name, args in (
            ("session_status", {}),
            ("steps", {}),
            ("send_message", {"text": "hello"}),
            ("approve", {"step_id": "s0001", "approve": True}),
            ("rollback", {"step_id": "s0001"}),
            ("fork", {"step_id": "s0001"}),
            ("cancel", {}),
        ):
            text = await refused(bob, name, session_id=sid, **args)
            # Exactly as for an id nobody has: the id is all it says.
            assert text == nobody.replace("no-such-session", sid), (name, text)
        with pytest.raises(MCPError) as unknown:
            await bob.read_resource(f"xclaw://sessions/{sid}/transcript")
        assert unknown.value.message == nobody.replace("no-such-session", sid)
        assert sid not in str(await call(bob, "list_sessions"))
        assert sid not in (await bob.read_resource("xclaw://sessions")).contents[0].text
        own = await call(bob, "send_message", text="hello", wait_s=60)
        assert own["reply"] == "hi there"
        # Shared as a viewer: read, never act (as on the HTTP API).
        share(team, sid, "bob", "viewer")
        assert (await call(bob, "steps", session_id=sid))["steps"]
        assert (await refused(bob, "send_message", text="hi", session_id=sid)).startswith(
            "forbidden:"
        )
    async with mcp_host(team) as admin:  # the server's token: every session
        assert (await call(admin, "steps", session_id=sid))["steps"]
        assert own["session_id"] in str(await call(admin, "list_sessions", limit=500))


async def test_an_mcp_session_answers_only_the_credential_that_opened_it(
    team: Server, tokens: dict[str, str]
) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with RawMcp(team, tokens["alice"]) as alice, RawMcp(team, tokens["bob"]) as bob:
        await alice.open()
        assert (await alice.post(listing)).status_code == 200
        bob.session = alice.session  # bob presents alice's mcp-session-id
        stolen = await bob.post(listing)
        assert stolen.status_code == 404 and "tools" not in stolen.text
        # The stateless revision (no MCP session): each request as whoever signed it in.
        hers = await alice.stateless(
            "tools/call", {"name": "send_message", "arguments": {"text": "hello", "wait_s": 60}}
        )
        sid = hers["result"]["structuredContent"]["session_id"]
        assert hers["result"]["structuredContent"]["reply"] == "hi there"
        seen = await bob.stateless(
            "tools/call", {"name": "steps", "arguments": {"session_id": sid}}
        )
        assert seen["result"]["isError"] is True
        assert "unknown_session" in seen["result"]["content"][0]["text"]


async def test_a_wrong_token_is_refused(team: Server) -> None:
    async with RawMcp(team, "xcu_not-a-token") as raw:
        r = await raw.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["code"] == "unauthorized"
    with pytest.raises(BaseExceptionGroup) as caught:  # the official client: it cannot start
        async with mcp_host(team, "xcu_not-a-token") as s:
            await s.list_tools()
    assert caught.group_contains(MCPError)
    async with httpx.AsyncClient() as plain:  # no token at all
        assert (await plain.post(f"{team.http}/mcp", json={})).status_code == 401


async def test_a_call_in_flight_ends_when_its_user_is_removed(
    team: Server, tokens: dict[str, str]
) -> None:
    """As a removed user's sockets are closed at once: a call waiting on a run is not left
    to go on answering them (nor to approve for them) until its wait is over."""
    carol = add_user(team, "carol")
    async with mcp_host(team, carol) as s:
        sent = await call(s, "send_message", text="slow", wait_s=0)
        started = asyncio.get_running_loop().time()
        waiting = asyncio.ensure_future(
            s.call_tool("session_status", {"session_id": sent["session_id"], "wait_s": 120})
        )
        await asyncio.to_thread(xclaw, team, "users", "remove", "carol")
        ended = await asyncio.wait_for(waiting, 60)
        assert asyncio.get_running_loop().time() - started < 30  # not the 30 s run, not 120 s
        assert ended.is_error and "unauthorized" in ended.content[0].text


# --- the gateway killed while a host waits --------------------------------------------------

SLOW = "echo run >> count.txt; sleep 60"
KILLED_MID_TOOL = [
    {"text": "Counting.", "tool_calls": [sh(SLOW)]},
    # After the restart the interrupted call comes back with a result that says so; the
    # model goes on with a different call (the slow one is never issued again).
    {
        "after_interruption": True,
        "text": "Checking.",
        "tool_calls": [sh("echo check >> count.txt")],
    },
    {"text": "Finished."},
]


async def test_the_gateway_killed_mid_run_the_hosts_next_calls_see_it_finish(
    server_factory: Any,
) -> None:
    server: Server = server_factory(KILLED_MID_TOOL, approval="yolo")
    async with httpx.AsyncClient() as http:  # a session to watch before it runs
        made = await http.post(
            f"{server.http}/api/sessions", headers={"Authorization": f"Bearer {server.token}"}
        )
        sid = made.json()["sessionId"]
    watch = await Client.open(server)  # to know when the command runs, without polling
    await watch.attach(sid)
    count = server.workspace(sid) / "count.txt"
    with pytest.raises(BaseExceptionGroup) as ended:
        async with mcp_host(server) as s:
            # The host waits on the run it started when the gateway dies.
            args = {"text": "count", "session_id": sid, "wait_s": 120}
            waiting = asyncio.ensure_future(s.call_tool("send_message", args))
            await watch.until(lambda f: f.get("type") == "tool" and f.get("state") == "running")
            # The command has begun: it has written its line.
            await until(count.exists, f"{count} appears", 60, in_thread=True)
            server.kill()  # SIGKILL
            await asyncio.wait_for(waiting, 60)
    assert ended.group_contains(MCPError)  # the host hears its call end with the connection
    assert count.read_text() == "run\n"
    server.start()
    async with mcp_host(server) as s:  # the host reconnects (a new MCP session)
        done = await call(s, "session_status", session_id=sid, wait_s=120)
        assert done["state"] == "success" and done["reply"] == "Finished.", done
        steps = (await call(s, "steps", session_id=sid))["steps"]
        calls = [st for st in steps if st["type"] == "tool_call"]
        assert [c["input"]["command"] for c in calls] == [SLOW, "echo check >> count.txt"]
        assert calls[0]["status"] == "failed" and calls[0]["error"] == "interrupted"
    assert count.read_text() == "run\ncheck\n"  # nothing ran twice, nothing lost


async def test_hostile_input_gets_an_error_never_a_traceback_or_a_hang(
    team: Server, tokens: dict[str, str]
) -> None:
    def rpc(method: str, params: Any = None, id_: int = 7) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}

    def tool(name: str, **args: Any) -> dict[str, Any]:
        return rpc("tools/call", {"name": name, "arguments": args})

    async with RawMcp(team, tokens["bob"]) as raw:
        for body in ("{not json", "[]", '"a string"', '{"jsonrpc": "2.0"}', "[" * 100_000):
            r = await raw.post(body)  # before any MCP session
            assert 400 <= r.status_code < 500 and "error" in r.text, (body[:20], r.text)
        await raw.open()
        for body in ("{not json", "null", '{"jsonrpc": "1.0", "id": 1, "method": "x"}'):
            r = await raw.post(body)
            assert 400 <= r.status_code < 500 and "error" in messages(r)[0], (body, r.text)
        [unknown] = messages(await raw.post(rpc("no/such/method")))
        assert unknown["error"]["code"] == -32601
        [nested] = messages(
            await raw.post(
                '{"jsonrpc":"2.0","id":1,"method":"tools/list",'
                '"params":' + "[" * 5000 + "]" * 5000 + "}"
            )
        )
        assert "error" in nested
        too_big = await raw.post(tool("send_message", text="x" * (5 * 1_000_000)))
        assert too_big.status_code == 413
        answers = {
            "unknown tool": tool("no_such_tool"),
            "text too long": tool("send_message", text="x" * 1_000_001, wait_s=0),
            "a slash command": tool("send_message", text="/rollback s0001", wait_s=0),
            "a NUL in an id": tool("steps", session_id="abc\x00def"),
            "a long id": tool("steps", session_id="a" * 100_000),
            "a path for an id": tool("steps", session_id="../../etc/passwd"),
            "a number for an id": tool("steps", session_id=5),
            "a word for a wait": tool("session_status", session_id="abc", wait_s="soon"),
            "a missing argument": tool("approve", session_id="abc"),
            "steps out of range": tool("steps", session_id="abc", n=-3),
            "a huge wait": tool("session_status", session_id="abc", wait_s=1e308),
        }
        for what, body in answers.items():
            r = await asyncio.wait_for(raw.post(body), 30)
            [answer] = messages(r)
            said = answer.get("error") or answer["result"]
            assert "error" in answer or said.get("isError") is True, (what, answer)
            assert "Traceback" not in r.text and len(r.text) < 20_000, (what, r.text[:500])
    async with httpx.AsyncClient() as plain:
        health = await plain.get(
            f"{team.http}/api/health", headers={"Authorization": f"Bearer {team.token}"}
        )
        assert health.status_code == 200
    assert "Traceback" not in team.logs()
