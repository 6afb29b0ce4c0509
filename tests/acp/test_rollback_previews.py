"""A rollback past outside effects, through the editor's and the agent host's protocols, is
shown before it is done — what it would undo and what it would leave done — and done only on
confirmation, its answer listing the compensations that ran (docs/editors.md,
docs/mcp-server.md). `xclaw acp` driven by the official ACP Python client, `xclaw mcp` by the
official MCP client, both on a real ledger (tests/ledger.py: a Python tool whose payment row
a declared compensation deletes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.exceptions import RequestError
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.acp.client import Editor, agent_env, spawned
from tests.ledger import Ledger, pay

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

PAYMENTS = [
    {"text": "paying A", "tool_calls": [pay("A")]},
    {"text": "paying B", "tool_calls": [pay("B")]},
    {"text": "paid"},
]
IRREVERSIBLE = [
    {"text": "paying A", "tool_calls": [pay("A")]},
    {"text": "paying M", "tool_calls": [pay("M", tool="record_payment_unchecked")]},
    {"text": "paid"},
]


def _env(tmp: Path, ledger: Ledger, turns: list[dict[str, Any]]) -> dict[str, str]:
    script = tmp / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    return agent_env(XCLAW_MODEL=f"script:{script}", XCLAW_DB=str(tmp / "x.db"), **ledger.env())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


async def test_acp_rollback_shows_the_compensations_first_and_undoes_on_confirm(
    tmp_path: Path, project: Path
) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(project)
    editor = Editor()
    env = _env(tmp_path, ledger, PAYMENTS)
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("pay A then B")])
        assert ledger.refs() == ["A", "B"]

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001")])
        shown = editor.text()[before:]
        assert "undone, in this order (2)" in shown, shown
        assert shown.index("record_payment") < shown.index("/rollback s0001 --confirm")
        assert ledger.refs() == ["A", "B"]  # nothing done yet
        assert ledger.calls() == ["pay A", "pay B"]

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001 --confirm")])
        done = editor.text()[before:]
        assert "Rolled back to just before s0001" in done, done
        assert "Undone outside the workspace (2)" in done
        assert ledger.refs() == []
        assert ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]


async def test_acp_rollback_past_an_irreversible_effect_needs_its_acceptance(
    tmp_path: Path, project: Path
) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(project)
    editor = Editor()
    env = _env(tmp_path, ledger, IRREVERSIBLE)
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("pay")])
        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001")])
        shown = editor.text()[before:]
        assert "NOT undone — they stay done (1)" in shown, shown
        assert "--accept-irreversible" in shown

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001 --confirm")])
        refused = editor.text()[before:]
        assert "Rolled back" not in refused and "/rollback:" in refused, refused
        assert ledger.refs() == ["A", "M"]  # nothing done

        before = len(editor.text())
        await conn.prompt(
            session_id=sid, prompt=[text_block("/rollback s0001 --accept-irreversible")]
        )
        done = editor.text()[before:]
        assert "Rolled back to just before s0001" in done, done
        assert "Left done (1)" in done and "record_payment_unchecked" in done
        assert ledger.refs() == ["M"]


async def _mcp_call(s: ClientSession, name: str, **args: Any) -> dict[str, Any]:
    result = await s.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_mcp_rollback_previews_then_undoes_on_confirm(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(tmp_path)
    env = _env(tmp_path, ledger, PAYMENTS)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "xclaw", "mcp", "--approval", "yolo"],
        env=env,
        cwd=str(tmp_path),
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        sent = await _mcp_call(s, "send_message", text="pay A then B", wait_s=60)
        sid = sent["session_id"]
        assert ledger.refs() == ["A", "B"]

        preview = await _mcp_call(s, "rollback", session_id=sid, step_id="s0001")
        assert preview["rolled_back"] is False
        assert [e["tool"] for e in preview["preview"]["compensable"]] == [
            "record_payment",
            "record_payment",
        ]
        assert "confirm=true" in preview["text"]
        assert ledger.refs() == ["A", "B"]  # nothing done yet

        done = await _mcp_call(s, "rollback", session_id=sid, step_id="s0001", confirm=True)
        assert done["rolled_back"] is True and done["step_id"] == "s0001"
        assert [c["tool"] for c in done["compensated"]] == ["record_payment", "record_payment"]
        assert ledger.refs() == []
        assert ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]


async def test_mcp_rollback_without_outside_effects_is_the_plain_rewind(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(tmp_path)
    env = _env(tmp_path, ledger, [{"text": "hello"}])
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "xclaw", "mcp"], env=env, cwd=str(tmp_path)
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        sid = (await _mcp_call(s, "send_message", text="hi", wait_s=60))["session_id"]
        done = await _mcp_call(s, "rollback", session_id=sid, step_id="s0001")
        assert done["rolled_back"] is True and done["deleted"] >= 2
        assert done["compensated"] == [] and done["not_undone"] == []


async def test_acp_rollback_retry_finishes_what_a_failed_compensation_stopped(
    tmp_path: Path, project: Path
) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(project)
    audit = tmp_path / "audit.lock"  # while it exists, A's payment cannot be reversed
    audit.touch()
    editor = Editor()
    env = {**_env(tmp_path, ledger, PAYMENTS), "UNDO_FAIL": "A", "UNDO_FAIL_WHILE": str(audit)}
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("pay A then B")])

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001 --confirm")])
        stopped = editor.text()[before:]
        assert "/rollback:" in stopped and "the ledger refuses" in stopped, stopped
        assert "--retry" in stopped and "Rolled back" not in stopped
        assert ledger.refs() == ["A"]  # B undone, A not; nothing rewound yet
        # Until it is retried or abandoned, the session takes no message: the editor is told
        # how to go on (invalid params, not an internal error).
        with pytest.raises(RequestError) as refused:
            await conn.prompt(session_id=sid, prompt=[text_block("pay C")])
        assert refused.value.code == -32602 and "/rollback s0001 --retry" in str(refused.value)
        assert (refused.value.data or {}).get("code") == "rollback_pending"

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001")])
        shown = editor.text()[before:]
        assert "stopped half-way" in shown and "/rollback s0001 --retry" in shown, shown
        assert ledger.refs() == ["A"]  # the preview does nothing

        audit.unlink()
        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001 --retry")])
        done = editor.text()[before:]
        assert "Rolled back to just before s0001" in done, done
        assert "Undone outside the workspace (2)" in done
        assert ledger.refs() == []
        # The compensation that completed is not run again; the failed one ran once more.
        assert ledger.calls() == ["pay A", "pay B", "undo B", "undo A"]


async def test_acp_rollback_abandon_undoes_nothing_more_and_the_session_goes_on(
    tmp_path: Path, project: Path
) -> None:
    ledger = Ledger(tmp_path)
    ledger.install(project)
    editor = Editor()
    turns = [*PAYMENTS, {"text": "Carrying on."}]
    env = {**_env(tmp_path, ledger, turns), "UNDO_FAIL": "A"}
    async with spawned(editor, project, "--approval", "yolo", env=env) as (conn, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("pay A then B")])
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback s0001 --confirm")])
        assert ledger.refs() == ["A"]

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/rollback --abandon")])
        abandoned = editor.text()[before:]
        assert "abandoned: nothing more is undone" in abandoned, abandoned
        assert ledger.refs() == ["A"]  # B stays undone, A stays done
        assert ledger.calls() == ["pay A", "pay B", "undo B"]

        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("carry on")])
        assert "Carrying on." in editor.text()[before:]  # the session takes messages again
        before = len(editor.text())
        await conn.prompt(session_id=sid, prompt=[text_block("/steps 50")])
        listing = editor.text()[before:]
        assert "compensation" in listing and "record_payment" in listing, listing
