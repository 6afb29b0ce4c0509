"""`xclaw acp --connect URL`: the same agent relaying to a running gateway (a real `xclaw
serve`), so a run goes on while the editor is closed: the editor's agent is SIGKILLed
mid-tool, the gateway finishes the run, and a new agent process finds it on `session/load`.
The approval the editor gave is recorded as a person through `acp`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

import xclaw
from tests.acp.client import Editor, agent_env, spawned

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


async def test_a_run_survives_the_editor_and_is_found_on_load(gateway: Any, tmp_path: Path) -> None:
    slow = "echo run >> count.txt; sleep 3"
    server = gateway(
        [
            {"text": "Counting.", "tool_calls": [{"name": "shell", "input": {"command": slow}}]},
            {"text": "Finished."},
        ],
        approval="ask",
    )
    args = ("--connect", server.http, "--token", server.token)
    first = Editor(lambda call: "allow")
    async with spawned(first, tmp_path, *args, env=agent_env()) as (conn, proc):
        info = await conn.initialize(protocol_version=1)
        assert info.agent_capabilities.load_session is True
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        run = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("count")]))
        await first.until(lambda: first.asked and "tool_call_update" in first.kinds(sid))
        count = server.workspace(sid) / "count.txt"
        await first.until(lambda: count.exists())
        proc.send_signal(signal.SIGKILL)  # the editor closes mid-tool: the gateway goes on
        await proc.wait()
        with pytest.raises(Exception):  # noqa: B017 - the connection is gone
            await asyncio.wait_for(run, 30)
    second = Editor(lambda call: "reject")
    async with spawned(second, tmp_path, *args, env=agent_env()) as (conn, _):
        await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        await second.until(lambda: "Finished." in second.text())
        assert second.kinds(sid)[0] == "user_message_chunk"
        with pytest.raises(RequestError) as other:
            await conn.load_session(cwd=str(tmp_path), session_id="not-" + sid, mcp_servers=[])
        assert other.value.code == -32002
    assert count.read_text() == "run\n"  # run once, by the gateway
    assert not second.asked
    async with xclaw.connect(server.http, token=server.token) as agent:
        steps = await (await agent.session(sid)).steps()
        assert (await (await agent.session(sid)).info()).state == "success"
    by = [s.output["by"] for s in steps if s.name == "approval"]
    assert by == [{"kind": "person", "client": "acp", "via": "http"}]
